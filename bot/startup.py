"""What the bot checks and sets up once it has logged in: where its commands live, whether it may
register them in the server, and whether the game-master roles and channels it was given exist.

A startup that cannot work says so in one sentence (`StartupError`, exit status 2, so systemd does
not restart into it); what only might be wrong is a warning that names it.
"""
from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from typing import Any

import discord

log = logging.getLogger(__name__)

# What the Oracle does in a channel: read it, answer, open threads on answers and write in them,
# show sources as embeds, and react ⏳/✋ to questions that wait.
PERMISSIONS = discord.Permissions(
    view_channel=True, send_messages=True, send_messages_in_threads=True, create_public_threads=True,
    embed_links=True, read_message_history=True, add_reactions=True,
)
SCOPES = ("bot", "applications.commands")


class StartupError(Exception):
    """The bot cannot start as configured; the message says why and what to do, in one sentence."""


def invite_url(application_id: int, guild_id: int | None = None) -> str:
    """The invite that gives the bot what it needs: the bot and its slash commands, with its permissions."""
    guild = discord.Object(id=guild_id) if guild_id else discord.utils.MISSING
    return discord.utils.oauth_url(application_id, permissions=PERMISSIONS, guild=guild, scopes=SCOPES)


def commands_key(client: Any, guild_id: int | None) -> str:
    """What registering the commands depends on: the application, the scope and every definition."""
    definitions = [command.to_dict(client.tree) for command in client.tree.get_commands()]
    payload = {"application": client.application_id, "guild": guild_id, "commands": definitions}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


async def sync_commands_if_changed(client: Any, guild_id: int | None) -> int | None:
    """`sync_commands` when the definitions, the scope or the application changed since the last
    registration this bot's data folder remembers; None when nothing did. Discord rate-limits
    registrations (200 a day per server), and a restart or a reconnect changes nothing."""
    key = commands_key(client, guild_id)
    if await client.history.kept("commands") == key:
        return None
    synced = await sync_commands(client, guild_id)
    await client.history.keep("commands", key)
    return synced


async def sync_commands(client: Any, guild_id: int | None) -> int:
    """Register `/oracle` in one scope only and clear the other, so it never shows twice: the server's
    (DISCORD_GUILD_ID: at once, and only there) or every server's (global: Discord takes up to an hour
    to show changes). A server the bot cannot register commands in is a `StartupError`."""
    tree = client.tree
    if guild_id:
        guild = discord.Object(id=guild_id)
        tree.copy_global_to(guild=guild)
        try:
            synced = await tree.sync(guild=guild)
        except discord.Forbidden as exc:
            raise StartupError(
                f"Discord refused to register the commands in server {guild_id} ({exc.text or exc.status}): check "
                f"DISCORD_GUILD_ID (Developer Mode → right-click the server → Copy Server ID) and invite the bot "
                f"with {invite_url(client.application_id, guild_id)}"
            ) from None
        tree.clear_commands(guild=None)
        await tree.sync()  # an empty global set: drops what an earlier run without DISCORD_GUILD_ID registered
        return len(synced)
    synced = await tree.sync()
    async for guild in client.fetch_guilds(limit=None):
        try:
            await tree.sync(guild=guild)  # no server commands in the tree: clears an earlier DISCORD_GUILD_ID's
        except discord.HTTPException as exc:
            log.warning("could not clear server %s's own copy of the commands (%s)", guild.id, exc.text or exc.status)
    return len(synced)


def missing_roles(guild_roles: Iterable[Any], wanted: Iterable[str], *, any_of: bool) -> list[str]:
    """Game-master roles (names, casefolded, or ids) the server lacks. `any_of`: the names are
    alternatives (the default list), so only all of them missing is a problem."""
    have = {r.name.casefold() for r in guild_roles} | {str(r.id) for r in guild_roles}
    missing = [w for w in wanted if w.casefold() not in have]
    wanted = list(wanted)
    if any_of and len(missing) < len(wanted):
        return []
    return missing


def warn_about_places(client: Any) -> None:
    """Warn, naming them, about game-master roles and channels configured but absent from every
    server the bot is in: a typo there silently makes nobody a game master, or nowhere private."""
    guilds = list(client.guilds)
    if not guilds:
        log.warning("the bot is in no server yet: invite it with %s", invite_url(client.application_id))
        return
    settings = client.settings
    roles = [r for g in guilds for r in g.roles]
    channel_ids = {c.id for g in guilds for c in g.channels}
    default = type(settings).model_fields["gm_roles"].default_factory()
    for table in client.tables:
        place = table.place
        own = place.gm_roles is not None
        wanted = list(place.gm_roles) if own else list(settings.gm_roles)
        # The default names are alternatives (a server has a "GM" or a "DM" role); names a game master
        # chose are each meant to exist.
        gone = missing_roles(roles, wanted, any_of=not own and sorted(wanted) == sorted(default))
        where = f" (campaign {place.name})" if not client.tables.single else ""
        if gone:
            log.warning(
                "no role named %s in %s%s: only %s game masters. Check ORACLE_GM_ROLES or the campaigns file.",
                ", ".join(repr(r) for r in gone), _servers(guilds), where,
                "members with Manage Server are" if client.tables.single else "members with the campaign's other roles are",
            )
        channels = list(place.gm_channels if place.gm_channels is not None else settings.gm_channels)
        lost = [c for c in channels if int(c) not in channel_ids]
        if lost:
            log.warning("game-master channel %s is in no server the bot sees%s: check ORACLE_GM_CHANNELS or the "
                        "campaigns file, and that the bot may view it", ", ".join(map(str, lost)), where)


def _servers(guilds: list[Any]) -> str:
    return f"server {guilds[0].name!r}" if len(guilds) == 1 else f"any of the {len(guilds)} servers"

"""The world as the fake stores it: members, roles, channels (text, voice, category, forum) and
messages as plain dicts in Discord's REST shape, and the payloads of the bot user, the application,
the guild and a channel. ``add_*_channel`` returns a ``PendingId``: an ``int`` one may await until
the CHANNEL_CREATE was sent.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Self

from .constants import (
    ADMINISTRATOR,
    ALL_PERMS,
    DISCORD_EPOCH_MS,
    EPHEMERAL,
    GUILD_CATEGORY,
    GUILD_FORUM,
    GUILD_TEXT,
    GUILD_VOICE,
    INTENT_GUILD_MEMBERS,
    INTENT_GUILD_PRESENCES,
    INTENT_MESSAGE_CONTENT,
    LOADING,
    THREAD_TYPES,
)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat()


class _Snowflakes:
    """Real-looking snowflakes: current time in the top bits, strictly increasing."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
            value = max((ms << 22) | (1 << 17), self._last + 1)
            self._last = value
            return value


class Pending:
    """What a synchronous world change returns: ``await`` it to wait until the gateway event it
    caused (if a client is connected) was sent. Not awaiting it is fine: any later dispatch waits."""

    def __init__(self, task: asyncio.Task | None) -> None:
        self.task = task

    async def _wait(self) -> None:
        if self.task is not None and not self.task.done():
            await asyncio.wait([self.task])

    def __await__(self) -> Generator[Any, None, None]:
        return self._wait().__await__()


class PendingId(int):
    """An id (an ``int``) that, like ``Pending``, can be awaited; ``await`` gives the plain id."""

    task: asyncio.Task | None

    def __new__(cls, value: int, task: asyncio.Task | None = None) -> Self:
        obj = super().__new__(cls, value)
        obj.task = task
        return obj

    async def _wait(self) -> int:
        if self.task is not None and not self.task.done():
            await asyncio.wait([self.task])
        return int(self)

    def __reduce__(self) -> tuple[type[int], tuple[int]]:  # copies and pickles are plain ids
        return int, (int(self),)

    def __await__(self) -> Generator[Any, None, int]:
        return self._wait().__await__()


@dataclass
class FakeMember:
    """A guild member (or the bot). ``roles`` are role ids besides @everyone."""

    id: int
    username: str
    global_name: str | None = None
    roles: list[int] = field(default_factory=list)
    nick: str | None = None
    bot: bool = False
    joined_at: str = "2024-01-01T00:00:00+00:00"

    @property
    def mention(self) -> str:
        return f"<@{self.id}>"

    def user_payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": str(self.id), "username": self.username, "discriminator": "0", "global_name": self.global_name,
            "avatar": None, "avatar_decoration_data": None, "banner": None, "accent_color": None, "public_flags": 0,
        }
        if self.bot:
            data["bot"] = True
        return data

    def member_payload(self, *, with_user: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "nick": self.nick, "avatar": None, "banner": None, "roles": [str(r) for r in self.roles],
            "joined_at": self.joined_at, "premium_since": None, "deaf": False, "mute": False, "flags": 0,
            "pending": False, "communication_disabled_until": None,
        }
        if with_user:
            data["user"] = self.user_payload()
        return data


@dataclass
class FakeMessage:
    """A message in the fake's store. ``data`` is the current message object (REST shape)."""

    data: dict[str, Any]
    source: str  # "channel", "interaction", "followup", "user", "system"
    body: Any = None  # the request JSON that created it (None for injected user messages)
    edits: list[Any] = field(default_factory=list)  # request JSONs of later edits, in order
    interaction_id: int | None = None
    deleted: bool = False
    reactions: list[str] = field(default_factory=list)

    @property
    def id(self) -> int:
        return int(self.data["id"])

    @property
    def channel_id(self) -> int:
        return int(self.data["channel_id"])

    @property
    def author_id(self) -> int:
        return int(self.data["author"]["id"])

    @property
    def content(self) -> str:
        return self.data["content"]

    @property
    def embeds(self) -> list[dict]:
        return self.data["embeds"]

    @property
    def components(self) -> list[dict]:
        return self.data["components"]

    @property
    def flags(self) -> int:
        return self.data["flags"]

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & EPHEMERAL)

    @property
    def loading(self) -> bool:
        return bool(self.flags & LOADING)

    @property
    def mention_ids(self) -> list[int]:
        """Users this message actually pings (after allowed_mentions)."""
        return [int(u["id"]) for u in self.data["mentions"]]

    @property
    def allowed_mentions(self) -> Any:
        """The latest ``allowed_mentions`` the bot sent for this message (None if never sent)."""
        for body in reversed([self.body, *self.edits]):
            if isinstance(body, dict) and "allowed_mentions" in body:
                return body["allowed_mentions"]
        return None

    @property
    def thread_id(self) -> int | None:
        thread = self.data.get("thread")
        return int(thread["id"]) if thread else None

    def __repr__(self) -> str:
        return (
            f"<FakeMessage id={self.id} channel={self.channel_id} source={self.source}"
            f" flags={self.flags} content={self.content!r}>"
        )


class World:
    """Roles, members and channels of the one guild, permissions, and their payloads."""

    def _add_role(self, role_id: int, name: str, permissions: int, *, position: int, color: int = 0,
                  hoist: bool = False, mentionable: bool = False, managed: bool = False,
                  tags: dict | None = None) -> dict:
        role: dict[str, Any] = {
            "id": str(role_id), "name": name, "color": color,
            "colors": {"primary_color": color, "secondary_color": None, "tertiary_color": None},
            "hoist": hoist, "icon": None, "unicode_emoji": None, "position": position,
            "permissions": str(permissions), "managed": managed, "mentionable": mentionable, "flags": 0,
        }
        if tags is not None:
            role["tags"] = tags
        self.roles[role_id] = role
        return role

    def add_role(self, name: str, permissions: int = 0, **kwargs: Any) -> int:
        role_id = self._ids.next()
        position = max(int(r["position"]) for r in self.roles.values()) + 1
        self._add_role(role_id, name, permissions, position=position, **kwargs)
        return role_id

    def add_member(self, username: str, *, roles: list[int] | None = None, global_name: str | None = None,
                   nick: str | None = None, bot: bool = False) -> FakeMember:
        """Add a member (before the client connects, or it will not see it in GUILD_CREATE)."""
        member = FakeMember(self._ids.next(), username, global_name, list(roles or []), nick, bot)
        self.members[member.id] = member
        return member

    def _new_channel(self, kind: int, name: str, channel_id: int | None, parent_id: int | None,
                     **fields: Any) -> PendingId:
        if parent_id is not None and self.channels.get(parent_id, {}).get("type") != GUILD_CATEGORY:
            raise ValueError(f"parent {parent_id} is not a category of this guild")
        channel_id = channel_id or self._ids.next()
        position = sum(1 for c in self.channels.values() if c["type"] == kind)
        channel: dict[str, Any] = {
            "id": str(channel_id), "type": kind, "guild_id": str(self.guild_id), "name": name,
            "position": position, "permission_overwrites": [], "nsfw": False,
            "parent_id": str(parent_id) if parent_id is not None else None, "flags": 0,
        }
        channel.update(fields)
        self.channels[channel_id] = channel
        self._notify()
        created = copy.deepcopy(channel)
        return PendingId(channel_id, self._soon(lambda session: self._dispatch(session, "CHANNEL_CREATE", created)))

    def add_text_channel(self, name: str, *, channel_id: int | None = None, topic: str | None = None,
                         parent_id: int | None = None) -> PendingId:
        """A text channel (type 0), in category ``parent_id`` if given; CHANNEL_CREATE if connected."""
        return self._new_channel(GUILD_TEXT, name, channel_id, parent_id, rate_limit_per_user=0, topic=topic,
                                 last_message_id=None, default_auto_archive_duration=1440)

    def add_category(self, name: str) -> PendingId:
        """A category (type 4) to put channels in (``parent_id``); CHANNEL_CREATE if connected."""
        return self._new_channel(GUILD_CATEGORY, name, None, None)

    def add_voice_channel(self, name: str, *, parent_id: int | None = None) -> PendingId:
        """A voice channel (type 2) with its text chat: members and the bot post messages there,
        but no thread can be opened from them (400 50024). CHANNEL_CREATE if connected."""
        return self._new_channel(GUILD_VOICE, name, None, parent_id, bitrate=64000, user_limit=0,
                                 rtc_region=None, video_quality_mode=1, last_message_id=None,
                                 rate_limit_per_user=0)

    def add_forum_channel(self, name: str, *, parent_id: int | None = None) -> PendingId:
        """A forum (type 15): only posts (threads, ``add_forum_post``), no messages of its own.
        CHANNEL_CREATE if connected."""
        return self._new_channel(GUILD_FORUM, name, None, parent_id, topic=None, last_message_id=None,
                                 rate_limit_per_user=0, default_auto_archive_duration=1440,
                                 available_tags=[], default_reaction_emoji=None,
                                 default_thread_rate_limit_per_user=0, default_sort_order=None,
                                 default_forum_layout=0)

    def permissions_for(self, member: FakeMember) -> int:
        if member.id == self.owner_id:
            return ALL_PERMS
        perms = int(self.roles[self.guild_id]["permissions"])
        for role_id in member.roles:
            if role_id in self.roles:
                perms |= int(self.roles[role_id]["permissions"])
        return ALL_PERMS if perms & ADMINISTRATOR else perms

    def _member(self, who: FakeMember | int | str) -> FakeMember:
        if isinstance(who, FakeMember):
            return who
        try:
            return self.members[int(who)]
        except (KeyError, ValueError):
            raise ValueError(f"unknown member {who!r}") from None

    def bot_user_payload(self) -> dict[str, Any]:
        return {**self.bot.user_payload(), "verified": True, "mfa_enabled": True, "email": None,
                "flags": 0, "locale": "en-US", "premium_type": 0}

    def application_payload(self) -> dict[str, Any]:
        flags = 0
        if self.privileged_intents & INTENT_GUILD_PRESENCES:
            flags |= 1 << 13
        if self.privileged_intents & INTENT_GUILD_MEMBERS:
            flags |= 1 << 15
        if self.privileged_intents & INTENT_MESSAGE_CONTENT:
            flags |= 1 << 19
        return {
            "id": str(self.app_id), "name": "Oracle", "icon": None, "description": "Campaign notes oracle",
            "summary": "", "type": None, "bot_public": False, "bot_require_code_grant": False,
            "verify_key": "0" * 64, "flags": flags, "owner": self.owner.user_payload(), "team": None,
            "bot": self.bot.user_payload(), "rpc_origins": [], "redirect_uris": [], "tags": [],
            "interactions_endpoint_url": None, "role_connections_verification_url": None,
            "approximate_guild_count": 1, "integration_types_config": {"0": {}},
        }

    def guild_payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": str(self.guild_id), "name": self.guild_name, "icon": None, "splash": None,
            "discovery_splash": None, "banner": None, "description": None, "owner_id": str(self.owner_id),
            "afk_channel_id": None, "afk_timeout": 300, "verification_level": 1,
            "default_message_notifications": 1, "explicit_content_filter": 0,
            "roles": [copy.deepcopy(r) for r in self.roles.values()], "emojis": [], "stickers": [],
            "features": [], "mfa_level": 0, "application_id": None,
            "system_channel_id": str(self.channel_id), "system_channel_flags": 0, "rules_channel_id": None,
            "public_updates_channel_id": None, "safety_alerts_channel_id": None, "max_members": 500000,
            "vanity_url_code": None, "premium_tier": 0, "premium_subscription_count": 0,
            "preferred_locale": "en-US", "nsfw_level": 0, "premium_progress_bar_enabled": False,
            "joined_at": self.bot.joined_at, "large": False, "unavailable": False, "lazy": True,
            "member_count": len(self.members), "members": [m.member_payload() for m in self.members.values()],
            "channels": [copy.deepcopy(c) for c in self.channels.values() if c["type"] not in THREAD_TYPES],
            "threads": [copy.deepcopy(self.channels[t]) for t in self.thread_ids
                        if not self.channels[t]["thread_metadata"]["archived"]],
            "voice_states": [], "presences": [], "stage_instances": [], "guild_scheduled_events": [],
            "soundboard_sounds": [], "embedded_activities": [], "application_command_counts": {},
        }
        return data

    def _channel_payload(self, channel_id: int, *, permissions_of: FakeMember | None = None) -> dict:
        data = copy.deepcopy(self.channels[channel_id])
        if permissions_of is not None:
            data["permissions"] = str(self.permissions_in(permissions_of, channel_id))
        return data

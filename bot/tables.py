"""The campaigns the bot serves, one `Table` each, and which one a Discord place belongs to.

A table is a campaign as the bot serves it: its index, its Oracle, its journal (in its own data
folder, so nothing of one campaign is ever read for another), where its news is announced, and who
its game masters are. Routing follows the campaigns' places (`bot/places.py`): the channel, then the
thread's parent, then the category; the single default campaign answers everywhere.

Game masters: a member whose role (by name or id) is one of the campaign's `gm_roles` (else the
bot's `ORACLE_GM_ROLES`). With one campaign, Manage Server or Administrator also makes one, as
before; with several, only the campaign's roles do, so a game master of one campaign is a player
in another, even a server admin.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import discord

from oracle import Campaign, Clearance, Index, Journal, Oracle, Titled

from .places import Place, Places
from .settings import BotSettings

log = logging.getLogger(__name__)


def place_of(channel: Any) -> tuple[int | None, int | None, int | None]:
    """(channel, thread parent, category) ids of a Discord channel, for routing."""
    if channel is None:
        return None, None, None
    if isinstance(channel, discord.Thread):
        parent = channel.parent
        return channel.id, channel.parent_id, getattr(parent, "category_id", None)
    return getattr(channel, "id", None), None, getattr(channel, "category_id", None)


@dataclass
class Table:
    campaign: Campaign
    place: Place
    index: Index
    oracle: Oracle
    journal: Journal
    announce_channel: int | None = None
    public: set[str] | None = field(default=None, repr=False)  # labels players could read at the last look

    @property
    def name(self) -> str:
        return self.campaign.name

    async def news(self) -> list[Titled]:
        """What players can read now that they could not at the last look; a first look is no news."""
        async with self.index.snapshot() as store:
            titles = await store.titles(Clearance.PLAYER)
        before, self.public = self.public, {t.label for t in titles}
        return [t for t in titles if t.label not in before] if before else []


class Tables:
    def __init__(self, places: Places, tables: list[Table], settings: BotSettings) -> None:
        self.places = places
        self.settings = settings
        self._tables = {t.name: t for t in tables}

    def __iter__(self) -> Iterator[Table]:
        return iter(self._tables.values())

    def __len__(self) -> int:
        return len(self._tables)

    @property
    def single(self) -> bool:
        return self.places.single

    def get(self, name: str) -> Table | None:
        return self._tables.get(name)

    def route(self, channel: Any) -> Table | None:
        name = self.places.route(*place_of(channel))
        return self._tables[name] if name is not None else None

    def is_game_master(self, member: Any, table: Table) -> bool:
        if not isinstance(member, discord.Member):
            return False
        if self.single and (member.guild_permissions.manage_guild or member.guild_permissions.administrator):
            return True
        roles = [r.name for r in member.roles] + [str(r.id) for r in member.roles]
        return table.place.is_gm_role(roles, self.settings.gm_roles)

    def is_gm_channel(self, channel: Any, table: Table) -> bool:
        """Whether game-master text of `table`'s campaign may be posted in `channel`: one of its
        game-master channels that belongs to it. A channel of another campaign inside its game-master
        category is not: that channel's readers are the other campaign's players."""
        return self.route(channel) is table and table.place.is_gm_channel(place_of(channel), self.settings.gm_channels)

    def visible_to(self, member: Any) -> list[Table]:
        """The campaigns a member can see: those with a channel (or category) the member may view.
        The single default campaign is everyone's."""
        if self.single:
            return list(self)
        guild = getattr(member, "guild", None)
        if not isinstance(member, discord.Member) or guild is None:
            return []
        seen = []
        for table in self:
            places = (guild.get_channel(cid) for cid in (*table.place.channels, *(table.place.gm_channels or ())))
            # A category is seen through its channels of this campaign: the category may be visible
            # while all it holds are hidden, or hold another campaign's channel.
            channels = [c for place in places if place is not None
                        for c in (place.channels if isinstance(place, discord.CategoryChannel) else [place])]
            if any(self.route(c) is table and c.permissions_for(member).view_channel for c in channels):
                seen.append(table)
        return seen

    def where(self, member: Any) -> str:
        """Where the Oracle answers, as a member reads it: the channels of the campaigns they see."""
        places = [f"<#{cid}>" for t in self.visible_to(member) for cid in t.place.channels]
        return ", ".join(places) if places else "no channel you can see"


async def open_table(campaign: Campaign, place: Place, index: Index, *, default_announce: int | None) -> Table:
    journal = await Journal.open(index.settings.journal_path)
    table = Table(campaign, place, index, Oracle(index), journal,
                  place.announce_channel if place.announce_channel is not None else default_announce)
    try:
        await table.news()  # what players can read now: the next reingest announces what it adds
    except Exception:
        log.warning("could not read campaign %s's index at startup", campaign.name, exc_info=True)
    return table

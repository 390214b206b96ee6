"""Channel permissions as Discord computes them (its documented algorithm, as discord.py's
``permissions_for`` also does), permission overwrites (``set_overwrite``, announced as
CHANNEL_UPDATE), and the 403 Missing Permissions (50013) of what the bot may not do.
"""

from __future__ import annotations

import copy
from typing import Any

import discord

from .constants import ADMINISTRATOR, ALL_PERMS, DM, THREAD_TYPES, VIEW_CHANNEL
from .models import FakeMember, Pending
from .rest import ApiError

_SEND_DEPENDENT = discord.Permissions(
    mention_everyone=True, send_tts_messages=True, embed_links=True, attach_files=True).value
_SEND_MESSAGES = discord.Permissions(send_messages=True).value


class Permissions:
    """Overwrites, permissions in a channel, and their enforcement."""

    def permissions_in(self, member: FakeMember | int, channel_id: int) -> int:
        """The member's permissions in a channel or thread (an ``int`` bit field), with overwrites."""
        member = self._member(member)
        channel = self.channels.get(int(channel_id))
        if channel is None:
            raise ValueError(f"unknown channel {channel_id}")
        if channel["type"] in THREAD_TYPES:
            channel = self.channels[int(channel["parent_id"])]
        base = self.permissions_for(member)
        if base == ALL_PERMS or base & ADMINISTRATOR:
            return ALL_PERMS
        perms = base
        overwrites = {(int(o["id"]), int(o["type"])): o for o in channel.get("permission_overwrites") or []}
        everyone = overwrites.get((self.guild_id, 0))
        if everyone is not None:
            perms = (perms & ~int(everyone["deny"])) | int(everyone["allow"])
        allow = deny = 0
        for role_id in member.roles:
            role = overwrites.get((role_id, 0))
            if role is not None:
                allow |= int(role["allow"])
                deny |= int(role["deny"])
        perms = (perms & ~deny) | allow
        own = overwrites.get((member.id, 1))
        if own is not None:
            perms = (perms & ~int(own["deny"])) | int(own["allow"])
        if not perms & VIEW_CHANNEL:
            return 0
        if not perms & _SEND_MESSAGES:
            perms &= ~_SEND_DEPENDENT
        return perms

    def set_overwrite(self, channel_id: int, target: FakeMember | int, *, allow: int = 0,
                      deny: int = 0) -> Pending:
        """Set the overwrite of a member (type 1) or a role id (type 0; the guild id is @everyone)
        on a channel or category (not a thread: threads have none). allow = deny = 0 removes it.
        Sends CHANNEL_UPDATE if a client is connected; await the result to wait for it."""
        channel = self.channels.get(int(channel_id))
        if channel is None:
            raise ValueError(f"unknown channel {channel_id}")
        if channel["type"] in THREAD_TYPES:
            raise ValueError("threads have no permission overwrites; set them on the parent channel")
        if isinstance(target, FakeMember):
            target_id, kind = target.id, 1
        elif int(target) in self.roles:
            target_id, kind = int(target), 0
        else:
            raise ValueError(f"{target!r} is neither a member nor a role of the guild")
        allow, deny = int(allow), int(deny)
        if allow & deny:
            raise ValueError("a permission cannot be both allowed and denied")
        kept = [o for o in channel["permission_overwrites"] if int(o["id"]) != target_id]
        if allow or deny:
            kept.append({"id": str(target_id), "type": kind, "allow": str(allow), "deny": str(deny)})
        channel["permission_overwrites"] = kept
        self._notify()
        updated = copy.deepcopy(channel)
        return Pending(self._soon(lambda session: self._dispatch(session, "CHANNEL_UPDATE", updated)))

    def _require(self, channel: dict[str, Any], needed: int, member: FakeMember | None = None) -> None:
        """403 Missing Permissions (50013) unless ``member`` (the bot) has every bit of ``needed``."""
        if channel["type"] == DM:  # no guild permissions in a DM
            return
        have = self.permissions_in(member or self.bot, int(channel["id"]))
        if needed & ~have:
            raise ApiError(403, 50013, "Missing Permissions")


"""Threads archive as Discord archives them, on the fake's simulated clock: after
``auto_archive_duration`` minutes without a message (``await fake.pass_time(seconds)``), told by
THREAD_UPDATE; a message unarchives one unless it is locked (docs/fakes.md). The order of that
message's MESSAGE_CREATE and THREAD_UPDATE is not documented: the message goes first.
"""
from __future__ import annotations

import copy
from typing import Any

from .constants import INTENT_GUILDS, THREAD_TYPES
from .models import _now_iso
from .rest import ApiError


class Archiving:
    channels: dict[int, dict]
    thread_ids: list[int]
    elapsed: float  # simulated seconds `advance` has moved the clock by
    thread_activity: dict[int, float]  # a thread's last activity, on that clock
    session: Any

    def _active_since(self, thread: dict) -> float:
        return self.thread_activity.get(int(thread["id"]), 0.0)

    def _touch(self, thread: dict) -> None:
        self.thread_activity[int(thread["id"])] = self.elapsed

    async def pass_time(self, seconds: float) -> list[int]:
        """`advance(seconds)`, then archive every thread idle for its `auto_archive_duration`: the ids archived."""
        self.advance(seconds)  # type: ignore[attr-defined]
        archived = []
        for thread_id in self.thread_ids:
            thread = self.channels[thread_id]
            metadata = thread["thread_metadata"]
            idle = self.elapsed - self._active_since(thread)
            if not metadata["archived"] and idle >= metadata["auto_archive_duration"] * 60:
                metadata["archived"], metadata["archive_timestamp"] = True, _now_iso()
                archived.append(thread_id)
                await self._thread_update(thread)
        return archived

    def archived(self, thread_id: int) -> bool:
        return bool(self.channels[int(thread_id)]["thread_metadata"]["archived"])

    def _posting(self, channel: dict, *, by_bot: bool) -> bool:
        """Before a message is posted in `channel`: a thread's activity, and its unarchiving (True)
        when it was archived. A locked thread refuses it (the fake's bot has no MANAGE_THREADS)."""
        if channel["type"] not in THREAD_TYPES:
            return False
        metadata = channel["thread_metadata"]
        if metadata["archived"] and metadata["locked"]:
            if by_bot:
                raise ApiError(400, 50083, "Thread is archived")
            raise ValueError(f"thread {channel['id']} is locked: members cannot post in it")
        self._touch(channel)
        if not metadata["archived"]:
            return False
        metadata["archived"], metadata["archive_timestamp"] = False, _now_iso()
        return True

    def _refuse_if_archived(self, channel: dict) -> None:
        """Editing a message or reacting in an archived thread (what only an active one allows)."""
        if channel["type"] in THREAD_TYPES and channel["thread_metadata"]["archived"]:
            raise ApiError(400, 50083, "Thread is archived")

    async def _thread_update(self, thread: dict) -> None:
        session = self.session
        if session is not None and session.has(INTENT_GUILDS):
            await self._dispatch(session, "THREAD_UPDATE", copy.deepcopy(thread))  # type: ignore[attr-defined]

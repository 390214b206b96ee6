"""Showing an answer while the model writes it. No retrieval logic; the edit is a callback, and the
clock and the sleep are the caller's, so the pacing is tested with its own.

Discord limits edits per channel (its bucket for editing messages is the channel's), so every
answer streaming in one channel shares one pace: one edit every `every` seconds (1.5 by default)
in that channel, whatever the number of answers there. An edit never holds up the model's words:
it runs beside the stream (a 429 sleep waits there, not in the answer), and sends the latest text
when its turn comes, never the same text twice (a preview past one message shows the same head).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import discord

from .formatting import MESSAGE_LIMIT

log = logging.getLogger(__name__)

WRITING_MARK = " ✍️"


def preview(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """The answer so far, marked as still being written; its head when it is past one message."""
    room = limit - len(WRITING_MARK) - 2
    text = text.strip()
    if len(text) > room:
        cut = text.rfind(" ", 0, room)
        text = text[: cut if cut > room // 2 else room].rstrip() + " …"
    return text + WRITING_MARK


class Pacer:
    """When the next edit may go in each channel: one every `every` seconds per channel, shared by
    every answer streaming there."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self.clock = clock
        self._next: dict[int, float] = {}

    def reserve(self, channel: int, earliest: float) -> float:
        """The time of the channel's next free turn, not before `earliest`, taken."""
        at = max(self.clock(), earliest, self._next.get(channel, 0.0))
        self._next[channel] = at + self.every
        return at


class LiveReply:
    """Edits one message with the text so far, in its channel's turn (`Pacer`) and at most once
    every `every` seconds counting from the message's last edit (`touch`: a progress line)."""

    def __init__(self, edit: Callable[[str], Awaitable[object]], pacer: Pacer, channel: int, *,
                 sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        self.edit = edit
        self.pacer = pacer
        self.channel = channel
        self.sleep = sleep
        self.last = pacer.clock()  # the message was just sent or edited
        self.latest = ""
        self.sent = ""
        self.edits = 0
        self.editing = False  # an edit is on its way to Discord
        self._task: asyncio.Task[None] | None = None

    def touch(self) -> None:
        """The message was edited by someone else (a progress line): wait from now."""
        self.last = self.pacer.clock()

    async def update(self, text: str) -> None:
        """The text so far. Returns at once: the edit, when its turn comes, runs beside the stream."""
        if not text.strip():
            return
        self.latest = text
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    async def close(self) -> None:
        """No more edits: the one waiting for its turn is dropped, one under way is let finish (so the
        final answer is never overwritten by a late preview)."""
        task, self._task = self._task, None
        if task is None or task.done():
            return
        if not self.editing:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while (content := preview(self.latest)) != self.sent:
            at = self.pacer.reserve(self.channel, self.last + self.pacer.every)
            await self.sleep(max(0.0, at - self.pacer.clock()))
            content = preview(self.latest)  # what came while it waited
            if content == self.sent:
                return
            self.editing = True
            try:
                await self.edit(content)
            except discord.HTTPException as exc:  # the final answer is what matters: a preview may fail
                log.debug("a preview edit failed: %s", exc)
                return
            finally:
                self.editing = False
            self.sent, self.last = content, self.pacer.clock()
            self.edits += 1

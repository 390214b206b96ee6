"""Showing an answer while the model writes it. No retrieval logic; the edit is a callback, so the
pacing is tested with a clock of its own."""
from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from .formatting import MESSAGE_LIMIT

WRITING_MARK = " ✍️"


def preview(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """The answer so far, marked as still being written; its head when it is past one message."""
    room = limit - len(WRITING_MARK) - 2
    text = text.strip()
    if len(text) > room:
        cut = text.rfind(" ", 0, room)
        text = text[: cut if cut > room // 2 else room].rstrip() + " …"
    return text + WRITING_MARK


class LiveReply:
    """Edits one message with the text so far at most once every `every` seconds (Discord limits
    edits per message: about five in five seconds), counting from the message's last edit."""

    def __init__(self, edit: Callable[[str], Awaitable[object]], every: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.edit = edit
        self.every = every
        self.clock = clock
        self.last = clock()  # the message was just sent or edited
        self.edits = 0

    def touch(self) -> None:
        """The message was edited by someone else (a progress line): wait from now."""
        self.last = self.clock()

    async def update(self, text: str) -> None:
        now = self.clock()
        if now - self.last < self.every or not text.strip():
            return
        self.last = now
        self.edits += 1
        await self.edit(preview(text))

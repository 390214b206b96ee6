"""The questions the bot is answering: how many may wait at once, and what each is told when the
bot stops (`systemctl stop`, Ctrl-C) before it could finish."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

log = logging.getLogger(__name__)

RESTARTING = "The Oracle is restarting — ask again in a minute."
BUSY = "The Oracle is answering as many questions as it can at once ({n}) — ask again in a minute."
TELL_SECONDS = 5.0  # how long a stopped question may take to say so


class Questions:
    """At most `limit` questions at once, over every campaign and member (flood control is per
    member, `flood.FloodGate`); a question over it is told at once instead of waiting minutes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.stopping = False
        self._tasks: dict[asyncio.Task[object], Callable[[str], Awaitable[object]]] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    def refusal(self) -> str | None:
        """Why a new question is not taken now, or None."""
        if self.stopping:
            return RESTARTING
        if len(self._tasks) >= self.limit:
            return BUSY.format(n=len(self._tasks))
        return None

    @contextlib.asynccontextmanager
    async def answering(self, tell: Callable[[str], Awaitable[object]]) -> AsyncIterator[None]:
        """Count the current task as a question while inside; if `stop` cancels it, `tell(RESTARTING)`."""
        task = asyncio.current_task()
        assert task is not None
        self._tasks[task] = tell
        try:
            yield
        except asyncio.CancelledError:
            if self.stopping:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(tell(RESTARTING), TELL_SECONDS)
            raise
        finally:
            self._tasks.pop(task, None)

    async def stop(self, grace: float) -> None:
        """Take no new question; give those under way `grace` seconds to finish, then stop the rest,
        each told to ask again."""
        self.stopping = True
        if not self._tasks:
            return
        log.info("stopping: waiting up to %.0f s for %d questions under way", grace, len(self._tasks))
        _, pending = await asyncio.wait(list(self._tasks), timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            log.warning("stopping: %d questions were told to ask again", len(pending))
            await asyncio.wait(pending, timeout=TELL_SECONDS + 1)

"""Leaving the event loop: every blocking or CPU-bound call runs on a thread from here.

A call that waits (files, a model's loading) or runs native code that lets go of the interpreter lock
goes through `off_loop`; pure Python that takes long on the CPU goes through one of two lanes
(`question_step`, `ingest_step`), one thread each. No other module calls `to_thread`.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


# How often the interpreter lock changes hands (Python's default: every 5 ms). A thread running
# pure Python (a note parsed, a prompt's tokens counted) makes the event loop wait up to this long
# each time it wants the lock, and with several such threads the waits add up. The bot sets 1 ms
# (measured with `bench.load`: docs/decisions.md, "The interpreter lock handed over every 1 ms").
SWITCH_INTERVAL = 0.001


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, not the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


async def off_loop(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """`fn(*args, **kwargs)` on a worker thread of asyncio's pool: for a call that waits (files, a
    model's loading) or runs in native code that lets go of the interpreter lock (Chroma's reads,
    torch, ONNX Runtime). Pure Python goes through a lane instead."""
    return await asyncio.to_thread(fn, *args, **kwargs)


class Lane:
    """One thread that runs CPU-bound pure Python, one step after another.

    Under the interpreter lock, pure Python on several threads goes no faster than on one, and
    each thread that wants the lock makes the event loop wait its turn (measured with `bench.lanes`:
    docs/decisions.md, "Lanes"). So each kind of step has one thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    async def run(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)


# Two lanes per process, shared by every campaign: a question's steps (fitting its prompt,
# checking its answer) never wait behind an ingest's (reading and chunking a whole campaign).
QUESTION_LANE = Lane("oracle-question")
INGEST_LANE = Lane("oracle-ingest")


async def question_step(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """A question's CPU-bound step (milliseconds of pure Python), off the event loop."""
    return await QUESTION_LANE.run(fn, *args, **kwargs)


async def ingest_step(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """An ingest's CPU-bound step (up to seconds of pure Python), off the event loop."""
    return await INGEST_LANE.run(fn, *args, **kwargs)

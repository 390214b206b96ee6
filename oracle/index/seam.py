"""The one async seam: everything that blocks runs on a worker thread from here.

Chroma's client and the embedding model are synchronous, and a reingest's parsing and Compendium
build are seconds of CPU. Run on the event loop, any of them stalls Discord's heartbeat and every
question waiting behind it. So the index hands out async facades (`Vectors`, `Embeddings`) over the
synchronous classes; calls that wait go through `off_loop`, and pure Python that takes long on the
CPU through one of two lanes (`question_step`, `ingest_step`). No other module calls `to_thread`.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, Protocol, TypeVar

import numpy as np

from ..settings import Settings
from ..types import Chunk, Window
from .embed import Embedder
from .vectors import DenseHit, VectorStore

P = ParamSpec("P")
R = TypeVar("R")


class WindowEncoder(Protocol):
    """What encodes a reingest's windows, and runs its other CPU-bound steps, elsewhere: the
    embedding worker process (`worker.EmbedWorker`)."""

    async def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    async def windows(self, chunks: Sequence[Chunk], overlap_tokens: int, size: int | None) -> list[Window]: ...

    async def offload(self, fn: Callable[..., R], /, *args: object) -> R: ...


# How often the interpreter lock changes hands (Python's default: every 5 ms). A thread running
# pure Python (a note parsed, a prompt's tokens counted) makes the event loop wait up to this long
# each time it wants the lock, and with several such threads the waits add up. The bot sets 1 ms:
# `bench/load.py` measured the loop's worst stall during an ingest with questions arriving fall from
# 114 ms to 24-49 ms, with no fewer questions answered a second.
SWITCH_INTERVAL = 0.001


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, not the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def search_concurrency(settings: Settings) -> int:
    """Questions searched at once (ORACLE_SEARCH_CONCURRENCY, else one per core). A search is CPU
    work in this process (matching, fusion, the stores' rows), the event loop's included: more at
    once than there are cores only makes each slower and the loop later, while a question waiting
    for its turn costs nothing."""
    return settings.search_concurrency or usable_cores()


async def off_loop(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """`fn(*args, **kwargs)` on a worker thread of asyncio's pool: for a call that waits (files, a
    model's loading) or runs in native code that lets go of the interpreter lock (Chroma's reads,
    torch, ONNX Runtime). Pure Python goes through a lane instead."""
    return await asyncio.to_thread(fn, *args, **kwargs)


class Lane:
    """One thread that runs CPU-bound pure Python, one step after another.

    Under the interpreter lock, pure Python on several threads goes no faster than on one, and
    each thread that wants the lock makes the event loop wait its turn (`bench/lanes.py`: twenty
    prompts' tokens counted at once through asyncio's pool, six threads on two cores, made a 10 ms
    sleep of the loop wake up to 51-80 ms late over four runs; through one thread, 6-9 ms, and the
    counting ended no later). So each kind of step has one thread."""

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


class Vectors:
    """The Chroma collection of dense windows, asynchronously (see `VectorStore`)."""

    def __init__(self, store: VectorStore) -> None:
        self._store = store

    @property
    def in_thread(self) -> VectorStore:
        """The store itself, for code that already runs off the event loop (a lane or `off_loop`)."""
        return self._store

    async def count(self) -> int:
        return await off_loop(self._store.count)

    async def all_ids(self) -> set[str]:
        return await off_loop(self._store.all_ids)

    async def upsert(self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[dict]) -> None:
        await off_loop(self._store.upsert, ids, vectors, metadatas)

    async def delete(self, ids: Iterable[str]) -> None:
        await off_loop(self._store.delete, ids)

    async def query(self, vector: np.ndarray, n: int, *, visibility: str | None = None) -> list[DenseHit]:
        return await off_loop(self._store.query, vector, n, visibility=visibility)

    async def vectors(self, *, visibility: str | None = None) -> tuple[list[str], list[str], np.ndarray]:
        return await off_loop(self._store.vectors, visibility=visibility)

    async def reopen(self) -> None:
        """Read the store afresh, once the calls in flight are done: what another process wrote."""
        await off_loop(self._store.reopen)

    async def reopen_if_written(self) -> None:
        """Read the store afresh before writing it, if another process wrote it meanwhile."""
        await off_loop(self._store.reopen_if_written)

    async def close(self) -> None:
        await off_loop(self._store.close)


class Embeddings:
    """The embedding model, asynchronously (see `Embedder`). With a `worker` (one process shared by
    every campaign), windows are cut and embedded there, off this process's interpreter lock; a
    question is always embedded here (`encode_query`: a few ms)."""

    def __init__(self, embedder: Embedder, *, worker: WindowEncoder | None = None) -> None:
        self._embedder = embedder
        self.worker = worker

    @property
    def fingerprint(self) -> str:
        return self._embedder.fingerprint

    @property
    def in_thread(self) -> Embedder:
        """The model itself, for code that already runs off the event loop (a lane or `off_loop`)."""
        return self._embedder

    async def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self.worker is not None:
            return await self.worker.encode(texts)
        return await off_loop(self._embedder.encode, texts)

    async def encode_query(self, text: str) -> np.ndarray:
        return await off_loop(self._embedder.encode_query, text)

    async def windows(self, chunks: Sequence[Chunk], overlap_tokens: int, size: int | None) -> list[Window]:
        if self.worker is not None and chunks:
            return await self.worker.windows(chunks, overlap_tokens, size)
        return await off_loop(self._embedder.windows, chunks, overlap_tokens, size)

    async def offload(self, fn: Callable[..., R], /, *args: object) -> R:
        """A reingest's pure, CPU-bound `fn(*args)` (the Compendium's build): in the worker process when
        there is one, where it holds no lock the event loop needs; else in the ingest's lane."""
        if self.worker is not None:
            return await self.worker.offload(fn, *args)
        return await ingest_step(fn, *args)

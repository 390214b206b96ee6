"""The embedding worker: one process that cuts and embeds a reingest's windows, and builds its
Compendium, for every campaign.

In the bot's own process the encoder holds the interpreter lock in stretches while questions wait
(measured with `bench.load`: docs/decisions.md). So
the process that answers questions (the bot) starts one worker process, once, loads the model there
once, and sends it every reingest's windows; questions are still embedded in-process (a few ms with
ONNX Runtime). The Compendium's build runs there too (`offload`): over a second of pure Python for
the CRD3 log, which in the bot's process competed with the loop for the interpreter lock and the
cores all that time; and so do reading and chunking the notes (`scan.read_and_chunk`). The worker
runs at a lower CPU priority and leaves a core free (`worker_threads`): a reingest never slows a
question down more than it must. Same model, same code, same batches: the vectors are the ones
the process itself would compute (tested).

The windows are written into Chroma by the process that runs the ingest (the bot), never from here:
one process writes a campaign's Chroma folder during an ingest, the one that holds its ingest lock
(`oracle/index/vectors.py`, docs/processes.md).

A killed worker fails the reingest it was serving with an `EmbedError` that says so (never a hang);
the next call starts a new worker. A worker whose bot died exits by itself.
"""
from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

import numpy as np

from ..offload import off_loop, usable_cores
from ..types import Chunk, EmbeddingWindow
from .embed import Embedder, EmbedError

log = logging.getLogger(__name__)
R = TypeVar("R")

# How much lower the worker's CPU priority is than the bot's (nice(2) increment). At 19, the lowest,
# the kernel gives the bot's threads about seventy times the worker's share of a contended core: a
# reingest only ever uses what questions leave.
NICE = 19


def worker_threads() -> int:
    """Torch threads in the worker: every core but one, so the bot's event loop always finds a core."""
    return max(1, usable_cores() - 1)

# ---------------------------------------------------------------------------------------------
# In the worker process

_model: Embedder | None = None
_failure: str | None = None


def _load(ref: str, nice: int, threads: int, prompts: tuple[str | None, str | None]) -> None:
    """The worker's initializer: load the model once. A failure is kept and raised by every call, so
    the caller reads why (an initializer that raises only breaks the pool, with no reason)."""
    global _model, _failure
    threading.Thread(target=_exit_with, args=(os.getppid(),), name="exit-with-parent", daemon=True).start()
    try:
        if nice:
            os.nice(nice)
        import torch

        torch.set_num_threads(threads)
        _model = Embedder(ref, query_prompt=prompts[0], passage_prompt=prompts[1])
    except Exception as exc:  # pragma: no cover - reported by the calls
        _failure = f"the embedding worker could not load the model {ref!r}: {exc}"


def _exit_with(parent: int) -> None:
    """A worker whose process died (killed, crashed) must not live on holding the model's memory:
    its parent changes when the bot is gone."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _loaded() -> Embedder:
    if _model is None:
        raise EmbedError(_failure or "the embedding worker has no model")
    return _model


def _fingerprint() -> tuple[str, int]:
    return _loaded().fingerprint, os.getpid()


def _encode(texts: list[str]) -> np.ndarray:
    return _loaded().encode(texts)


def _windows(chunks: list[Chunk], overlap_tokens: int, size: int | None) -> list[EmbeddingWindow]:
    return _loaded().windows(chunks, overlap_tokens, size)


# ---------------------------------------------------------------------------------------------
# In the bot's process


class EmbedWorker:
    """One worker process, started once (`start`), shared by every campaign's `Embeddings`."""

    def __init__(self, ref: str, *, nice: int = NICE, threads: int | None = None,
                 query_prompt: str | None = None, passage_prompt: str | None = None) -> None:
        """`ref` and the prompts: as `Embedder` takes them."""
        self.ref = ref
        self.prompts = (query_prompt, passage_prompt)
        self.nice = nice
        self.threads = threads or worker_threads()
        self._pool: ProcessPoolExecutor | None = None
        self._ready: Future[tuple[str, int]] | None = None
        self.starts = 0  # processes started so far: 1 unless one died

    def start(self) -> None:
        """Spawn the process and load the model there, without waiting (a few seconds: torch).
        Calls made before it is ready wait for it."""
        if self._pool is not None:
            return
        try:
            # spawn: a fork of a process that already runs threads (Chroma, aiosqlite, torch) can deadlock.
            self._pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_load,
                initargs=(self.ref, self.nice, self.threads, self.prompts),
            )
            self._ready = self._pool.submit(_fingerprint)
        except OSError as exc:  # no process or semaphore allowed here (a sandbox without /dev/shm)
            self._discard()
            raise EmbedError(
                f"cannot start the embedding worker process ({exc.strerror or exc}): set ORACLE_EMBED_WORKER=false "
                "to embed in this process"
            ) from exc
        self.starts += 1

    async def ready(self) -> str:
        """Wait until the model is loaded in the worker; its fingerprint (the collection it embeds for)."""
        self.start()
        assert self._ready is not None
        fingerprint, _ = await self._call(asyncio.wrap_future(self._ready))
        return fingerprint

    @property
    def pid(self) -> int | None:
        """The worker process's id, once it is ready (for status and tests)."""
        if self._ready is None or not self._ready.done() or self._ready.exception() is not None:
            return None
        return self._ready.result()[1]

    async def encode(self, texts: Sequence[str]) -> np.ndarray:
        return await self._submit(_encode, list(texts))

    async def windows(self, chunks: Sequence[Chunk], overlap_tokens: int, size: int | None) -> list[EmbeddingWindow]:
        return await self._submit(_windows, list(chunks), overlap_tokens, size)

    async def offload(self, fn: Callable[..., R], /, *args: object) -> R:
        """`fn(*args)` in the worker process: a pure, CPU-bound step of a reingest. `fn` must be a
        module's top-level function, and its arguments and result picklable."""
        return await self._submit(fn, *args)

    async def _submit(self, fn, *args):
        await self.ready()
        assert self._pool is not None
        try:
            future = self._pool.submit(fn, *args)
        except BrokenProcessPool as exc:  # died between two calls
            self._discard()
            raise self._died(exc) from exc
        return await self._call(asyncio.wrap_future(future))

    async def _call(self, awaitable):
        try:
            return await awaitable
        except BrokenProcessPool as exc:
            self._discard()
            raise self._died(exc) from exc

    def _died(self, exc: BaseException) -> EmbedError:
        log.error("the embedding worker process stopped: %s", exc)
        return EmbedError(
            "the embedding worker process stopped (killed, or out of memory): this reingest stopped and the "
            "previous index is still served; the next reingest starts a new worker"
        )

    def _discard(self) -> None:
        pool, self._pool, self._ready = self._pool, None, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    async def close(self) -> None:
        """Stop the worker process (waits for the call it is running, off the event loop)."""
        pool, self._pool, self._ready = self._pool, None, None
        if pool is not None:
            await off_loop(pool.shutdown, wait=True, cancel_futures=True)

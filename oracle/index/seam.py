"""The index's async facades over its synchronous parts.

Chroma's client and the embedding model are synchronous. Run on the event loop, either stalls
Discord's heartbeat and every question waiting behind it. So the index hands out `Vectors` and
`Embeddings`, whose calls leave the loop through `oracle.offload`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

import numpy as np

from ..offload import ingest_step, off_loop, usable_cores
from ..settings import Settings
from ..types import Chunk, EmbeddingWindow
from .embed import Embedder
from .vectors import DenseHit, VectorStore

R = TypeVar("R")


class WindowEncoder(Protocol):
    """What encodes a reingest's windows, and runs its other CPU-bound steps, elsewhere: the
    embedding worker process (`worker.EmbedWorker`)."""

    async def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    async def windows(self, chunks: Sequence[Chunk], overlap_tokens: int, size: int | None) -> list[EmbeddingWindow]: ...

    async def offload(self, fn: Callable[..., R], /, *args: object) -> R: ...


def search_concurrency(settings: Settings) -> int:
    """Questions searched at once (ORACLE_SEARCH_CONCURRENCY, else one per core). A search is CPU
    work in this process (matching, fusion, the stores' rows), the event loop's included: more at
    once than there are cores only makes each slower and the loop later, while a question waiting
    for its turn costs nothing."""
    return settings.search_concurrency or usable_cores()


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

    async def upsert(self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[dict[str, str]]) -> None:
        await off_loop(self._store.upsert, ids, vectors, metadatas)

    async def delete(self, ids: Iterable[str]) -> None:
        await off_loop(self._store.delete, ids)

    async def query(self, vector: np.ndarray, n: int, *, visibility: str | None = None) -> list[DenseHit]:
        return await off_loop(self._store.query, vector, n, visibility=visibility)

    async def vectors(self, *, visibility: str | None = None) -> tuple[list[str], list[str], np.ndarray]:
        return await off_loop(self._store.vectors, visibility=visibility)

    async def embeddings_of(self, ids: Iterable[str]) -> dict[str, np.ndarray]:
        return await off_loop(self._store.embeddings_of, list(ids))

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

    def reads(self, language: str) -> bool:
        """Whether the model was trained on text of `language` (`Embedder.reads`)."""
        return self._embedder.reads(language)

    async def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self.worker is not None:
            return await self.worker.encode(texts)
        return await off_loop(self._embedder.encode, texts)

    async def encode_query(self, text: str) -> np.ndarray:
        return await off_loop(self._embedder.encode_query, text)

    async def windows(self, chunks: Sequence[Chunk], overlap_tokens: int, size: int | None) -> list[EmbeddingWindow]:
        if self.worker is not None and chunks:
            return await self.worker.windows(chunks, overlap_tokens, size)
        return await off_loop(self._embedder.windows, chunks, overlap_tokens, size)

    async def offload(self, fn: Callable[..., R], /, *args: object) -> R:
        """A reingest's pure, CPU-bound `fn(*args)` (the Compendium's build): in the worker process when
        there is one, where it holds no lock the event loop needs; else in the ingest's lane."""
        if self.worker is not None:
            return await self.worker.offload(fn, *args)
        return await ingest_step(fn, *args)

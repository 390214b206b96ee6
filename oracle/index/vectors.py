"""Chroma: the dense windows. Embedded on disk by default, or a `chroma run` server by URL.

The Chroma API is synchronous; callers reach it through the async facade in `seam`. SQLite stays the source
of truth: a window whose chunk SQLite does not hold is ignored at query time and removed at ingest.
"""
from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from ..errors import OracleError
from ..types import GM, PUBLIC, Window

log = logging.getLogger(__name__)

# Rows per Chroma write. Chroma's Rust core holds the interpreter lock for a whole upsert or delete
# (measured on two cores: ~2 ms a call plus ~0.35 ms a window for an upsert; 64 windows held it 40 ms),
# so the event loop, waiting for the lock, stalls for as long as a write lasts. Sixteen rows keep a
# typical hold near 10 ms; the lock is handed over between writes.
_WRITE_BATCH = 16

# Chroma keeps the windows written since its HNSW index was last saved (up to `sync_threshold`, 1,000
# by default) in its log. Once a query or a read has opened the collection, the next write rebuilds the
# writer's index from that log, holding the interpreter lock throughout: about 1.4 ms a window, so
# 1.2-1.3 s for 860-900 windows, measured on two cores (a question, then a reingest's first write).
# Saving after every write's worth of rows bounds that to one write (21 ms measured, against 1,282 ms)
# and replaces the longer periodic save (at 12,800 windows, a write's worst hold went from 60 to 42 ms;
# the build took 11.3 s instead of 10.2 s).
_HNSW = {"sync_threshold": _WRITE_BATCH, "batch_size": _WRITE_BATCH}


class VectorStoreError(OracleError, RuntimeError):
    pass


def _guarded(method):
    """Chroma raises its own and its Rust core's errors: one domain error with the reason instead."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except VectorStoreError:
            raise
        except Exception as exc:
            raise VectorStoreError(f"the Chroma store failed ({type(exc).__name__}: {exc})") from exc

    return wrapper


def _hand_over() -> None:
    """Release the interpreter lock between two writes, so a thread waiting for it (the event loop)
    runs now rather than after the next write."""
    time.sleep(0)


@dataclass(frozen=True)
class DenseHit:
    window_id: str
    chunk_id: str
    distance: float


def _client(path: Path, url: str | None):
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    try:
        if url:
            parsed = urlparse(url if "://" in url else f"http://{url}")
            return chromadb.HttpClient(
                host=parsed.hostname or "127.0.0.1",
                port=parsed.port or (443 if parsed.scheme == "https" else 8000),
                ssl=parsed.scheme == "https",
                settings=chroma_settings,
            )
        path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path), settings=chroma_settings)
    except Exception as exc:
        where = url or str(path)
        raise VectorStoreError(f"cannot open the Chroma store at {where}: {exc}") from exc


class VectorStore:
    """Public and game-master-only windows live in two collections: a player's query searches the
    public one alone, with no metadata filter (Chroma's `where` is linear in the collection size)."""

    def __init__(self, path: Path, collection: str, *, url: str | None = None) -> None:
        self.path, self.name, self.url = path, collection, url
        self.reopen()

    def close(self) -> None:
        self.client.close()
        self.collections = {}

    def release(self) -> bool:
        """Close this process's hold on an embedded store, so another process (the embedding worker)
        may write it: True when nothing of this process holds the folder open any more (`reopen`
        once the other process has closed it). False, with the store open as before, for a server
        (it serves both processes as it is) and when another client of this process still holds the
        folder (Chroma keeps one store per folder per process, stopped by the last `close`): writing
        it from two processes could lose windows."""
        if self.url:
            return False
        self.close()
        if self._folder_closed():
            return True
        self.reopen()
        return False

    def _folder_closed(self) -> bool:
        try:  # Chroma's own registry of open stores: if it is not where it was, assume it is still open
            from chromadb.api.shared_system_client import SharedSystemClient

            open_stores = SharedSystemClient._identifier_to_system
        except (ImportError, AttributeError):
            return False
        identifier = getattr(self.client, "_identifier", None)
        return identifier is not None and identifier not in open_stores

    def reopen(self) -> None:
        """Open the client and both collections: when made, and again after `release` (the store may
        have been written meanwhile)."""
        self.client = _client(self.path, self.url)
        self.collections = {visibility: self._open(f"{self.name}-{visibility}") for visibility in (PUBLIC, GM)}

    def _open(self, name: str):
        try:
            collection = self.client.get_or_create_collection(
                name,
                embedding_function=None,  # the default one tries a download
                configuration={"hnsw": {"space": "cosine", "ef_search": 200, "ef_construction": 200, **_HNSW}},
            )
        except Exception as exc:
            raise VectorStoreError(f"cannot open the Chroma collection {name!r}: {exc}") from exc
        hnsw = (getattr(collection, "configuration_json", None) or {}).get("hnsw") or {}
        if hnsw.get("sync_threshold") != _HNSW["sync_threshold"]:  # a store made before: save as often
            try:
                collection.modify(configuration={"hnsw": _HNSW})
            except Exception as exc:  # an older server: it still works, with the longer stalls
                log.warning("cannot set how often Chroma saves the collection %r: %s", name, exc)
        return collection

    def _chosen(self, visibility: str | None):
        return [self.collections[visibility]] if visibility else list(self.collections.values())

    @_guarded
    def count(self) -> int:
        return sum(c.count() for c in self.collections.values())

    @_guarded
    def all_ids(self) -> set[str]:
        ids: set[str] = set()
        for collection in self.collections.values():
            offset = 0
            while True:
                page = collection.get(include=[], limit=10_000, offset=offset)["ids"]
                ids.update(page)
                if len(page) < 10_000:
                    break
                offset += len(page)
        return ids

    @_guarded
    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[dict]) -> None:
        for visibility, collection in self.collections.items():
            rows = [i for i, meta in enumerate(metadatas) if meta["visibility"] == visibility]
            for i in range(0, len(rows), _WRITE_BATCH):
                batch = rows[i : i + _WRITE_BATCH]
                collection.upsert(
                    ids=[ids[j] for j in batch],
                    embeddings=vectors[batch],
                    metadatas=[metadatas[j] for j in batch],
                )
                _hand_over()

    @_guarded
    def delete(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        for collection in self.collections.values():
            for i in range(0, len(ids), _WRITE_BATCH):
                collection.delete(ids=ids[i : i + _WRITE_BATCH])
                _hand_over()

    @_guarded
    def query(self, vector: np.ndarray, n: int, *, visibility: str | None = None) -> list[DenseHit]:
        """Nearest windows, best first; `visibility="public"` searches the public windows only."""
        if n <= 0:
            return []
        hits: list[DenseHit] = []
        for collection in self._chosen(visibility):
            # Distances only: fetching metadata from Chroma's own SQLite cost 4x the vector search
            # (10 ms of 12 for 128 windows of 29k); the chunk id is part of the window id.
            result = collection.query(query_embeddings=[vector], n_results=n, include=["distances"])
            hits += [
                DenseHit(window_id, Window.chunk_of(window_id), float(distance))
                for window_id, distance in zip(result["ids"][0], result["distances"][0])
            ]
        return sorted(hits, key=lambda h: (h.distance, h.window_id))[:n]

    @_guarded
    def vectors(self, *, visibility: str | None = None) -> tuple[list[str], list[str], np.ndarray]:
        """Every window's id, chunk id and vector: for an exact search to compare against."""
        ids: list[str] = []
        chunk_ids: list[str] = []
        blocks = []
        for collection in self._chosen(visibility):
            data = collection.get(include=["embeddings", "metadatas"])
            if len(data["ids"]):
                ids += data["ids"]
                chunk_ids += [m["chunk_id"] for m in data["metadatas"]]
                blocks.append(np.asarray(data["embeddings"], dtype=np.float32))
        return ids, chunk_ids, np.vstack(blocks) if blocks else np.zeros((0, 0), dtype=np.float32)

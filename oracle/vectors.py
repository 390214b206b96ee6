"""Chroma: the dense windows. Embedded on disk by default, or a `chroma run` server by URL.

The Chroma API is synchronous; callers reach it through `asyncio.to_thread`. SQLite stays the source
of truth: a window whose chunk SQLite does not hold is ignored at query time and removed at ingest.
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

log = logging.getLogger(__name__)

_BATCH = 1000  # below Chroma's max batch size on every backend


class VectorStoreError(RuntimeError):
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
    def __init__(self, path: Path, collection: str, *, url: str | None = None) -> None:
        self.client = _client(path, url)
        try:
            self.collection = self.client.get_or_create_collection(
                collection,
                embedding_function=None,  # the default one tries a download
                configuration={"hnsw": {"space": "cosine", "ef_search": 200, "ef_construction": 200}},
            )
        except Exception as exc:
            raise VectorStoreError(f"cannot open the Chroma collection {collection!r}: {exc}") from exc

    @_guarded
    def count(self) -> int:
        return self.collection.count()

    @_guarded
    def existing(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for i in range(0, len(ids), _BATCH):
            found.update(self.collection.get(ids=list(ids[i : i + _BATCH]), include=[])["ids"])
        return found

    @_guarded
    def all_ids(self) -> set[str]:
        ids: set[str] = set()
        offset = 0
        while True:
            page = self.collection.get(include=[], limit=10_000, offset=offset)["ids"]
            ids.update(page)
            if len(page) < 10_000:
                return ids
            offset += len(page)

    @_guarded
    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[dict]) -> None:
        for i in range(0, len(ids), _BATCH):
            self.collection.upsert(
                ids=list(ids[i : i + _BATCH]),
                embeddings=vectors[i : i + _BATCH],
                metadatas=list(metadatas[i : i + _BATCH]),
            )

    @_guarded
    def delete(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        for i in range(0, len(ids), _BATCH):
            self.collection.delete(ids=ids[i : i + _BATCH])

    @_guarded
    def query(self, vector: np.ndarray, n: int, *, visibility: str | None = None) -> list[DenseHit]:
        """Nearest windows; `visibility="public"` keeps GM-only windows out of the search itself."""
        total = self.collection.count()
        if total == 0 or n <= 0:
            return []
        where = {"visibility": visibility} if visibility else None
        result = self.collection.query(
            query_embeddings=[vector],
            n_results=min(n, total),
            where=where,
            include=["distances", "metadatas"],
        )
        return [
            DenseHit(window_id, meta["chunk_id"], float(distance))
            for window_id, meta, distance in zip(
                result["ids"][0], result["metadatas"][0], result["distances"][0]
            )
        ]

    @_guarded
    def vectors(self, *, visibility: str | None = None) -> tuple[list[str], list[str], np.ndarray]:
        """Every window's id, chunk id and vector: for an exact search to compare against."""
        where = {"visibility": visibility} if visibility else None
        data = self.collection.get(where=where, include=["embeddings", "metadatas"])
        vectors = np.asarray(data["embeddings"], dtype=np.float32) if len(data["ids"]) else np.zeros((0, 0))
        return data["ids"], [m["chunk_id"] for m in data["metadatas"]], vectors

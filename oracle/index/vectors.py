"""Chroma: the dense windows. Embedded on disk by default, or a `chroma run` server by URL.

The Chroma API is synchronous; callers reach it through the async facade in `seam`. SQLite stays the source
of truth: a window whose chunk SQLite does not hold is ignored at query time and removed at ingest.

An embedded folder may be open in several processes at once (the bot, `oracle ingest` from a shell or
a timer, `oracle watch`): each holds Chroma's HNSW index in memory, loaded from the folder once.
Measured with chromadb 1.5 (docs/processes.md): a process that loads the index while another writes
it can crash, and one that writes through an index loaded before another process wrote leaves the
folder corrupt. An ingest therefore writes only a draft folder of its own, which no other process
opens until a commit names it (`folders`); and per folder:

- every call takes the folder's access lock (`oracle-access.lock` in the folder, `flock`): shared to
  read, exclusive to write, open or close, held for the one Chroma call only (a write is 16 windows);
- a write leaves a mark (`oracle-writing`) until it returns: a folder that keeps it was cut mid-write;
- a process holds one Chroma client per folder (`_Folder`), whatever the number of stores on it
  (Chroma shares one store per folder within a process, kept until its last client closes).

A `chroma run` server serves every process as it is: none of this applies to it.
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import numpy as np

from ..errors import OracleError
from ..types import GM, PUBLIC, EmbeddingWindow

if TYPE_CHECKING:
    from chromadb.api import ClientAPI

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
# the build took 11.3 s instead of 10.2 s). It also means a write leaves the folder whole when it
# returns (its windows saved, or in the log of at most 15 that every reader replays): the access lock
# (below) held for the one call covers the whole save.
_HNSW = {"sync_threshold": _WRITE_BATCH, "batch_size": _WRITE_BATCH}


class VectorStoreError(OracleError, RuntimeError):
    pass


class VectorStoreUnreachable(VectorStoreError):
    """A Chroma server that does not answer (not started yet, restarting, the network down): what
    waiting may mend, unlike a store that answers wrong."""


def _unreachable(exc: BaseException) -> bool:
    """Whether `exc`, or what caused it, is a connection that failed rather than a server's refusal."""
    import httpx

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (httpx.TransportError, ConnectionError, TimeoutError)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


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


ACCESS_LOCK = "oracle-access.lock"
WRITING = "oracle-writing"  # present while a write is under way: left behind, the folder may be torn


@contextlib.contextmanager
def access(folder: Path, *, exclusive: bool) -> Iterator[None]:
    """The folder's access lock for one Chroma call: shared to read, exclusive to write or open,
    across processes and threads alike (each call opens the lock file anew: `flock` excludes two
    opens of a file, even in one process, never two holders of one open). The OS drops it if the
    process dies."""
    try:
        fd = os.open(folder / ACCESS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # a read-only folder: a lock file made before still serves its readers
        try:
            fd = os.open(folder / ACCESS_LOCK, os.O_RDONLY)
        except OSError as exc:
            raise VectorStoreError(
                f"cannot take the lock of the Chroma store at {folder} ({exc.strerror or exc})"
            ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the last descriptor of the open releases the lock


def _chroma_settings():
    from chromadb.config import Settings as ChromaSettings

    return ChromaSettings(anonymized_telemetry=False)


def _server(url: str):
    import chromadb

    parsed = urlparse(url if "://" in url else f"http://{url}")
    try:
        return chromadb.HttpClient(
            host=parsed.hostname or "127.0.0.1",
            port=parsed.port or (443 if parsed.scheme == "https" else 8000),
            ssl=parsed.scheme == "https",
            settings=_chroma_settings(),
        )
    except Exception as exc:
        if _unreachable(exc):
            raise VectorStoreUnreachable(f"the Chroma server at {url} does not answer ({exc})") from exc
        raise VectorStoreError(f"cannot open the Chroma store at {url}: {exc}") from exc


class _Folder:
    """This process's one Chroma client on an embedded folder, shared by every `VectorStore` on it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stores = 0
        self.client: ClientAPI | None = None

    def open(self) -> None:
        """The client (the access lock held exclusively): the folder as it is on disk now."""
        import chromadb

        try:
            self.client = chromadb.PersistentClient(path=str(self.path), settings=_chroma_settings())
        except Exception as exc:
            raise VectorStoreError(f"cannot open the Chroma store at {self.path}: {exc}") from exc


_FOLDERS: dict[Path, _Folder] = {}
_FOLDERS_LOCK = threading.Lock()


class VectorStore:
    """Public and game-master-only windows live in two collections: a player's query searches the
    public one alone, with no metadata filter (Chroma's `where` is linear in the collection size)."""

    def __init__(self, path: Path, collection: str, *, url: str | None = None) -> None:
        self.path, self.name, self.url = path, collection, url
        self._collections: dict[str, object] = {}
        self._folder: _Folder | None = None
        self._server = None
        if url:
            self._server = _server(url)
            self._collections = self._get_collections(self._server)
            return
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise VectorStoreError(f"cannot open the Chroma store at {path}: {exc.strerror or exc}") from exc
        key = path.resolve()
        with _FOLDERS_LOCK:
            folder = self._folder = _FOLDERS.setdefault(key, _Folder(key))
            folder.stores += 1
        try:
            with access(path, exclusive=True):  # opening may write (a new collection, its settings)
                if folder.client is None:
                    folder.open()
                self._collections = self._get_collections(folder.client)
        except BaseException:
            self._detach()
            raise

    @property
    def client(self):
        return self._server if self._folder is None else self._folder.client

    @property
    def collections(self) -> dict[str, Any]:
        """The two collections (public and game master's)."""
        return self._collections

    def close(self) -> None:
        """Let go of the folder (its client closes with the last store on it) or the server."""
        self._collections = {}
        if self._folder is None:
            if self._server is not None:
                self._server.close()
                self._server = None
            return
        try:
            with access(self.path, exclusive=True):
                self._detach()
        except VectorStoreError:  # the folder is gone: nothing of it is left to protect
            self._detach()

    def _detach(self) -> None:
        folder, self._folder = self._folder, None
        if folder is None:
            return
        with _FOLDERS_LOCK:
            folder.stores -= 1
            if folder.stores:
                return
            if _FOLDERS.get(folder.path) is folder:
                del _FOLDERS[folder.path]
        if folder.client is not None:
            folder.client.close()  # type: ignore[attr-defined]  # chromadb's ClientAPI omits close(); its Client has it
            folder.client = None

    def _get_collections(self, client) -> dict[str, Any]:
        return {visibility: self._open(client, f"{self.name}-{visibility}") for visibility in (PUBLIC, GM)}

    def _open(self, client, name: str):
        try:
            collection = client.get_or_create_collection(
                name,
                embedding_function=None,  # the default one tries a download
                configuration={"hnsw": {"space": "cosine", "ef_search": 200, "ef_construction": 200, **_HNSW}},
            )
        except Exception as exc:
            raise VectorStoreError(f"cannot open the Chroma collection {name!r}: {exc}") from exc
        hnsw = (getattr(collection, "configuration_json", None) or {}).get("hnsw") or {}
        if hnsw.get("sync_threshold") != _HNSW["sync_threshold"]:  # a store made before: save as often
            for attempt in range(5):
                try:
                    collection.modify(configuration={"hnsw": _HNSW})
                    break
                except Exception as exc:
                    # Chroma's SQLite file busy a moment (a client closing, another process opening):
                    # again shortly. An older server refuses it for good: it works, with longer stalls.
                    if "locked" in str(exc) and attempt < 4:
                        time.sleep(0.1 * (attempt + 1))
                        continue
                    log.warning("cannot set how often Chroma saves the collection %r: %s", name, exc)
                    break
        return collection

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        if self._folder is None:
            yield
            return
        with access(self.path, exclusive=False):
            yield

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        if self._folder is None:
            yield
            return
        with access(self.path, exclusive=True):
            marker = self.path / WRITING
            marker.touch()
            yield
            marker.unlink()  # not when the write failed: the folder may be torn

    def _chosen(self, visibility: str | None):
        collections = self.collections
        return [collections[visibility]] if visibility else list(collections.values())

    @_guarded
    def count(self) -> int:
        with self._reading():
            return sum(c.count() for c in self.collections.values())

    @_guarded
    def all_ids(self) -> set[str]:
        ids: set[str] = set()
        with self._reading():
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
    def upsert(self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[dict[str, str]]) -> None:
        for visibility in (PUBLIC, GM):
            rows = [i for i, meta in enumerate(metadatas) if meta["visibility"] == visibility]
            for i in range(0, len(rows), _WRITE_BATCH):
                batch = rows[i : i + _WRITE_BATCH]
                with self._writing():
                    self.collections[visibility].upsert(
                        ids=[ids[j] for j in batch],
                        embeddings=vectors[batch],
                        metadatas=[metadatas[j] for j in batch],
                    )
                _hand_over()

    @_guarded
    def delete(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        for visibility in (PUBLIC, GM):
            for i in range(0, len(ids), _WRITE_BATCH):
                with self._writing():
                    self.collections[visibility].delete(ids=ids[i : i + _WRITE_BATCH])
                _hand_over()

    @_guarded
    def query(self, vector: np.ndarray, n: int, *, visibility: str | None = None) -> list[DenseHit]:
        """Nearest windows, best first; `visibility="public"` searches the public windows only."""
        if n <= 0:
            return []
        hits: list[DenseHit] = []
        with self._reading():
            for collection in self._chosen(visibility):
                # Distances only: fetching metadata from Chroma's own SQLite cost 4x the vector search
                # (10 ms of 12 for 128 windows of 29k); the chunk id is part of the window id.
                result = collection.query(query_embeddings=[vector], n_results=n, include=["distances"])
                hits += [
                    DenseHit(window_id, EmbeddingWindow.chunk_of(window_id), float(distance))
                    for window_id, distance in zip(result["ids"][0], result["distances"][0], strict=True)
                ]
        return sorted(hits, key=lambda h: (h.distance, h.window_id))[:n]

    @_guarded
    def embeddings_of(self, ids: Iterable[str]) -> dict[str, np.ndarray]:
        """The stored vector of each of `ids` that a collection holds."""
        wanted = list(ids)
        found: dict[str, np.ndarray] = {}
        with self._reading():
            for collection in self.collections.values():
                for i in range(0, len(wanted), _WRITE_BATCH):
                    data = collection.get(ids=wanted[i : i + _WRITE_BATCH], include=["embeddings"])
                    for window_id, vector in zip(data["ids"], data["embeddings"], strict=True):
                        found[window_id] = np.asarray(vector, dtype=np.float32)
        return found

    @_guarded
    def vectors(self, *, visibility: str | None = None) -> tuple[list[str], list[str], np.ndarray]:
        """Every window's id, chunk id and vector: for an exact search to compare against."""
        ids: list[str] = []
        chunk_ids: list[str] = []
        blocks = []
        with self._reading():
            for collection in self._chosen(visibility):
                data = collection.get(include=["embeddings", "metadatas"])
                if len(data["ids"]):
                    ids += data["ids"]
                    chunk_ids += [m["chunk_id"] for m in data["metadatas"]]
                    blocks.append(np.asarray(data["embeddings"], dtype=np.float32))
        return ids, chunk_ids, np.vstack(blocks) if blocks else np.zeros((0, 0), dtype=np.float32)

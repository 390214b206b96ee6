"""The open index of one process: the SQLite store, the Chroma store and the embedding model.

Built once (in `main()` or a test fixture) and passed to ingest and to questions. The model and
Chroma are synchronous and slow to load, so they load lazily, once, off the event loop, and are
handed out as the async facades of `seam`.

Any process may ingest (the bot, `oracle ingest` from a shell or a timer, `oracle watch`): SQLite
readers see its commit at once, while a Chroma store read from disk keeps what it read. An ingest
writes its windows into a draft folder and its commit names that folder as served (`folders`); so
`vectors()`, which each question calls, opens the folder the index names when it is not the one it
has open (docs/processes.md).
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from ..errors import OracleError
from ..lexicon import DEFAULT as DEFAULT_LANGUAGE
from ..llm import LLM
from ..offload import off_loop
from ..settings import Settings
from ..stems import Stemming
from ..types import Clearance
from . import folders
from .embed import Embedder
from .seam import Embeddings, Vectors
from .store import Store
from .vectors import VectorStore, VectorStoreError


class PolicyChanged(OracleError, RuntimeError):
    """The index was built under another policy of who reads what than this process's: players are not
    served from it until the notes are ingested again (its message is safe to show a player)."""


REINGEST_FOR_POLICY = ("The notes were indexed under another policy of who reads what: the game master must "
                       "reingest them (`/oracle reingest` or `oracle ingest`) before players can ask.")


def written_with(meta: Mapping[str, str]) -> str:
    """The `Stemming.key` the keyword copies were written with; an earlier release recorded only the
    language (or nothing, in English)."""
    return meta.get("stemming") or meta.get("language", DEFAULT_LANGUAGE)


def stemmer_current(meta: Mapping[str, str]) -> bool:
    """Whether the keyword copies were written by this release's stemmer for the index's language
    (True before an ingest recorded a language: nothing is written yet)."""
    return "language" not in meta or written_with(meta) == Stemming(meta["language"]).key


def collection_name(embedder: Embedder | Embeddings, settings: Settings) -> str:
    windows = f"w{settings.window_tokens}-o{settings.window_overlap_tokens}"
    return f"{settings.collection_prefix}windows-{embedder.fingerprint}-{windows}"


def load_embedder(settings: Settings) -> Embedder:
    """The embedding model of `settings`, with its question encoder ready (seconds: off the loop)."""
    embedder = Embedder(settings.embed_model, query_backend=settings.query_backend, cache_dir=settings.models_path,
                        query_prompt=settings.embed_query_prompt, passage_prompt=settings.embed_passage_prompt)
    embedder.prepare_queries()
    return embedder


class SharedModel:
    """The embedding model of one or more indexes (a `Library`'s campaigns share one), loaded on
    first use unless it is handed over `loaded`."""

    def __init__(self, settings: Settings, loaded: Embeddings | None = None) -> None:
        self.settings = settings
        self._embeddings = loaded
        self._lock = asyncio.Lock()

    async def get(self) -> Embeddings:
        async with self._lock:
            if self._embeddings is None:
                self._embeddings = Embeddings(await off_loop(load_embedder, self.settings))
            return self._embeddings


class Index:
    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | Embeddings | SharedModel | None = None,
        llm: LLM | None = None,
        llm_slots: asyncio.Semaphore | None = None,
        search_slots: asyncio.Semaphore | None = None,
    ) -> None:
        """`embedder`: a model already loaded, or one shared with other indexes (a `Library`'s), else
        one of its own, loaded on first use. `llm`: an Ollama client shared with other indexes (its owner
        closes it), else one of its own. `llm_slots`: the LLM calls allowed at once, shared by every
        index on one Ollama (else each `Oracle` has its own ORACLE_LLM_CONCURRENCY); `search_slots`, likewise,
        the questions searched at once in this process (ORACLE_SEARCH_CONCURRENCY)."""
        self.settings = settings
        if isinstance(embedder, SharedModel):
            self.model = embedder
        else:
            self.model = SharedModel(settings, Embeddings(embedder) if isinstance(embedder, Embedder) else embedder)
        self.llm_slots = llm_slots
        self.search_slots = search_slots
        self._store: Store | None = None
        self._writer: Store | None = None
        self._idle_readers: list[Store] = []
        self._vectors: Vectors | None = None
        self._vectors_checked = False
        self._vectors_folder = ""  # the served folder `_vectors` reads (`folders.SERVED`)
        self._previous: Vectors | None = None  # the folder served before: questions may still be reading it
        self._lock = asyncio.Lock()
        self._owns_llm = llm is None
        self.llm = llm or LLM.from_settings(settings)

    async def store(self) -> Store:
        """The connection questions read through: it sees only committed ingests."""
        async with self._lock:
            if self._store is None:
                self._store = await Store.open(self.settings.sqlite_path)
            return self._store

    async def language(self) -> str:
        """The language the last ingest read the notes in."""
        return (await (await self.store()).stemming()).code

    async def stemmer_current(self) -> bool:
        """Whether the last ingest's keyword copies were written by this release's stemmer (`stemmer_current`)."""
        return stemmer_current(await (await self.store()).meta())

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Store]:
        """A reader inside a read transaction: every query of one question sees the same committed
        index, even when an ingest commits half-way through the question (WAL keeps the snapshot)."""
        store = self._idle_readers.pop() if self._idle_readers else await Store.open(self.settings.sqlite_path)
        try:
            await store.db.execute("BEGIN")
            try:
                yield store
            finally:
                await store.db.execute("COMMIT")
        except BaseException:
            await store.close()
            raise
        self._idle_readers.append(store)

    async def writer(self) -> Store:
        """The connection ingest writes through, apart from readers so they never see a half-made index."""
        async with self._lock:
            if self._writer is None:
                self._writer = await Store.open(self.settings.sqlite_path)
            return self._writer

    async def embedder(self) -> Embeddings:
        return await self.model.get()

    async def built_under(self) -> tuple[str, str]:
        """(key, description) of the policy the index was last built under; ("", "") before any ingest
        that recorded one."""
        meta = await (await self.store()).meta()
        return meta.get("policy", ""), meta.get("policy_text", "")

    async def check_policy(self, clearance: Clearance) -> None:
        """Refuse a player an index built under another policy than this process's (ORACLE_PLAYER_NOTES,
        ORACLE_GM_NOTES, ORACLE_GM_HEADINGS, ORACLE_LANGUAGE): it may show what the current policy hides.
        An index no ingest has committed to holds nothing to show."""
        if clearance.gm:
            return
        meta = await (await self.store()).meta()
        if meta.get("last_ingest") is not None and meta.get("policy", "") != self.settings.policy.key:
            raise PolicyChanged(REINGEST_FOR_POLICY)

    async def vectors(self, *, check: bool = True) -> Vectors:
        """The Chroma collection the last ingest committed, by any process: when the index names
        another folder than the one open (another ingest committed), that one is opened first (a few
        tens of milliseconds, off the event loop). With `check`, refuse one that lacks windows SQLite
        has indexed (a deleted or foreign Chroma folder): questions would silently lose the semantic path."""
        embedder = await self.embedder()
        store = await self.store()
        served = "" if self.settings.chroma_url else await store.meta_value(folders.SERVED)
        async with self._lock:
            if self._vectors is None or served != self._vectors_folder:
                path = folders.folder_of(self.settings.chroma_path, served)
                opened = Vectors(
                    await off_loop(VectorStore, path, collection_name(embedder, self.settings), url=self.settings.chroma_url)
                )
                if self._previous is not None:
                    await self._previous.close()
                self._previous, self._vectors = self._vectors, opened
                self._vectors_folder, self._vectors_checked = served, False
            vectors = self._vectors
        if check and not self._vectors_checked:
            expected = await store.window_count()
            present = await vectors.count()
            if present < expected:
                where = self.settings.chroma_url or self.settings.chroma_path
                raise VectorStoreError(
                    f"the dense index at {where} holds {present} of the {expected} windows the index names: "
                    "run `oracle ingest` to rebuild it"
                )
            self._vectors_checked = True
        return vectors

    async def draft(self) -> tuple[Vectors, str | None]:
        """Where an ingest, which holds the campaign's ingest lock, writes its windows, and the folder's
        name for its commit to serve: a draft of the served folder (`folders.draft`), or a Chroma
        server's collection itself (name None: a server is written in place). The caller closes it."""
        if self.settings.chroma_url:
            served = await self.vectors(check=False)
            return served, None
        store = await self.store()
        name = await off_loop(
            folders.draft, self.settings.chroma_path,
            await store.meta_value(folders.SERVED), await store.meta_value(folders.BEFORE),
        )
        path = self.settings.chroma_path / name
        collection = collection_name(await self.embedder(), self.settings)
        return Vectors(await off_loop(VectorStore, path, collection)), name

    async def record_withheld(self, question: str, reason: str) -> None:
        """Kept for the game master's `status`, on a connection of its own: never inside a question's
        snapshot or an ingest's transaction."""
        store = await Store.open(self.settings.sqlite_path, create=False)
        try:
            await store.record_withheld(question, reason)
        finally:
            await store.close()

    async def close(self) -> None:
        for store in (self._store, self._writer, *self._idle_readers):
            if store is not None:
                await store.close()
        self._store = self._writer = None
        self._idle_readers = []
        for vectors in (self._vectors, self._previous):
            if vectors is not None:
                await vectors.close()
        self._vectors = self._previous = None
        if self._owns_llm:
            await self.llm.close()

    async def __aenter__(self) -> Index:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

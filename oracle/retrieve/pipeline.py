"""The search pipeline: a question's three paths run at once, fused, then the linked notes.

    expand (a follow-up's query) → keyword ∥ semantic ∥ entity → fusion, sessions' records
    preferred (→ evidence and the learned ranker) → sources first → the keyword path's best
    among the first five → what came next (or before), for "and then what?" → linked

Each stage is a plain function in its own module; this class calls them in order, reading one
snapshot of the index, and times them for the trace.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np

from ..index.seam import Embeddings, Vectors
from ..index.store import Store
from ..offload import question_step
from ..settings import Settings
from ..stems import Stemming
from ..types import Chunk, Clearance, Scored
from . import path_depth
from .continuation import beside, carried, naming, told_first
from .copies import sources_first
from .entity import EntityMatch, Matchers, MentionStats, entity_path
from .evidence import Evidence, gather_evidence, head_matcher, query_stems
from .followup import Went, expand_followup, went_of
from .fusion import Fuse, Fused, make_fusion, within_reach
from .keyword import TermCounts, keyword_path
from .learned import load_ranker
from .linked import linked_path
from .retrieval import Hit, Retrieval
from .semantic import semantic_windows

# The semantic path's weight, as a share of ORACLE_PATH_WEIGHTS', on notes in a language the embedding
# model does not read (docs/decisions.md, "The game master's own language").
UNREAD_LANGUAGE = 0.25
# The keyword path's two best are among the first five, the passages a player reads
# (`answer.results.PASSAGES_SHOWN`): a question's rare words are in them, and fusion must not bury them.
KEYWORD_BEST, KEYWORD_REACH = 2, 5

_T = TypeVar("_T")


@dataclass(frozen=True)
class _Query:
    """What the paths search by: the query, the entities it names, the index's language and mention counts."""

    text: str
    entities: list[EntityMatch]
    stemming: Stemming
    stats: MentionStats


@dataclass(frozen=True)
class _Found:
    """What the paths found: their (id, score) lists, the semantic windows and vector, the keyword terms."""

    scored: dict[str, Scored]
    windows: dict[str, tuple[float, ...]]
    query_vector: np.ndarray
    stems: dict[str, str]
    counts: TermCounts


@dataclass(frozen=True)
class _Loaded:
    """The found chunks as loaded, their rowids, and each path's list as ranked hits."""

    chunks: dict[str, Chunk]
    rowids: dict[str, int]
    paths: dict[str, list[Hit]]


class SearchPipeline:
    def __init__(self, settings: Settings, matchers: Matchers) -> None:
        self.settings = settings
        self.matchers = matchers
        # Chosen once: how the paths' lists are fused, and what orders the pool. The learned fusion
        # reorders every candidate of the current fusion, so that one keeps them all; without a
        # readable model it is the current fusion.
        self.learned = settings.fusion == "learned"
        self.ranker = load_ranker(settings.fusion_model) if self.learned else None
        def fusion(weights: dict[str, float]) -> Fuse:
            limit = None if self.learned else settings.fused_pool
            return make_fusion(settings.fusion, weights=weights, rrf_k=settings.rrf_k, limit=limit,
                               telling=settings.telling_prior, kindless=settings.kindless_prior)

        self.fuse = fusion(settings.path_weights)
        # Notes in a language the embedding model was not trained on (the bundled model reads English):
        # its nearest windows are mostly noise there, and its votes count a quarter.
        self.fuse_unread = fusion(
            {**settings.path_weights, "semantic": settings.path_weights.get("semantic", 1.0) * UNREAD_LANGUAGE}
        )

    async def search(
        self,
        store: Store,
        vectors: Vectors,
        embedder: Embeddings,
        question: str,
        history: Sequence[str],
        clearance: Clearance,
        k: int,
        *,
        told: str | None = None,
    ) -> Retrieval:
        """`told`: the id of the passage the thread told last, which "and then what?" goes on
        from (None: found by searching the thread's question again)."""
        depth = path_depth(k)
        timings: dict[str, float] = {}
        started = time.perf_counter()
        query = await self._expand(store, question, history, clearance)
        timings["expand"] = elapsed_ms(started)
        found = await self._run_paths(store, vectors, embedder, query, clearance=clearance, depth=depth,
                                      timings=timings)
        loaded = await _load_found(store, found.scored, timings)
        fused = self._fuse_paths(found.scored, loaded.chunks, query, embedder, timings)
        evidence = None
        if self.learned:
            fused, evidence = await self._learned_order(
                store, query, found, loaded, fused, clearance=clearance, k=k, timings=timings
            )
        keyword_best = [cid for cid, _ in found.scored.get("keyword", [])[:KEYWORD_BEST]]
        fused_hits = _fused_hits(fused, loaded.chunks, keyword_best)
        went = went_of(question, query.stemming.code) if history else None
        walk = _Walk(None, None)
        if went is not None:
            t = time.perf_counter()
            told_last = await self._told_last(store, vectors, embedder, history, told, clearance, k,
                                               query.stemming.code)
            if told_last is not None:
                fused_hits, walk = await _went_on(store, told_last, went, fused_hits, clearance, query.stemming)
            timings["next"] = elapsed_ms(t)
        linked_hits = await self._linked_hits(store, fused_hits, clearance, k, timings)
        timings["total"] = elapsed_ms(started)
        return Retrieval(question, query.text, query.entities, loaded.paths, fused_hits, timings, linked_hits,
                         found.query_vector, evidence, query.stemming.code, walk.told, went[0] if went else "on",
                         walk.reached)

    async def _expand(self, store: Store, question: str, history: Sequence[str], clearance: Clearance) -> _Query:
        """The search query (a follow-up expanded by the conversation before it) and the entities it names."""
        matcher, mention_stats = await self.matchers.lookup(clearance, store)
        # The language the index was built in: its follow-up words, its keyword stems.
        stemming = await store.stemming()
        entities = matcher.find(question)
        query = expand_followup(question, history, names_entity=bool(entities), code=stemming.code)
        if query != question:
            entities = matcher.find(query)
        return _Query(query, entities, stemming, mention_stats)

    async def _run_paths(
        self,
        store: Store,
        vectors: Vectors,
        embedder: Embeddings,
        query: _Query,
        *,
        clearance: Clearance,
        depth: int,
        timings: dict[str, float],
    ) -> _Found:
        """The keyword, semantic and entity paths run at once, each timed as it ends."""
        # Read by the keyword path, with the learned fusion's terms; reused by its evidence.
        stems = query_stems(query.text, query.stemming) if self.learned else {}
        counts = TermCounts(store, clearance, also=stems.values())
        total = await query.stats.indexed(store, clearance)
        keyword, (semantic, windows, query_vector), entity = await asyncio.gather(
            _timed(timings, "keyword", keyword_path(
                store, query.text, clearance, depth, (self.settings.fts_head_weight, 1.0), counts=counts, total=total,
                stemming=query.stemming,
            )),
            _timed(timings, "semantic", _semantic_path(store, vectors, embedder, query.text, clearance, depth)),
            _timed(timings, "entity", entity_path(store, query.entities, clearance, depth, stats=query.stats)),
        )
        scored = {"keyword": keyword, "semantic": semantic, "entity": entity}
        return _Found(scored, windows, query_vector, stems, counts)

    def _fuse_paths(
        self, scored: dict[str, Scored], chunks: dict[str, Chunk], query: _Query, embedder: Embeddings,
        timings: dict[str, float],
    ) -> list[Fused]:
        """The paths' lists fused, sessions' records preferred and notes of no kind the question does
        not name put after; the semantic votes cut where the model cannot read."""
        t = time.perf_counter()
        tells = {cid for cid, chunk in chunks.items() if chunk.kind == "session"}
        named = head_matcher(query.entities)
        kindless = {cid for cid, chunk in chunks.items() if chunk.kind == "note" and not named(chunk)}
        fuse = self.fuse if embedder.reads(query.stemming.code) else self.fuse_unread
        fused = fuse(scored, tells, kindless)
        timings["fusion"] = elapsed_ms(t)
        return fused

    async def _learned_order(
        self,
        store: Store,
        query: _Query,
        found: _Found,
        loaded: _Loaded,
        fused: list[Fused],
        *,
        clearance: Clearance,
        k: int,
        timings: dict[str, float],
    ) -> tuple[list[Fused], Evidence]:
        """The learned fusion: every candidate's evidence, then the model's order cut to the fused pool."""
        t = time.perf_counter()
        seeds = [f.id for f in fused[:k]]
        evidence = await gather_evidence(
            store, stems=found.stems, scored=found.scored, windows=found.windows, chunks=loaded.chunks,
            rowids=loaded.rowids, entities=query.entities, fused=fused, seeds=seeds, clearance=clearance,
            stats=query.stats, counts=found.counts,
        )
        timings["evidence"] = elapsed_ms(t)
        t = time.perf_counter()
        if self.ranker is not None:
            fused = self.ranker.rank(evidence, fused)
        fused = fused[: self.settings.fused_pool]
        timings["learned"] = elapsed_ms(t)
        return fused, evidence

    async def _told_last(
        self,
        store: Store,
        vectors: Vectors,
        embedder: Embeddings,
        history: Sequence[str],
        told: str | None,
        clearance: Clearance,
        k: int,
        code: str,
    ) -> Chunk | None:
        """The passage told last: the one the thread's answers told last (`told`), while the index
        holds it and the reader may read it; else the first passage of the latest question that asked
        something, searched again, carried one passage on (back) for each bare "and then?" ("and
        before that?") asked since. `code`: the index's language, which says which questions are bare."""
        if told is not None and (chunk := await store.readable_chunk(told, clearance)) is not None:
            return chunk
        turns = [h for h in history if h.strip()]
        steps = 0
        while turns and (bare := went_of(turns[-1], code)) is not None and not bare[1]:
            turns.pop()
            steps += 1 if bare[0] == "on" else -1
        asked = await self.search(store, vectors, embedder, turns[-1], turns[:-1], clearance, k) if turns else None
        if asked is None or not asked.fused:
            return None
        return await carried(store, asked.fused[0].chunk, steps, clearance)

    async def _linked_hits(
        self, store: Store, fused_hits: list[Hit], clearance: Clearance, k: int, timings: dict[str, float]
    ) -> list[Hit]:
        """The notes linked to the fused top k, as ranked hits."""
        t = time.perf_counter()
        seeds = [h.chunk.id for h in fused_hits[:k]]
        linked = await linked_path(store, seeds, clearance, self.settings.linked, {h.chunk.label for h in fused_hits})
        linked_hits = ranked_hits(linked, {c.id: c for c in await store.chunks_by_ids([cid for cid, _ in linked])})
        timings["linked"] = elapsed_ms(t)
        return linked_hits


async def _timed(timings: dict[str, float], name: str, coro: Awaitable[_T]) -> _T:
    """`coro`'s result, its time recorded under `name` as it ends."""
    t = time.perf_counter()
    result = await coro
    timings[name] = elapsed_ms(t)
    return result


async def _semantic_path(
    store: Store, vectors: Vectors, embedder: Embeddings, text: str, clearance: Clearance, depth: int
) -> tuple[Scored, dict[str, tuple[float, ...]], np.ndarray]:
    """The semantic path: its hits, each chunk's window similarities, and the query's vector."""
    query_vector = await embedder.encode_query(text)
    found = await semantic_windows(store, vectors, embedder, text, clearance, depth, query_vector)
    # The vector is kept: the passages' excerpts are matched against it too.
    return [(cid, sims[0]) for cid, sims in found], dict(found), query_vector


async def _load_found(store: Store, scored: dict[str, Scored], timings: dict[str, float]) -> _Loaded:
    """Every chunk the paths found, loaded once, and each path's list as ranked hits."""
    t = time.perf_counter()
    wanted = list(dict.fromkeys(cid for hits in scored.values() for cid, _ in hits))
    loaded, rowids = await store.chunks_and_rowids(wanted)
    chunks = {c.id: c for c in loaded}
    paths = {name: ranked_hits(hits, chunks) for name, hits in scored.items()}
    timings["load"] = elapsed_ms(t)
    return _Loaded(chunks, rowids, paths)


@dataclass(frozen=True)
class _Walk:
    """Where a question that went on (back) went from, and to: passages' ids, None when it did not."""

    told: str | None
    reached: str | None


async def _went_on(
    store: Store, told: Chunk, went: tuple[Went, tuple[str, ...]], hits: list[Hit], clearance: Clearance,
    stemming: Stemming,
) -> tuple[list[Hit], _Walk]:
    """The passage told last and the one after it, or before it (those of them holding a word the
    question names, when it names something: `went_of`), then `hits` (continuation.py)."""
    way, named = went
    near = await beside(store, told, clearance, way)
    went_on = [c for c in (told, near) if c is not None]
    if named:
        went_on = await question_step(naming, went_on, named, stemming)
    if not went_on:
        return hits, _Walk(None, None)
    return told_first(hits, went_on), _Walk(told.id, went_on[-1].id)


def _fused_hits(fused: list[Fused], chunks: dict[str, Chunk], keyword_best: Sequence[str]) -> list[Hit]:
    """The fused order as ranked hits over the loaded chunks, sources before their copies, and the
    keyword path's best among the passages a player reads."""
    hits = sources_first([Hit(chunks[f.id], rank, f.score) for rank, f in enumerate(fused, 1) if f.id in chunks])
    by_id = {h.chunk.id: h for h in hits}
    order = within_reach(list(by_id), keyword_best, KEYWORD_REACH)
    if order == list(by_id):
        return hits
    return [replace(by_id[cid], rank=rank) for rank, cid in enumerate(order, 1)]


def ranked_hits(scored: Scored, chunks: dict[str, Chunk]) -> list[Hit]:
    """A path's (id, score) list as ranked hits, 1-based, over the chunks that could be loaded."""
    return [Hit(chunks[cid], rank, score) for rank, (cid, score) in enumerate(scored, 1) if cid in chunks]


def elapsed_ms(since: float) -> float:
    """Milliseconds since `since` (a `time.perf_counter()`), as the trace records every stage."""
    return (time.perf_counter() - since) * 1000

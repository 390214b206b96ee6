"""The search pipeline: a question's three paths run at once, fused, then the linked notes.

    expand (a follow-up's query) → keyword ∥ semantic ∥ entity → fusion, sessions' records
    preferred (→ evidence and the learned ranker) → sources first → linked

Each stage is a plain function in its own module; this class calls them in order, reading one
snapshot of the index, and times them for the trace.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence

from ..index.seam import Embeddings, Vectors
from ..index.store import Store
from ..settings import Settings
from ..types import Chunk, Clearance, Scored
from . import path_depth
from .copies import sources_first
from .entity import Matchers, entity_path
from .evidence import gather_evidence, query_stems
from .followup import expand_followup
from .fusion import Fuse, make_fusion
from .keyword import TermCounts, keyword_path
from .learned import load_ranker
from .linked import linked_path
from .retrieval import Hit, Retrieval
from .semantic import semantic_windows

# The semantic path's weight, as a share of ORACLE_PATH_WEIGHTS', on notes in a language the embedding
# model does not read (docs/decisions.md, "The game master's own language").
UNREAD_LANGUAGE = 0.25


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
                               telling=settings.telling_prior)

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
    ) -> Retrieval:
        settings = self.settings
        depth = path_depth(k)
        timings: dict[str, float] = {}
        started = time.perf_counter()
        matcher, mention_stats = await self.matchers.lookup(clearance, store)
        # The language the index was built in: its follow-up words, its keyword stems.
        stemming = await store.stemming()
        entities = matcher.find(question)
        query = expand_followup(question, history, names_entity=bool(entities), code=stemming.code)
        if query != question:
            entities = matcher.find(query)
        timings["expand"] = elapsed_ms(started)

        async def timed(name: str, coro: Awaitable[Scored]) -> Scored:
            t = time.perf_counter()
            result = await coro
            timings[name] = elapsed_ms(t)
            return result

        query_vector = None
        windows: dict[str, tuple[float, ...]] = {}

        async def semantic() -> Scored:
            nonlocal query_vector  # kept: the passages' excerpts are matched against it too
            query_vector = await embedder.encode_query(query)
            found = await semantic_windows(store, vectors, embedder, query, clearance, depth, query_vector)
            windows.update(found)
            return [(cid, sims[0]) for cid, sims in found]

        # Read by the keyword path, with the learned fusion's terms; reused by its evidence.
        stems = query_stems(query, stemming) if self.learned else {}
        counts = TermCounts(store, clearance, also=stems.values())
        total = await mention_stats.indexed(store, clearance)
        keyword, semantic_hits, entity = await asyncio.gather(
            timed("keyword", keyword_path(
                store, query, clearance, depth, (settings.fts_head_weight, 1.0), counts=counts, total=total,
                stemming=stemming,
            )),
            timed("semantic", semantic()),
            timed("entity", entity_path(store, entities, clearance, depth, stats=mention_stats)),
        )
        scored = {"keyword": keyword, "semantic": semantic_hits, "entity": entity}

        t = time.perf_counter()
        wanted = list(dict.fromkeys(cid for hits in scored.values() for cid, _ in hits))
        loaded, rowids = await store.chunks_and_rowids(wanted)
        chunks = {c.id: c for c in loaded}
        paths = {name: ranked_hits(hits, chunks) for name, hits in scored.items()}
        timings["load"] = elapsed_ms(t)

        t = time.perf_counter()
        tells = {cid for cid, chunk in chunks.items() if chunk.kind == "session"}
        fused = (self.fuse if embedder.reads(stemming.code) else self.fuse_unread)(scored, tells)
        timings["fusion"] = elapsed_ms(t)

        evidence = None
        if self.learned:
            t = time.perf_counter()
            seeds = [f.id for f in fused[:k]]
            evidence = await gather_evidence(
                store, stems, scored, windows, chunks, rowids, entities, fused, seeds, clearance, mention_stats,
                counts,
            )
            timings["evidence"] = elapsed_ms(t)
            t = time.perf_counter()
            if self.ranker is not None:
                fused = self.ranker.rank(evidence, fused)
            fused = fused[: settings.fused_pool]
            timings["learned"] = elapsed_ms(t)
        fused_hits = sources_first([Hit(chunks[f.id], rank, f.score) for rank, f in enumerate(fused, 1) if f.id in chunks])

        t = time.perf_counter()
        seeds = [h.chunk.id for h in fused_hits[:k]]
        linked = await linked_path(store, seeds, clearance, settings.linked, {h.chunk.label for h in fused_hits})
        linked_hits = ranked_hits(linked, {c.id: c for c in await store.chunks_by_ids([cid for cid, _ in linked])})
        timings["linked"] = elapsed_ms(t)
        timings["total"] = elapsed_ms(started)
        return Retrieval(question, query, entities, paths, fused_hits, timings, linked_hits, query_vector, evidence,
                         stemming.code)


def ranked_hits(scored: Scored, chunks: dict[str, Chunk]) -> list[Hit]:
    """A path's (id, score) list as ranked hits, 1-based, over the chunks that could be loaded."""
    return [Hit(chunks[cid], rank, score) for rank, (cid, score) in enumerate(scored, 1) if cid in chunks]


def elapsed_ms(since: float) -> float:
    """Milliseconds since `since` (a `time.perf_counter()`), as the trace records every stage."""
    return (time.perf_counter() - since) * 1000

"""The one orchestration: `Oracle.search` (retrieval) and, on top of it, `Oracle.ask`.

Stages are plain functions in their own modules; this class only calls them in order, times them,
and keeps the trace.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from .followup import expand_followup
from .fusion import Fused, dbsf, rrf
from .index import Index
from .paths import EntityMatch, EntityMatcher, Scored, entity_path, keyword_path, semantic_path
from .types import GM, PUBLIC, Chunk

PATHS = ("keyword", "semantic", "entity")


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    rank: int
    score: float

    def to_json(self) -> dict:
        c = self.chunk
        return {
            "id": c.id,
            "label": c.label,
            "path": c.path,
            "lines": [c.start_line, c.end_line],
            "rank": self.rank,
            "score": round(self.score, 6),
            "text": c.text,
        }


@dataclass
class Retrieval:
    question: str
    search_query: str
    entities: list[EntityMatch]
    paths: dict[str, list[Hit]]
    fused: list[Hit]  # the fused pool, best first (≤ fused_pool)
    timings_ms: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "question": self.question,
            "search_query": self.search_query,
            "entities": [{"id": e.entity_id, "name": e.name, "matched": e.matched} for e in self.entities],
            "paths": {name: [h.to_json() for h in hits] for name, hits in self.paths.items()},
            "fused": [h.to_json() for h in self.fused],
            "union": len({h.chunk.id for hits in self.paths.values() for h in hits}),
            "overlap": overlap({name: [h.chunk.id for h in hits] for name, hits in self.paths.items()}),
            "timings_ms": {k: round(v, 2) for k, v in self.timings_ms.items()},
        }


def overlap(rankings: dict[str, list[str]]) -> dict[str, int]:
    """How many results each pair of paths shares: how much each path adds."""
    names = sorted(rankings)
    return {
        f"{a}&{b}": len(set(rankings[a]) & set(rankings[b])) for i, a in enumerate(names) for b in names[i + 1 :]
    }


class Oracle:
    def __init__(self, index: Index) -> None:
        self.index = index
        self.settings = index.settings
        self._matchers: dict[tuple[str, bool], EntityMatcher] = {}

    @staticmethod
    def visibilities(gm: bool) -> tuple[str, ...]:
        return (PUBLIC, GM) if gm else (PUBLIC,)

    async def matcher(self, gm: bool) -> EntityMatcher:
        """The Compendium names this reader may see; rebuilt only when an ingest commits."""
        store = await self.index.store()
        key = (await store.generation(), gm)
        if key not in self._matchers:
            aliases = await store.visible_aliases(self.visibilities(gm))
            self._matchers = {key: await asyncio.to_thread(EntityMatcher, aliases)}
        return self._matchers[key]

    async def search(
        self, question: str, *, history: Sequence[str] = (), gm: bool = False, k: int | None = None
    ) -> Retrieval:
        settings = self.settings
        k = k or settings.k
        depth = max(2 * k, k + 5)
        visibilities = self.visibilities(gm)
        timings: dict[str, float] = {}
        store = await self.index.store()
        vectors = await self.index.vectors()
        embedder = await self.index.embedder()  # loaded once per process, not a cost of the question
        started = time.perf_counter()
        matcher = await self.matcher(gm)
        entities = matcher.find(question)
        query = expand_followup(question, history, names_entity=bool(entities))
        if query != question:
            entities = matcher.find(query)
        timings["expand"] = _ms(started)

        async def timed(name: str, coro) -> Scored:
            t = time.perf_counter()
            result = await coro
            timings[name] = _ms(t)
            return result

        keyword, semantic, entity = await asyncio.gather(
            timed("keyword", keyword_path(store, query, visibilities, depth, (settings.fts_head_weight, 1.0))),
            timed("semantic", semantic_path(store, vectors, embedder, query, visibilities, depth)),
            timed("entity", entity_path(store, entities, visibilities, depth)),
        )
        scored = {"keyword": keyword, "semantic": semantic, "entity": entity}

        t = time.perf_counter()
        fused = self.fuse(scored)
        timings["fusion"] = _ms(t)

        t = time.perf_counter()
        wanted = list(dict.fromkeys([f.id for f in fused] + [cid for hits in scored.values() for cid, _ in hits]))
        chunks = {c.id: c for c in await store.chunks_by_ids(wanted)}
        paths = {
            name: [Hit(chunks[cid], rank, score) for rank, (cid, score) in enumerate(hits, 1) if cid in chunks]
            for name, hits in scored.items()
        }
        fused_hits = [Hit(chunks[f.id], rank, f.score) for rank, f in enumerate(fused, 1) if f.id in chunks]
        timings["load"] = _ms(t)
        timings["total"] = _ms(started)
        return Retrieval(question, query, entities, paths, fused_hits, timings)

    def fuse(self, scored: dict[str, Scored]) -> list[Fused]:
        settings = self.settings
        if settings.fusion == "dbsf":
            return dbsf(scored, weights=settings.path_weights, limit=settings.fused_pool)
        weights = settings.path_weights if settings.fusion == "weighted_rrf" else None
        rankings = {name: [cid for cid, _ in hits] for name, hits in scored.items()}
        return rrf(rankings, k=settings.rrf_k, weights=weights, limit=settings.fused_pool)


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000

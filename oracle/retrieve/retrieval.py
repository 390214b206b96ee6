"""What retrieval produces: ranked hits per path, the fused pool and the linked notes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..lexicon import DEFAULT
from ..types import Chunk
from .entity import EntityMatch
from .evidence import Evidence
from .followup import Went


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    rank: int
    score: float

    def to_json(self) -> dict[str, Any]:
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
    linked: list[Hit] = field(default_factory=list)  # reached from the fused top k by a reference
    query_vector: np.ndarray | None = None  # the search query embedded by the semantic path
    evidence: Evidence | None = None  # the learned fusion's features of every candidate (ORACLE_FUSION=learned)
    language: str = DEFAULT  # of the index: how the passages' sentences are matched to the question
    told: str | None = None  # "and then what?": the passage told last, which the fused order goes on from
    went: Went = "on"  # ...or back from ("and before that?")
    reached: str | None = None  # the passage it went on (back) to: told last once this is answered

    @property
    def pool(self) -> list[Hit]:
        """Every candidate the reranker sees: the fused pool, then the linked notes."""
        return self.fused + self.linked

    @property
    def union(self) -> int:
        """How many chunks the three paths found together."""
        return len({h.chunk.id for hits in self.paths.values() for h in hits})

    @property
    def overlap(self) -> dict[str, int]:
        """How many results each pair of paths shares: how much each path adds."""
        names = sorted(self.paths)
        found = {name: {h.chunk.id for h in self.paths[name]} for name in names}
        return {f"{a}&{b}": len(found[a] & found[b]) for i, a in enumerate(names) for b in names[i + 1 :]}

    @property
    def timings(self) -> dict[str, float]:
        """Per-stage milliseconds, rounded as reported."""
        return {k: round(v, 2) for k, v in self.timings_ms.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "search_query": self.search_query,
            "entities": [{"id": e.entity_id, "name": e.name, "matched": e.matched} for e in self.entities],
            "paths": {name: [h.to_json() for h in hits] for name, hits in self.paths.items()},
            "fused": [h.to_json() for h in self.fused],
            "linked": [h.to_json() for h in self.linked],
            "union": self.union,
            "overlap": self.overlap,
            "timings_ms": self.timings,
            **({f"went_{self.went}_from": self.told} if self.told is not None else {}),
            **({"evidence": self.evidence.to_json()} if self.evidence is not None else {}),
        }

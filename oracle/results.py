"""What a question produces at each stage: frozen results, free of storage and transport objects."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .citations import Citation
from .context import Context, Summary
from .excerpts import Excerpt
from .paths import EntityMatch
from .rerank import Reranked
from .types import Chunk

PASSAGES_SHOWN = 5
NOT_FOUND = "The notes hold nothing on that."


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
    linked: list[Hit] = field(default_factory=list)  # reached from the fused top k by a reference
    query_vector: np.ndarray | None = None  # the search query embedded by the semantic path

    @property
    def pool(self) -> list[Hit]:
        """Every candidate the reranker sees: the fused pool, then the linked notes."""
        return self.fused + self.linked

    def to_json(self) -> dict:
        return {
            "question": self.question,
            "search_query": self.search_query,
            "entities": [{"id": e.entity_id, "name": e.name, "matched": e.matched} for e in self.entities],
            "paths": {name: [h.to_json() for h in hits] for name, hits in self.paths.items()},
            "fused": [h.to_json() for h in self.fused],
            "linked": [h.to_json() for h in self.linked],
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


@dataclass
class Selection:
    """What reranking and packing made of a retrieval."""

    final: list[Chunk]  # reranked k, then the rest of the pool
    context: Context
    rerank: Reranked
    annotations: dict[str, str]  # chunk id -> annotation, for the pool


@dataclass(frozen=True)
class Answer:
    question: str
    text: str
    mode: str  # llm | passages | not_found
    reason: str
    citations: tuple[Citation, ...]
    fragments: tuple[Chunk, ...]
    summaries: tuple[Summary, ...]
    trace: dict

    def to_json(self) -> dict:
        return {
            "answer": self.text,
            "mode": self.mode,
            "reason": self.reason,
            "citations": [c.to_json() for c in self.citations],
            "fragments": [c.label for c in self.fragments],
            "summaries": [s.chunk.label for s in self.summaries],
            "trace": self.trace,
        }


def passages_text(reason: str, excerpts: Sequence[Excerpt]) -> str:
    """The answer without the LLM: the best passages, plainly marked as passages."""
    intro = f"The Oracle could not write an answer ({reason}). The most relevant passages from the notes:"
    return "\n\n".join([intro, *passage_blocks(excerpts)])


def passage_blocks(excerpts: Sequence[Excerpt]) -> list[str]:
    """Each passage shown: its label and the lines of its sentences, then the sentences quoted."""
    return [
        f"[{e.chunk.label}] ({e.chunk.path}, lines {e.start_line}–{e.end_line})\n> {e.text}"
        for e in excerpts[:PASSAGES_SHOWN]
    ]

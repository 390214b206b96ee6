"""What reranking, packing and answering produce: frozen results, free of storage and transport objects."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..types import Chunk
from .citations import Citation
from .context import Context, Summary
from .excerpts import Excerpt
from .rerank import Reranked

if TYPE_CHECKING:
    from .trace import Trace

# What an answer is: written by the model, the best passages shown instead, or nothing found.
Mode = Literal["llm", "passages", "not_found"]

PASSAGES_SHOWN = 5
NOT_FOUND = "The notes hold nothing on that."


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
    mode: Mode
    reason: str
    citations: tuple[Citation, ...]
    fragments: tuple[Chunk, ...]
    summaries: tuple[Summary, ...]
    trace: Trace

    def to_json(self) -> dict:
        return {
            "answer": self.text,
            "mode": self.mode,
            "reason": self.reason,
            "citations": [c.to_json() for c in self.citations],
            "fragments": [c.label for c in self.fragments],
            "summaries": [s.chunk.label for s in self.summaries],
            "trace": self.trace.to_json(),
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

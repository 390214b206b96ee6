"""The trace of one question: what every stage did, for the game master's `--trace` and for `eval`.

Built once, at the end of `Oracle.ask`, from the stages' own results; frozen. `to_json()` is the
record `oracle ask --json` prints under "trace", with its `version` (JSON_VERSION): a field that a
question never reached (a retrieval for an empty question, a rerank when nothing matched) is left out.

The trace keeps why the model gave nothing (a host, a model's path, an error's text) for the game
master; `for_players()` is the same record as a player may read it, with only the generic words.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Literal, TypedDict

from ..retrieve.retrieval import Hit, Retrieval
from .budget import PromptTokens
from .excerpts import Excerpt
from .selection import Selection

# The answer and trace JSON's `version`: 2 names the packed one-line annotations "headlines" (1 had no
# `version` and called them "summaries").
JSON_VERSION = 2

# What an answer is: written by the model, the best passages shown instead, or nothing found.
Mode = Literal["llm", "passages", "not_found"]

# What a player reads when there is no written answer: the same whatever happened, so a withheld
# answer looks like a model that did not answer, and no host, path or error reaches a player.
PLAYER_REASON = "the language model gave no usable answer"
# Why a written answer stops early, and why the reranker kept the fused order, as a player reads them.
PLAYER_INCOMPLETE = "the language model stopped before the end"
PLAYER_RERANK_OFF = "off"


def _ids(hits: list[Hit]) -> list[list[str | float]]:
    return [[h.chunk.id, h.chunk.label, round(h.score, 6)] for h in hits]


@dataclass(frozen=True)
class RerankRecord:
    """What the reranker did: its ORACLE_RERANKER, whether its order was used, why, and what it picked."""

    mode: str
    used: bool
    reason: str
    chosen: list[str]  # chunk ids, before the fused order filled the rest

    def to_json(self) -> dict[str, Any]:
        return vars(self).copy()


@dataclass(frozen=True)
class CitationRecord:
    """The answer's citations once checked: the labels shown, those the context did not hold (removed),
    and how many sentences cite nothing."""

    shown: list[str]
    unknown: list[str]
    uncited_sentences: int

    def to_json(self) -> dict[str, Any]:
        return vars(self).copy()


class AnswerParts(TypedDict, total=False):
    """What the answer stage adds to the stages' own record."""

    llm_calls: int
    tokens: PromptTokens
    citations: CitationRecord
    incomplete: str
    excerpts: tuple[Excerpt, ...]
    player_reason: str


def _json(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    return value


@dataclass(frozen=True)
class Trace:
    mode: Mode
    reason: str
    llm_calls: int = 0
    # retrieval
    search_query: str | None = None
    entities: list[str] | None = None
    paths: dict[str, list[list[str | float]]] | None = None  # per path: [chunk id, label, score], best first
    union: int | None = None
    overlap: dict[str, int] | None = None
    fused: list[list[str | float]] | None = None
    linked: list[list[str | float]] | None = None
    timings_ms: dict[str, float] | None = None
    # reranking and packing
    rerank: RerankRecord | None = None
    packed: dict[str, list[list[str]]] | None = None  # fragments and headlines: [chunk id, label]
    # the answer
    tokens: PromptTokens | None = None
    citations: CitationRecord | None = None
    incomplete: str | None = None  # why a written answer stops early
    excerpts: tuple[Excerpt, ...] | None = None  # the sentences the passages show, with their lines
    player_reason: str | None = None  # why there is no written answer, as a player reads it

    def for_players(self) -> Trace:
        """This trace as a player may read it: without a written answer, what happened to the model
        (`player_reason`, else PLAYER_REASON), never a host or an error; a reranker that was off, or an
        answer cut short, says only that. The other reasons ("no passage matched", "empty question")
        are the Oracle's own words."""
        rerank = self.rerank
        if rerank is not None and not rerank.used:
            rerank = replace(rerank, reason=PLAYER_RERANK_OFF)
        return replace(
            self,
            reason=(self.player_reason or PLAYER_REASON) if self.mode == "passages" else self.reason,
            rerank=rerank,
            incomplete=PLAYER_INCOMPLETE if self.incomplete else self.incomplete,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": JSON_VERSION}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = _json(value)
        return out


def build_trace(
    mode: Mode,
    reason: str,
    retrieval: Retrieval | None,
    selection: Selection | None,
    reranker: str,
    answer: AnswerParts | None = None,
) -> Trace:
    """The trace of the stages a question went through, with what the answer stage adds."""
    trace = Trace(mode, reason, **(answer or {}))
    if retrieval is not None:
        trace = replace(
            trace,
            search_query=retrieval.search_query,
            entities=[e.name for e in retrieval.entities],
            paths={name: _ids(hits) for name, hits in retrieval.paths.items()},
            union=retrieval.union,
            overlap=retrieval.overlap,
            fused=_ids(retrieval.fused),
            linked=_ids(retrieval.linked),
            timings_ms=retrieval.timings,
        )
    if selection is not None:
        trace = replace(
            trace,
            rerank=RerankRecord(reranker, selection.rerank.used, selection.rerank.reason, selection.rerank.chosen),
            packed={
                "fragments": [[c.id, c.label] for c in selection.context.fragments],
                "headlines": [[h.chunk.id, h.chunk.label] for h in selection.context.headlines],
            },
        )
    return trace

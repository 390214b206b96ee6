"""What answering produces: the Answer, and the passages shown when there is no written answer."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..lexicon import DEFAULT
from ..retrieve.retrieval import Retrieval
from ..texts import Texts, texts
from ..types import Chunk, Clearance
from .citations import Citation
from .context import Headline
from .excerpts import Excerpt
from .selection import Selection
from .trace import JSON_VERSION, AnswerParts, Mode, Trace, build_trace

PASSAGES_SHOWN = 5

# What kept the model from writing, as a player may be told it (`Texts.unwritten`): no model to ask,
# the model still loading, or too slow, when the first words were due; or its reply unusable (an
# answer withheld for repeating game-master-only text says the same).
Cause = Literal["unavailable", "loading", "late", "unusable"]
# The causes of an answer whose first words were not written in time (its reason: `Deadline.missed`).
MISSED_DEADLINE: frozenset[Cause] = frozenset({"loading", "late"})


@dataclass(frozen=True)
class Answer:
    """`reason` and `trace` keep why the model gave nothing, host and error included, for the game
    master and the log; `to_json()` decides what a reader gets: a player's (the default clearance)
    names no host, path or error (`Trace.for_players`)."""

    question: str
    text: str
    mode: Mode
    reason: str
    citations: tuple[Citation, ...]
    fragments: tuple[Chunk, ...]
    headlines: tuple[Headline, ...]
    trace: Trace
    clearance: Clearance = Clearance.PLAYER  # a game master's JSON keeps the detail
    language: str = DEFAULT  # of the question: what the Oracle writes itself is written in it (`texts.py`)
    cause: Cause | None = None  # why the model wrote no answer; None when it wrote one
    # The id of the passage it told, which a following "and then what?" goes on from: the one its
    # question went on (back) to, else the first it cites. None: it cites none.
    told: str | None = None

    def shown_trace(self) -> Trace:
        """The trace as this answer's reader may read it."""
        return self.trace if self.clearance.gm else self.trace.for_players()

    def to_json(self) -> dict[str, Any]:
        trace = self.shown_trace()
        return {
            "version": JSON_VERSION,
            "answer": self.text,
            "mode": self.mode,
            "reason": self.reason if self.clearance.gm else trace.reason,
            "citations": [c.to_json() for c in self.citations],
            "fragments": [c.label for c in self.fragments],
            "headlines": [h.chunk.label for h in self.headlines],
            "trace": trace.to_json(),
            "language": self.language,
        }


def compose(
    question: str,
    text: str,
    mode: Mode,
    reason: str,
    *,
    reranker: str,
    retrieval: Retrieval | None = None,
    selection: Selection | None = None,
    citations: tuple[Citation, ...] = (),
    trace: AnswerParts | None = None,
    language: str = DEFAULT,
    cause: Cause | None = None,
) -> Answer:
    """An answer and its trace. `trace`: what the answer stage adds to the stages' own record (see
    `answer.trace`); `reranker`: the ORACLE_RERANKER the trace names."""
    record = build_trace(mode, reason, retrieval, selection, reranker, trace)
    fragments = selection.context.fragments if selection else ()
    headlines = selection.context.headlines if selection else ()
    return Answer(question, text, mode, reason, citations, fragments, headlines, record, language=language,
                  cause=cause, told=told_of(retrieval, selection, citations))


def told_of(retrieval: Retrieval | None, selection: Selection | None, citations: Sequence[Citation]) -> str | None:
    """The passage an answer told (`Answer.told`): the one its question went on (back) to, else the
    chunk its first citation points into."""
    if retrieval is not None and retrieval.reached is not None:
        return retrieval.reached
    if selection is None or not citations:
        return None
    first = citations[0]
    context = selection.context
    return next((c.id for c in [*context.fragments, *(h.chunk for h in context.headlines)]
                 if (c.label, c.path) == (first.label, first.path)
                 and c.start_line <= first.start_line and first.end_line <= c.end_line), None)


def passages_text(reason: str, excerpts: Sequence[Excerpt], words: Texts | None = None) -> str:
    """The answer without the LLM: the best passages, plainly marked as passages (in `words`' language)."""
    intro = (words or texts()).could_not_answer.format(reason=reason)
    return "\n\n".join([intro, *passage_blocks(excerpts)])


def passage_blocks(excerpts: Sequence[Excerpt]) -> list[str]:
    """Each passage shown: its label and the lines of its sentences, then the sentences quoted."""
    return [
        f"[{e.chunk.label}] ({e.chunk.path}, lines {e.start_line}–{e.end_line})\n> {e.text}"
        for e in excerpts[:PASSAGES_SHOWN]
    ]


def abstains(answer: Answer) -> bool:
    """The answer says the notes hold nothing on the question: nothing matched, or the model said so
    (in the question's language or in English)."""
    abstention = texts(answer.language).abstention
    return answer.mode == "not_found" or (answer.mode == "llm" and bool(abstention.search(answer.text)))

"""`oracle eval BANK --answers`: the answer layer, every question asked end to end through `Oracle.ask`.

Definitions (each measured over the questions named, and None when there are none):
- modes: the share of answers written by the model (`llm`), shown as passages (`passages`: the
  model failed or is away), or saying the notes hold nothing (`not_found`). All questions.
- citation validity: labels the model cited that the context held, over all labels it cited
  (distinct per answer; `verify` removes the others from what is shown). `llm` answers.
- citation support: a claim is a sentence of an answer (four words or more) with its citations;
  it is supported when at least half of its key terms (`excerpts.content_terms`: stemmed content
  words, each once; labels and brackets left out) are in the text of the fragments it cites (the
  headline, for a label given as a headline only). Supported claims over cited claims; `llm` answers.
- gold citation recall: gold entries of a question matched by a cited label or note path, over its
  gold entries, averaged. Answerable questions, every mode (passages cite the passages shown).
- abstention: an answer abstains when its mode is `not_found`, or when a model's answer says the
  notes do not say (`[texts] abstains` of its language). Correct abstention: share of unanswerable questions that abstain;
  false abstention: share of answerable questions that do.
- uncited sentences: sentences of four words or more citing nothing (`verify`). `llm` answers.
- tokens per request: `trace["tokens"]["total"]` and `trace["tokens"]["prompt_eval_count"]` (what
  Ollama counted), when the trace has them.
- latency: p50/p95 (nearest rank) of `trace["timings_ms"]["rerank"]`, `["answer"]` and
  `["first_words"]` (from the question to the answer's first text), where present.
- late: the share of questions answered with the passages because the model did not start answering
  within ORACLE_FIRST_WORDS_SECONDS (the one deadline `oracle ask` and the bot keep). All questions.
- answer shown: questions with a gold `answer` whose key terms are all in the reply's text.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .answer.citations import cited_sentences
from .answer.excerpts import content_terms
from .answer.prompt import Turn
from .answer.results import MISSED_DEADLINE, Answer, abstains
from .eval import answer_terms_shown
from .eval_bank import Question, matches_place
from .types import Clearance

if TYPE_CHECKING:
    from .oracle import Oracle

MODES = ("llm", "passages", "not_found")
SUPPORT_SHARE = 0.5
_BRACKETS = re.compile(r"\[[^\[\]\n]*\]")


@dataclass(frozen=True)
class AnswerRecord:
    """What one answer did, with what the metrics need and nothing else."""

    id: str
    kind: str
    answerable: bool
    mode: str
    abstained: bool
    cited: int  # distinct labels cited that the context held (llm answers)
    unknown: int  # distinct labels cited that it did not
    claims: int  # sentences with a citation
    supported: int
    uncited: int  # sentences without one
    gold_recall: float | None
    answer_terms: float | None  # share of the gold answer's key terms in the reply
    tokens_total: int | None
    prompt_eval_count: int | None
    rerank_ms: float | None
    answer_ms: float | None
    first_words_ms: float | None = None
    late: bool = False  # passages: the first words did not come within the deadline

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}



def supported(claim: str, sources: Iterable[str], share: float = SUPPORT_SHARE) -> bool | None:
    """Whether the sources hold at least `share` of the claim's key terms (None: it has none)."""
    wanted = set(content_terms(_BRACKETS.sub(" ", claim)))
    if not wanted:
        return None
    held = set(content_terms(" ".join(sources)))
    return len(wanted & held) >= share * len(wanted)


def source_texts(answer: Answer) -> dict[str, str]:
    """The text a label stands for in the answer's context: the fragment, else its headline."""
    texts = {s.chunk.label: s.text for s in answer.headlines}
    texts.update({c.label: c.text for c in answer.fragments})
    return texts


def record(question: Question, answer: Answer) -> AnswerRecord:
    trace = answer.trace
    llm = answer.mode == "llm"
    claims = supported_claims = uncited = 0
    if llm:
        sources = source_texts(answer)
        for sentence, labels in cited_sentences(answer.text, [c.label for c in answer.citations]):
            if not labels:
                uncited += 1
                continue
            verdict = supported(sentence, [sources.get(label, "") for label in labels])
            if verdict is not None:
                claims += 1
                supported_claims += verdict
    gold_recall = None
    if question.relevant:
        found = sum(
            1 for entry in question.relevant if any(matches_place(entry, c.label, c.path, c.sessions) for c in answer.citations)
        )
        gold_recall = found / len(question.relevant)
    tokens = trace.tokens
    timings = trace.timings_ms or {}
    return AnswerRecord(
        id=question.id,
        kind=question.kind,
        answerable=bool(question.relevant),
        mode=answer.mode,
        abstained=abstains(answer),
        cited=len({c.label for c in answer.citations}) if llm else 0,
        unknown=len(set(trace.citations.unknown if trace.citations else ())) if llm else 0,
        claims=claims,
        supported=supported_claims,
        uncited=uncited,
        gold_recall=gold_recall,
        answer_terms=answer_terms_shown(question.answer, answer.text) if question.answer else None,
        tokens_total=tokens.total if tokens else None,
        prompt_eval_count=tokens.prompt_eval_count if tokens else None,
        rerank_ms=timings.get("rerank"),
        answer_ms=timings.get("answer"),
        first_words_ms=timings.get("first_words"),
        late=answer.cause in MISSED_DEADLINE,
    )


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest rank: the smallest value with at least p% of the values at or below it."""
    if not values:
        return None
    return _nearest_rank(sorted(values), p)


def _nearest_rank(ordered: Sequence[float], p: float) -> float:
    """`percentile` of values already sorted, at least one."""
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


def _spread(values: Iterable[float | None], digits: int = 1) -> dict[str, float] | None:
    present = [v for v in values if v is not None]
    if not present:
        return None
    ordered = sorted(present)
    return {
        "n": len(present),
        "mean": round(sum(present) / len(present), digits),
        "p50": round(_nearest_rank(ordered, 50), digits),
        "p95": round(_nearest_rank(ordered, 95), digits),
    }


def summarise_answers(records: Sequence[AnswerRecord]) -> dict[str, Any]:
    answerable = [r for r in records if r.answerable]
    unanswerable = [r for r in records if not r.answerable]
    llm = [r for r in records if r.mode == "llm"]
    modes = Counter(r.mode for r in records)
    valid, unknown = sum(r.cited for r in llm), sum(r.unknown for r in llm)
    claims, backed = sum(r.claims for r in llm), sum(r.supported for r in llm)
    golds = [r.gold_recall for r in answerable if r.gold_recall is not None]
    shown = [r.answer_terms for r in records if r.answer_terms is not None]
    return {
        "questions": len(records),
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "modes": {mode: _share(modes[mode], len(records)) for mode in MODES},
        "citation_validity": _share(valid, valid + unknown),
        "citations": {"valid": valid, "unknown": unknown},
        "citation_support": _share(backed, claims),
        "claims": {"cited": claims, "supported": backed},
        "gold_citation_recall": _share(sum(golds), len(golds)),
        "correct_abstention": _share(sum(r.abstained for r in unanswerable), len(unanswerable)),
        "false_abstention": _share(sum(r.abstained for r in answerable), len(answerable)),
        "uncited_sentences": {
            "total": sum(r.uncited for r in llm),
            "per_answer": _share(sum(r.uncited for r in llm), len(llm)),
        },
        "tokens_per_request": {
            "total": _spread((r.tokens_total for r in records), 0),
            "prompt_eval_count": _spread((r.prompt_eval_count for r in records), 0),
        },
        "latency_ms": {
            "rerank": _spread(r.rerank_ms for r in records),
            "answer": _spread(r.answer_ms for r in records),
            "first_words": _spread(r.first_words_ms for r in records),
        },
        "late": _share(sum(r.late for r in records), len(records)),
        "answers": len(shown),
        "answer_shown": _share(sum(s == 1.0 for s in shown), len(shown)),
        "answer_terms_shown": _share(sum(shown), len(shown)),
        "per_question": [r.to_json() for r in records],
    }


async def run_answers(oracle: Oracle, questions: Sequence[Question], *, clearance: Clearance) -> dict[str, Any]:
    """Ask every question as a player (or the game master) would, and measure the answers."""
    records = []
    for q in questions:
        answer = await oracle.ask(q.question, history=[Turn("user", h) for h in q.history], clearance=clearance)
        records.append(record(q, answer))
    result = summarise_answers(records)
    result["model"] = oracle.settings.model
    return result

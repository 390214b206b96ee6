"""`oracle eval`: retrieval quality per stage, from a question bank (format: shared eval README).

Each stage's list is scored against the bank's gold as `eval_bank` says (units, matching, the
measures). Questions with no gold entries are unanswerable: they are counted by kind but kept out
of the recall averages.

A question may carry a short gold `answer`. "Answer shown" is then the share of those questions
whose answer's key terms are all in what a player reads when the Oracle answers with passages
(`answer_terms_shown`), next to the same share for the first 60 words of each passage, the
passages' former text, kept here as the baseline only.

`per_question` lists each question with its fused order (`fused_order`): the distinct (label, path)
places of the whole fused list (at most ORACLE_FUSED_POOL chunks, 40 by default; fewer when the paths
found fewer), in order of their best chunk, each with the session numbers it records (so a bank can
also be scored by note path or by session number), its fused score and its rank in each path that
found it.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .answer.excerpts import content_terms
from .answer.results import PASSAGES_SHOWN, passage_blocks
from .eval_bank import Question, entry_ranks, hit, mrr, ndcg, recall
from .retrieve import PATHS, path_depth
from .types import Chunk, Clearance

if TYPE_CHECKING:
    from .answer.selection import Selection
    from .oracle import Oracle
    from .retrieve.retrieval import Hit, Retrieval


def exact_dense(
    query: np.ndarray, window_chunks: Sequence[str], matrix: np.ndarray, depth: int
) -> list[str]:
    """Chunk ids by exact cosine over every window (vectors are normalised): the ANN's reference."""
    if matrix.size == 0:
        return []
    sims = matrix @ query
    out: list[str] = []
    for i in np.argsort(-sims):
        cid = window_chunks[int(i)]
        if cid not in out:
            out.append(cid)
            if len(out) == depth:
                break
    return out


def answer_terms_shown(answer: str, shown: str) -> float | None:
    """The share of the gold answer's key terms found in the text shown (None: no key terms).

    Key terms are `excerpts.content_terms`: words case- and accent-folded, stop words and one-letter
    words out, Porter-stemmed, counted once each; found when the shown text holds the same stem
    anywhere. An answer counts as shown when all its key terms are (`answer_shown`)."""
    wanted = set(content_terms(answer))
    if not wanted:
        return None
    return len(wanted & set(content_terms(shown))) / len(wanted)


def answer_shown(answer: str, shown: str) -> bool:
    return answer_terms_shown(answer, shown) == 1.0


def first_words_blocks(chunks: Sequence[Chunk], words: int = 60) -> list[str]:
    """What passages showed before excerpts: each chunk's first `words` words, cited by its whole
    line range. Kept only as the baseline `oracle eval` measures excerpts against."""
    blocks = []
    for c in chunks[:PASSAGES_SHOWN]:
        split = c.text.split()
        quote = " ".join(split[:words]) + (" …" if len(split) > words else "")
        blocks.append(f"[{c.label}] ({c.path}, lines {c.start_line}–{c.end_line})\n> {quote}")
    return blocks


@dataclass
class QuestionResult:
    question: Question
    union: float  # the three paths and the linked notes: everything retrieval puts before a reranker
    paths_union: float  # the three paths alone
    paths: dict[str, float]
    paths_at_k: dict[str, float]
    fused_at_k: float
    pool: float  # recall in the pool (fused, then linked): all a reranker can bring into the top k
    hit_pool: float
    final_at_k: float
    context: float | None
    final_at_5: float
    final_at_10: float
    hit_at_5: float
    hit_at_10: float
    mrr: float
    ndcg10: float
    all_gold_at_10: bool
    ann_recall: float | None
    # The same measures of the fused stage (the pool in fused order, before any reranker): with
    # ORACLE_FUSION=learned, the learned order, beside what the reranker made of it.
    fused: dict[str, float] = field(default_factory=dict)
    lost: dict[str, str] = field(default_factory=dict)  # gold entry -> stage where it was lost
    # Share of the gold answer's key terms in what passages show: excerpts, and the first 60 words.
    answer_terms: float | None = None
    answer_terms_first_words: float | None = None
    fused_order: list[dict[str, Any]] = field(default_factory=list)  # see `fused_order`


def fused_order(fused: Sequence[Hit], paths: Mapping[str, Sequence[Hit]]) -> list[dict[str, Any]]:
    """Distinct places of the fused list, `{"label", "path", "sessions", "score", "paths"}`, in order of
    their best chunk: its fused score, and for each path that found it the place's rank in that path's
    own list (its chunks counted once, at the best): what each path contributed to where it stands."""
    by_path: dict[tuple[str, str], dict[str, int]] = {}
    for name, hits in paths.items():
        places = dict.fromkeys((h.chunk.label, h.chunk.path) for h in hits)
        for rank, place in enumerate(places, 1):
            by_path.setdefault(place, {})[name] = rank
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for h in fused:
        c = h.chunk
        seen.setdefault((c.label, c.path), {"label": c.label, "path": c.path, "sessions": list(c.sessions),
                                            "score": round(h.score, 6), "paths": by_path.get((c.label, c.path), {})})
    return list(seen.values())


def per_question(r: QuestionResult) -> dict[str, Any]:
    q = r.question
    return {"id": q.id, "question": q.question, "kind": q.kind, "relevant": list(q.relevant), "fused": r.fused_order}


def lost_at(entry: str, stages: Sequence[tuple[str, Sequence[Chunk], int | None]]) -> str | None:
    """The first stage whose list no longer holds the entry: where the evidence was lost."""
    for name, chunks, k in stages:
        rank = entry_ranks([entry], chunks)[entry]
        if rank is None or (k is not None and rank > k):
            return name
    return None


def _all(share: float | None) -> float | None:
    return None if share is None else float(share == 1.0)


def summarise(results: Sequence[QuestionResult]) -> dict[str, Any]:
    answerable = [r for r in results if r.question.relevant]
    by_kind: dict[str, list[QuestionResult]] = defaultdict(list)
    for r in answerable:
        by_kind[r.question.kind or "-"].append(r)
    unanswerable = [r for r in results if not r.question.relevant]
    return {
        "questions": len(results),
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "overall": _measures(answerable),
        "by_kind": {kind: _measures(rs) for kind, rs in sorted(by_kind.items())},
        "misses": _misses(answerable),
        "per_question": [per_question(r) for r in results],
    }


def _mean(values: Iterable[float | None]) -> float | None:
    """The mean of the values present, to 4 places (None when none is)."""
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 4) if present else None


def _measures(rs: Sequence[QuestionResult]) -> dict[str, float | None]:
    """Every measure's mean over these questions, with their count and how many have a gold answer."""
    arcs = [r for r in rs if r.question.kind == "arc"]
    out = {
        "questions": len(rs),
        "union_recall": _mean(r.union for r in rs),
        "paths_union_recall": _mean(r.paths_union for r in rs),
        **{f"{name}_recall": _mean(r.paths.get(name) for r in rs) for name in (*PATHS, "linked")},
        **{f"{name}_recall_at_k": _mean(r.paths_at_k.get(name) for r in rs) for name in PATHS},
        "fused_recall_at_k": _mean(r.fused_at_k for r in rs),
        "pool_recall": _mean(r.pool for r in rs),
        "hit_in_pool": _mean(r.hit_pool for r in rs),
        "final_recall_at_k": _mean(r.final_at_k for r in rs),
        "recall_at_5": _mean(r.final_at_5 for r in rs),
        "recall_at_10": _mean(r.final_at_10 for r in rs),
        "hit_at_5": _mean(r.hit_at_5 for r in rs),
        "hit_at_10": _mean(r.hit_at_10 for r in rs),
        "context_recall": _mean(r.context for r in rs),
        "mrr": _mean(r.mrr for r in rs),
        "ndcg_at_10": _mean(r.ndcg10 for r in rs),
        "all_gold_at_10": _mean(float(r.all_gold_at_10) for r in rs),
        "arc_coverage_union": _mean(r.union for r in arcs),
        "arc_coverage_at_k": _mean(r.final_at_k for r in arcs),
        "arc_coverage_context": _mean(r.context for r in arcs),
        "ann_recall": _mean(r.ann_recall for r in rs),
        **{f"fused_{name}": _mean(r.fused.get(name) for r in rs) for name in FUSED_MEASURES},
        "answers": sum(1 for r in rs if r.answer_terms is not None),
        "answer_shown": _mean(_all(r.answer_terms) for r in rs),
        "answer_terms_shown": _mean(r.answer_terms for r in rs),
        "answer_shown_first_words": _mean(_all(r.answer_terms_first_words) for r in rs),
        "answer_terms_shown_first_words": _mean(r.answer_terms_first_words for r in rs),
    }
    return out


def _misses(answerable: Sequence[QuestionResult]) -> list[dict[str, Any]]:
    """The questions whose gold was lost somewhere, each with the stage it was lost at."""
    return [
        {
            "id": r.question.id,
            "question": r.question.question,
            "kind": r.question.kind,
            "lost": r.lost,
        }
        for r in answerable
        if r.lost
    ]


FUSED_MEASURES = ("hit_at_5", "hit_at_10", "recall_at_k", "mrr", "ndcg_at_10", "all_gold_at_10")


def stage_measures(relevant: Sequence[str], chunks: Sequence[Chunk], k: int) -> dict[str, float]:
    """The final list's headline measures, for another stage's list."""
    return {
        "hit_at_5": hit(relevant, chunks, 5),
        "hit_at_10": hit(relevant, chunks, 10),
        "recall_at_k": recall(relevant, chunks, k),
        "mrr": mrr(relevant, chunks),
        "ndcg_at_10": ndcg(relevant, chunks),
        "all_gold_at_10": float(bool(relevant) and recall(relevant, chunks, 10) == 1.0),
    }


async def run_eval(oracle: Oracle, questions: Sequence[Question], *, clearance: Clearance, k: int) -> dict[str, Any]:
    """Search every question and measure each stage; see the module docstring."""
    index = oracle.index
    vectors = await index.vectors()
    embedder = await index.embedder()
    _, window_chunks, matrix = await vectors.vectors(visibility=clearance.windows)
    depth = path_depth(k)
    results = []
    reranks = 0
    for q in questions:
        retrieval = await oracle.search(q.question, history=q.history, clearance=clearance, k=k)
        selection = await oracle.select(retrieval, k)
        reranks += selection.rerank.used
        answer_terms, first_words = await _answer_terms(oracle, q, retrieval, selection)
        query_vector = await embedder.encode_query(retrieval.search_query)
        exact = exact_dense(query_vector, window_chunks, matrix, depth)
        results.append(_question_result(q, retrieval, selection, k=k, exact=exact, answer_terms=answer_terms,
                                        first_words=first_words))
    summary = summarise(results)
    summary["reranked"] = reranks  # questions the reranker reordered (0: it was off for all)
    summary["fusion"] = _fusion(oracle)
    return summary


async def _answer_terms(
    oracle: Oracle, q: Question, retrieval: Retrieval, selection: Selection
) -> tuple[float | None, float | None]:
    """The share of the gold answer's key terms shown as excerpts, and as first words (both None: no answer)."""
    if not q.answer:
        return None, None
    shown = selection.context.fragments[:PASSAGES_SHOWN]
    excerpts = await oracle.excerpts(retrieval, shown)
    answer_terms = answer_terms_shown(q.answer, "\n\n".join(passage_blocks(excerpts)))
    first_words = answer_terms_shown(q.answer, "\n\n".join(first_words_blocks(shown)))
    return answer_terms, first_words


def _question_result(
    q: Question,
    retrieval: Retrieval,
    selection: Selection,
    *,
    k: int,
    exact: list[str],
    answer_terms: float | None,
    first_words: float | None,
) -> QuestionResult:
    """Score each stage's list of one question against its gold."""
    path_chunks = {name: [h.chunk for h in hits] for name, hits in retrieval.paths.items()}
    paths_union = list({c.id: c for chunks in path_chunks.values() for c in chunks}.values())
    linked = [h.chunk for h in retrieval.linked]
    union = paths_union + linked  # linked notes are never in the fused pool, nor in its labels
    fused = [h.chunk for h in retrieval.fused]
    pool = [h.chunk for h in retrieval.pool]
    final = selection.final
    context = [*selection.context.fragments, *(h.chunk for h in selection.context.headlines)]
    approx = {c.id for c in path_chunks["semantic"]}
    relevant = q.relevant
    stages = [("retrieval", union, None), ("fusion", fused, k), ("rerank", final, k), ("context", context, None)]
    return QuestionResult(
        question=q,
        union=recall(relevant, union),
        paths_union=recall(relevant, paths_union),
        paths={name: recall(relevant, chunks) for name, chunks in {**path_chunks, "linked": linked}.items()},
        paths_at_k={name: recall(relevant, chunks, k) for name, chunks in path_chunks.items()},
        fused_at_k=recall(relevant, fused, k),
        pool=recall(relevant, pool),
        hit_pool=hit(relevant, pool, len(pool)),
        final_at_k=recall(relevant, final, k),
        context=recall(relevant, context),
        final_at_5=recall(relevant, final, 5),
        final_at_10=recall(relevant, final, 10),
        hit_at_5=hit(relevant, final, 5),
        hit_at_10=hit(relevant, final, 10),
        mrr=mrr(relevant, final),
        ndcg10=ndcg(relevant, final),
        all_gold_at_10=bool(relevant) and recall(relevant, final, 10) == 1.0,
        ann_recall=len(approx & set(exact)) / len(exact) if exact else None,
        fused=stage_measures(relevant, pool, k),
        lost={e: stage for e in relevant if (stage := lost_at(e, stages))},
        answer_terms=answer_terms,
        answer_terms_first_words=first_words,
        fused_order=fused_order(retrieval.fused, retrieval.paths),
    )


def _fusion(oracle: Oracle) -> str:
    """Which fusion ordered the pool: "learned" only when its model was read."""
    fusion = oracle.settings.fusion
    return "dbsf, no learned model" if fusion == "learned" and oracle.pipeline.ranker is None else fusion

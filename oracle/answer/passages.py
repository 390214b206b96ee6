"""The answer without the model's text: the best passages, each by the sentences that match the
question, cited by the lines of those sentences. What a player reads names no host, path or error:
only that there is no answer, or that the model is still loading."""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..index.seam import Embeddings
from ..offload import question_step
from ..retrieve.pipeline import elapsed_ms
from ..retrieve.retrieval import Retrieval
from ..texts import Texts, texts
from ..types import Chunk, Clearance
from .citations import Citation
from .excerpts import Excerpt, choose_excerpts, going_on, query_terms
from .results import PASSAGES_SHOWN, Answer, Cause, compose, passage_blocks, passages_text
from .selection import Selection
from .trace import AnswerParts

# The first reply when the deadline for the first words passed while the model was still loading.
LOADING = texts().loading
PLAYER_LOADING = texts().model_loading  # a recap's passages say it in their own sentence


@dataclass
class Fallbacks:
    """The answers this process gave as passages because the model did not answer (too slow, down,
    cut): how many, and the last one's question, reason and time, for a game master's status."""

    count: int = 0
    last: tuple[str, str, float] | None = None  # question, reason, time.time()

    def add(self, question: str, reason: str) -> None:
        self.count += 1
        self.last = (question, reason, time.time())


async def excerpts(embedder: Embeddings, retrieval: Retrieval, chunks: Sequence[Chunk]) -> list[Excerpt]:
    """The sentences of each chunk that best match the question (`excerpts.choose_excerpts`),
    matched against the query vector the semantic path already computed; off the event loop. For a
    question asking what came next (before), the passage told last shows the sentences after (before)
    those, or nothing when they were its end (start)."""
    language = retrieval.language
    terms = query_terms(retrieval.search_query, [e.name for e in retrieval.entities], language)
    model = embedder.in_thread  # `similarity` runs in the question's lane with `choose_excerpts`

    def similarity(texts: Sequence[str]) -> list[float]:
        query = retrieval.query_vector
        if query is None:
            query = model.encode_query(retrieval.search_query)
        return [float(model.encode_query(text) @ query) for text in texts]

    def choose() -> list[Excerpt]:
        shown = choose_excerpts(chunks, terms, similarity, language=language)
        if retrieval.told is None:
            return shown
        # "And then what?": the passage told last goes on from what the question before showed of it
        # ("and before that?": back from it).
        back = retrieval.went == "back"
        went_on = (going_on(e, back=back) if e.chunk.id == retrieval.told else e for e in shown)
        return [e for e in went_on if e is not None]

    return await question_step(choose)


async def passages_answer(
    embedder: Embeddings,
    question: str,
    reason: str,
    retrieval: Retrieval,
    selection: Selection,
    extra: AnswerParts,
    *,
    clearance: Clearance,
    reranker: str,
    cause: Cause = "unusable",
    words: Texts | None = None,
) -> Answer:
    """The best passages as the answer, with `reason` for a game master and the `cause`
    (`writer.Cause`) for a player, written in `words`' language."""
    words = words or texts()
    t = time.perf_counter()
    shown = await excerpts(embedder, retrieval, selection.context.fragments[:PASSAGES_SHOWN])
    timings = retrieval.timings_ms
    timings["excerpts"] = elapsed_ms(t)
    if "total" in timings:
        timings["total"] += timings["excerpts"]
    citations = tuple(Citation(e.chunk.label, e.chunk.path, e.start_line, e.end_line, e.chunk.sessions) for e in shown)
    if cause == "loading":
        intro = f"{words.loading} ({reason})." if clearance.gm else f"{words.loading}."
        text = "\n\n".join([intro, *passage_blocks(shown)])
    else:
        text = passages_text(reason if clearance.gm else words.unwritten(cause), shown, words)
    return compose(
        question, text, "passages", reason, reranker=reranker, retrieval=retrieval, selection=selection,
        citations=citations, language=words.code, cause=cause,
        trace={**extra, "excerpts": tuple(shown), "player_reason": words.unwritten(cause)},
    )

"""Rerank the fused pool. It never raises and never returns fewer than asked.

`llm` (the default): one call to the same Ollama model that writes the answer (Ollama keeps the
last-used model resident; a second model would cost an unload and reload per question). The model
sees each candidate's cached annotation — never its raw text — and returns the best k as JSON
through a `format` schema. It turns itself off, returning the fused order untouched, when any
candidate lacks an annotation, when Ollama does not answer in time, or when the reply does not parse;
unknown candidates are dropped and missing places filled from the fused order. "In time" is the
rerank's share of the question's deadline (`deadline.Deadline`): the wait for a model slot and for a model
still loading count against it, and a rerank that would end past it is skipped, not waited for.

`cross-encoder`: a sentence-transformers CrossEncoder scoring the question against each candidate's
annotation (or text, by setting). `none`: the fused order.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, Field

from ..llm import LLM
from ..llm_errors import LLMError
from ..offload import off_loop
from ..settings import setting_name
from ..tokens import message_tokens
from ..types import Chunk

log = logging.getLogger(__name__)

# The reply is `{"best": [up to k numbers]}`: about 4 tokens a number; 256 covers k = 40 with room.
REPLY_TOKENS = 256


@dataclass(frozen=True)
class Candidate:
    chunk: Chunk
    annotation: str | None


@dataclass(frozen=True)
class Reranked:
    order: list[str]  # chunk ids, best first: the k chosen, then the rest of the pool in fused order
    used: bool  # False: the fused order was kept
    reason: str  # why it turned off, or what it did
    chosen: list[str]  # what the reranker itself picked (before filling), for the trace
    called: bool = False  # whether a chat call was made


class RerankReply(BaseModel):
    best: list[int] = Field(description="candidate numbers, most useful first")


def rerank_messages(question: str, candidates: Sequence[Candidate], k: int) -> list[dict[str, str]]:
    lines = [f"{i}. ({c.chunk.label}) {c.annotation}" for i, c in enumerate(candidates, 1)]
    return [
        {
            "role": "system",
            "content": (
                "You choose which passages of a game master's campaign notes can answer a player's "
                "question. Each passage is described in one or two sentences. Reply in JSON with the "
                "numbers of the most useful passages, most useful first."
            ),
        },
        {
            "role": "user",
            "content": (
                f"Question: {question}\n\nPassages:\n" + "\n".join(lines) + f"\n\nChoose up to {k}."
            ),
        },
    ]


def fill(chosen: Sequence[str], fused: Sequence[str]) -> list[str]:
    """The chosen ids first, then every other fused id in fused order: nothing is ever lost."""
    seen = set(chosen)
    return list(chosen) + [cid for cid in fused if cid not in seen]


def _kept(reason: str, fused: Sequence[str]) -> Reranked:
    return Reranked(list(fused), False, reason, [])


def fit_candidates(question: str, candidates: Sequence[Candidate], k: int, budget: int) -> list[Candidate]:
    """The best-fused candidates whose rerank prompt fits `budget` tokens: the lowest go first."""
    shown = list(candidates)
    while len(shown) > 1 and message_tokens(rerank_messages(question, shown, k)) > budget:
        shown.pop()
    return shown


def _unrankable(candidates: Sequence[Candidate]) -> Reranked | None:
    """The fused order kept without a call, when the pool cannot be reranked on annotations."""
    fused = [c.chunk.id for c in candidates]
    if len(candidates) <= 1:
        return _kept("nothing to rerank", fused)
    missing = sum(1 for c in candidates if not c.annotation)
    if missing:
        why = f"off: {missing} of {len(candidates)} candidates have no annotation yet (run oracle ingest with Ollama)"
        return _kept(why, fused)
    return None


SHARE = f"the rerank's share of {setting_name('first_words')}"


def _share(seconds: float) -> str:
    return f"{max(seconds, 0.0):.1f} s, {SHARE}"


async def rerank_llm(llm: LLM, question: str, candidates: Sequence[Candidate], k: int, timeout: float) -> Reranked:
    """The model's choice, within `timeout` seconds, the model's load included."""
    fused = [c.chunk.id for c in candidates]
    if (kept := _unrankable(candidates)) is not None:
        return kept
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    waited = ""
    if llm.loading:
        # The model is loading (`LLM.load`, a request of its own): the rerank is asked once it is
        # loaded if that leaves time, rather than queued behind the load and abandoned.
        if not await llm.wait_loaded(timeout):
            return _kept(f"off: the model was still loading after {_share(timeout)}", fused)
        if (failed := llm.load_failed) is not None:
            return _kept(f"off: {failed}", fused)
        waited = ", asked once the model had loaded"
    window = await llm.window(max(end - loop.time(), 0.001))
    shown = fit_candidates(question, candidates, k, window.num_ctx - REPLY_TOKENS)
    messages = rerank_messages(question, shown, k)
    left = end - loop.time()
    if left <= 0:
        return _kept(f"off: no time was left of {SHARE}{waited}", fused)
    try:
        reply = await llm.chat_model(messages, RerankReply, timeout=left, num_predict=REPLY_TOKENS)
    except LLMError as exc:
        late = f" (within {_share(left)})" if exc.timed_out else ""
        return Reranked(list(fused), False, f"off: {exc}{late}{waited}", [], called=True)
    chosen: list[str] = []
    unknown = 0
    for number in reply.best:  # numbers of the candidates shown, which may be fewer than the pool
        if 1 <= number <= len(shown):
            cid = shown[number - 1].chunk.id
            if cid not in chosen:
                chosen.append(cid)
        else:
            unknown += 1
    chosen = chosen[:k]
    if not chosen:
        return Reranked(list(fused), False, f"off: the reply named no known candidate ({unknown} unknown)", [], True)
    note = f"chose {len(chosen)}" + (f", dropped {unknown} unknown" if unknown else "") + waited
    if len(shown) < len(fused):
        note += f", {len(fused) - len(shown)} lowest candidates left out to fit the context window"
    if len(chosen) < min(k, len(fused)):
        note += f", filled {min(k, len(fused)) - len(chosen)} from the fused order"
    return Reranked(fill(chosen, fused), True, note, chosen, called=True)


class CrossEncoderReranker:
    """Loaded once; scoring runs off the event loop."""

    def __init__(self, model: str, use_text: bool = False) -> None:
        self.model_ref = model
        self.use_text = use_text
        self._model: Any = None
        self._error: str | None = None
        self._lock = asyncio.Lock()

    async def _load(self) -> Any:
        async with self._lock:
            if self._model is None and self._error is None:
                try:
                    from sentence_transformers import CrossEncoder

                    self._model = await off_loop(CrossEncoder, self.model_ref, device="cpu")
                except Exception as exc:  # a missing or broken model turns reranking off, never the answer
                    self._error = f"off: cannot load the cross-encoder {self.model_ref!r}: {type(exc).__name__}: {exc}"
                    log.warning(self._error)
            return self._model

    async def rerank(self, question: str, candidates: Sequence[Candidate], k: int, *,
                     within: float | None = None) -> Reranked:
        fused = [c.chunk.id for c in candidates]
        model = await self._load()
        if model is None:
            return _kept(self._error or "off", fused)
        if not candidates:
            return _kept("nothing to rerank", fused)
        if not self.use_text and any(not c.annotation for c in candidates):
            return _kept("off: some candidates have no annotation yet", fused)
        pairs = [(question, c.chunk.text if self.use_text else c.annotation or "") for c in candidates]
        scores = await off_loop(model.predict, pairs)
        ranked = sorted(range(len(candidates)), key=lambda i: (-float(scores[i]), i))
        chosen = [fused[i] for i in ranked[:k]]
        return Reranked(fill(chosen, fused), True, f"cross-encoder chose {len(chosen)}", chosen)


class Reranker(Protocol):
    """Orders the pool: the best `k` first, then the rest in the fused order. Never raises.
    `within`: seconds it may take (the rerank's share of the question's deadline)."""

    async def rerank(self, question: str, candidates: Sequence[Candidate], k: int, *,
                     within: float | None = None) -> Reranked: ...


class LLMReranker:
    """The answer model on the candidates' annotations, one question at a time per LLM slot; the
    wait for a slot counts against its time (`timeout` when the caller gives none)."""

    def __init__(self, llm: LLM, timeout: float, slots: asyncio.Semaphore) -> None:
        self.llm, self.timeout, self.slots = llm, timeout, slots

    async def rerank(self, question: str, candidates: Sequence[Candidate], k: int, *,
                     within: float | None = None) -> Reranked:
        if (kept := _unrankable(candidates)) is not None:
            return kept
        timeout = self.timeout if within is None else within
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        try:
            async with asyncio.timeout(timeout):
                await self.slots.acquire()
        except TimeoutError:
            return _kept(f"off: no model slot was free ({setting_name('llm_concurrency')}) within {_share(timeout)}",
                         [c.chunk.id for c in candidates])
        try:
            return await rerank_llm(self.llm, question, candidates, k, end - loop.time())
        finally:
            self.slots.release()


class NoReranker:
    async def rerank(self, question: str, candidates: Sequence[Candidate], k: int, *,
                     within: float | None = None) -> Reranked:
        return _kept(f"off: {setting_name('reranker')}=none", [c.chunk.id for c in candidates])


def make_reranker(choice: str, *, llm: LLM, timeout: float, slots: asyncio.Semaphore, cross_encoder: str,
                  cross_encoder_text: bool) -> Reranker:
    """The reranker `ORACLE_RERANKER` names, chosen once."""
    if choice == "llm":
        return LLMReranker(llm, timeout, slots)
    if choice == "cross-encoder":
        return CrossEncoderReranker(cross_encoder, use_text=cross_encoder_text)
    return NoReranker()

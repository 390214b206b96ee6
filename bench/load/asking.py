"""The questions a load run asks, and how long each took: through `Oracle.ask` (an instant fake model),
or answered without a model (retrieval and the passages a reply shows)."""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import NamedTuple

from bench.common import CRD3_QUESTIONS, read_questions
from bench.load.measures import summary


def load_questions(path: Path | None, notes_src: Path) -> tuple[list[str], str]:
    """The questions to ask and where they came from: `path`, else the notes' own bank, else the CRD3 list."""
    candidates = [path] if path else [notes_src / "questions.jsonl", CRD3_QUESTIONS]
    for p in candidates:
        if p is not None and p.is_file():
            out = read_questions(p)
            if out:
                return out, str(p)
    raise SystemExit("no questions found (pass --questions FILE)")


class Asked(NamedTuple):
    """One answer's record. Kept as a plain tuple of plain values (`Asker.records`), which the
    collector stops tracking once it has seen it: kept as objects, thousands of them were a fifth of
    the references a full collection walked while the second campaigns were built."""

    phase: str
    mode: str  # llm | passages | not_found | error
    ms: float
    timings: tuple[tuple[str, float], ...]  # (stage, ms)
    rerank: str = ""
    error: str = ""


class Asker:
    def __init__(self, questions: list[str]) -> None:
        self.questions = questions
        self.next = 0
        self.records: list[tuple] = []  # each an Asked's plain tuple (see `Asked`)

    def pick(self) -> str:
        q = self.questions[self.next % len(self.questions)]
        self.next += 1
        return q

    async def one(self, oracle, group: str) -> Asked:
        q = self.pick()
        t = time.perf_counter()
        try:
            answer = await oracle.ask(q)
            rec = Asked(group, answer.mode, (time.perf_counter() - t) * 1000, tuple((answer.trace.timings_ms or {}).items()),
                        (answer.trace.rerank or {}).get("reason", ""))
        except Exception as exc:  # ask() must never raise: count it
            rec = Asked(group, "error", (time.perf_counter() - t) * 1000, (), error=f"{type(exc).__name__}: {exc}"[:300])
        self.records.append(tuple(rec))
        return rec

    async def wave(self, oracle, n: int, group: str) -> list[Asked]:
        return list(await asyncio.gather(*(self.one(oracle, group) for _ in range(n))))

    async def stream(self, oracle, n: int, gap: float, stop: asyncio.Event, group: str) -> int:
        """Waves of n questions at once, `gap` seconds apart, until `stop` is set; returns the waves."""
        waves = 0
        while not stop.is_set():
            await self.wave(oracle, n, group)
            waves += 1
            try:
                await asyncio.wait_for(stop.wait(), gap)
            except TimeoutError:
                pass
        return waves

    def group(self, name: str) -> list[Asked]:
        return [Asked._make(r) for r in self.records if r[0] == name]

    async def answer(self, oracle, group: str) -> Asked:
        """One question answered without a model (`answer_without_model`), timed."""
        q = self.pick()
        t = time.perf_counter()
        try:
            mode, timings = await answer_without_model(oracle, q)
            rec = Asked(group, mode, (time.perf_counter() - t) * 1000, tuple(timings.items()))
        except Exception as exc:  # a question must never fail: count it
            rec = Asked(group, "error", (time.perf_counter() - t) * 1000, (), error=f"{type(exc).__name__}: {exc}"[:300])
        self.records.append(tuple(rec))
        return rec

    async def answers(self, oracle, gap: float, stop: asyncio.Event, group: str) -> int:
        """Questions one at a time, `gap` seconds apart, until `stop` is set; returns how many."""
        n = 0
        while not stop.is_set():
            await self.answer(oracle, group)
            n += 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), gap)
        return n


async def answer_without_model(oracle, question: str) -> tuple[str, dict[str, float]]:
    """What a question costs before a model would write: retrieval (the three paths, fusion, the
    linked notes), the selection (reranker none) and the passages a reply without the model shows,
    all in one snapshot, as `Oracle.ask` reads them. (mode, stage timings in ms)."""
    from oracle.answer.results import PASSAGES_SHOWN

    async with oracle.index.snapshot() as store:
        retrieval = await oracle.search(question, store=store)
        if not retrieval.fused:
            return "not_found", dict(retrieval.timings_ms)
        selection = await oracle.select(retrieval, store=store)
        t = time.perf_counter()
        await oracle.excerpts(retrieval, selection.context.fragments[:PASSAGES_SHOWN])
        return "passages", dict(retrieval.timings_ms) | {"excerpts": (time.perf_counter() - t) * 1000}


def latency_json(recs: list[Asked]) -> dict:
    modes = Counter(r.mode for r in recs)
    stages: dict[str, list[float]] = defaultdict(list)
    for r in recs:
        for k, v in r.timings:
            stages[k].append(v)
    errors = Counter(r.error for r in recs if r.error)
    return {
        **summary([r.ms for r in recs]),
        "modes": dict(modes),
        "errors": dict(errors.most_common(5)),
        "rerank_reasons": dict(Counter(r.rerank for r in recs if r.rerank).most_common(3)),
        "stages_ms": {k: summary(v) for k, v in stages.items()},
    }

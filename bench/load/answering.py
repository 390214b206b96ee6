"""Phases 1 to 4: idle; a full ingest of the cold index while waves of questions arrive; answering
only (latency one at a time and `--concurrency` at once, reranker none and llm); and answers alone,
one at a time, the idle baseline of every ingest phase after them."""
from __future__ import annotations

import asyncio
import time

from bench.common import log
from bench.load.measures import rss_point
from bench.load.phases import ANSWERS_IDLE, PHASES
from bench.load.startup import Bench, run_ingest


async def answering_phases(b: Bench) -> None:
    args, probe, asker, n = b.args, b.probe, b.asker, b.args.concurrency

    # 1. Idle baseline.
    probe.set_phase(PHASES[0])
    await asyncio.sleep(args.idle)

    # 2. Full ingest of a cold index, waves of questions arriving all along (questions before the
    # first commit find nothing: they must still be answered).
    probe.set_phase(PHASES[1])
    stop = asyncio.Event()
    streaming = asyncio.create_task(asker.stream(b.oracle, n, args.gap, stop, PHASES[1]))
    report, seconds, error = await run_ingest(b.index, "full ingest")
    stop.set()
    waves = await streaming
    if error:
        log(f"full ingest failed: {error}; ingesting again without questions")
        report, _, retry_error = await run_ingest(b.index, "full ingest (retry)")
        if retry_error:
            raise SystemExit(f"the ingest failed twice: {retry_error}")
    b.full = (report, seconds, error, waves)
    b.rss["after_full_ingest"] = rss_point()

    # 3. Answering only: latency, 1 at a time and n at once, reranker none and llm.
    probe.set_phase(PHASES[2])
    for _ in range(min(5, len(asker.questions))):
        await asker.one(b.oracle, "warm-up")
        await asker.one(b.llm_oracle, "warm-up")
    for name, orc in (("none", b.oracle), ("llm", b.llm_oracle)):
        for _ in range(args.serial):
            await asker.one(orc, f"{name} x1")
        t = time.perf_counter()
        for _ in range(args.waves):
            await asker.wave(orc, n, f"{name} x{n}")
        b.latency_groups[name] = {
            "x1": f"{name} x1",
            f"x{n}": f"{name} x{n}",
            "throughput_qps": round(args.waves * n / (time.perf_counter() - t), 2),
        }
    b.rss["after_load_phase"] = rss_point()

    # 4. Answers alone: the idle baseline of every ingest after it.
    probe.set_phase(ANSWERS_IDLE)
    stop = asyncio.Event()
    answering = asyncio.create_task(asker.answers(b.oracle, args.answer_gap, stop, ANSWERS_IDLE))
    await asyncio.sleep(args.answer_idle)
    stop.set()
    await answering
    b.rss["end"] = rss_point()

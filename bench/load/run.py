"""One load run, its phases in order: the process starts as the bot does, then idle, the full ingest
with questions, answering only, answers alone, the session reingests and the second campaigns."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bench.common import copy_notes, start_fake_ollama
from bench.load.answering import answering_phases
from bench.load.asking import Asker, load_questions
from bench.load.measures import rss_point
from bench.load.phases import MACHINE_PAUSE
from bench.load.probe import LoopProbe
from bench.load.reingest import reingest_phases
from bench.load.report import result
from bench.load.second import second_campaign_phases
from bench.load.startup import Bench
from bench.machine import PauseProbe, contention, cpu_sample, machine


async def measure(args) -> dict:
    rss = {"start_before_torch": rss_point()}
    questions, questions_from = load_questions(args.questions, args.notes_dir)

    with tempfile.TemporaryDirectory(prefix="oracle-load-") as tmp:
        probe = LoopProbe(args.slow_ms, None if args.no_dump else args.dump_after_ms)
        b = Bench(args, Path(tmp), Asker(questions), rss, probe)
        await probe.start(args.asyncio_debug)
        machine_probe = PauseProbe(b.tmp)
        b.fake = start_fake_ollama(args.ollama_in_thread)
        try:
            copy_notes(args.notes_dir, b.notes)
            cpu_before = cpu_sample()
            load_start = os.getloadavg()[0]
            try:
                await b.start()
                await answering_phases(b)
                await reingest_phases(b)
                await second_campaign_phases(b)
            finally:
                await b.close()
        finally:
            await probe.stop()
            b.fake.stop_thread()
            machine_probe.stop()
        # A late wake-up inside a pause another process saw too was the machine's, not the loop's.
        machine_pauses = machine_probe.pauses()
        probe.intervals += [(MACHINE_PAUSE, start, end) for start, end in machine_pauses]
        after = cpu_sample()
        if args.worker:  # the worker process is ours: its CPU is not another process's
            after = (*after[:3], after[3] + b.worker_cpu)
        busy = contention(cpu_before, after)

    return result(b, questions_from, machine(b.worker_threads, load_start), busy, machine_pauses)

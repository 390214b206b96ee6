"""Phase 5: one session edited and reingested `--reingests` times in a row while the first campaign
answers: in this process, through the embedding worker, and by `oracle ingest` in another process,
after which the next question must find the edit through every path."""
from __future__ import annotations

import asyncio

from bench.common import EDIT_SENTENCE, edit_one_session
from bench.load.phases import REINGESTS
from bench.load.startup import Bench, ingest_elsewhere, run_ingest


async def reingest_phases(b: Bench) -> None:
    args = b.args

    async def reingests(label: str, run) -> tuple:
        """`--reingests` edits of one session, each reingested by `run(label)`: the windows summed."""
        total, windows, reports = 0.0, 0, []
        for k in range(args.reingests):
            b.edit = await asyncio.to_thread(edit_one_session, b.notes)
            report, seconds, error = await run(f"{label} {k + 1}/{args.reingests}")
            total += seconds
            if error:
                return None, total, error
            reports.append(report)
            windows += report["windows_embedded"] if isinstance(report, dict) else report.windows_embedded
        return {"windows_embedded": windows, "runs": len(reports)}, total, ""

    def here(label: str):
        return run_ingest(b.index, label)

    b.side[REINGESTS[0]] = await b.while_answering(REINGESTS[0], lambda: reingests("reingest", here))
    if b.worker is not None:
        b.embedder.worker = b.worker
        try:
            b.side[REINGESTS[1]] = await b.while_answering(REINGESTS[1], lambda: reingests("reingest (worker)", here))
        finally:
            b.embedder.worker = None
    if args.other_process:
        before = {c.id for c in await (await b.index.store()).chunk_texts()}
        b.side[REINGESTS[2]] = await b.while_answering(
            REINGESTS[2], lambda: reingests("reingest (another process)", lambda label: ingest_elsewhere(
                b.notes, b.data, args.other_nice, label)))
        # The next question finds what the other process committed through every path.
        store = await b.index.store()
        added = {c.id for c in await store.chunk_texts()} - before
        retrieval = await b.oracle.search(EDIT_SENTENCE)
        b.fresh = {path: sorted(added & {h.chunk.id for h in hits}) != []
                   for path, hits in retrieval.paths.items() if path in ("keyword", "semantic")}

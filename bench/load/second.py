"""Phase 6: a second campaign (the same notes, a cold data folder of its own) fully ingested while the
first campaign answers: in this process; through the embedding worker; through the worker into a
`chroma run` server; and by `oracle ingest` in another process."""
from __future__ import annotations

import asyncio

from bench.load.measures import process_rss, rss_point
from bench.load.phases import SECOND
from bench.load.startup import Bench, ingest_elsewhere, run_ingest


async def second_campaign_phases(b: Bench) -> None:
    from oracle.index.index import Index
    from oracle.index.seam import Embeddings
    from testing.chroma_server import ChromaServer

    args = b.args
    runs = [(SECOND[0], None, False)]
    if b.worker is not None:
        runs.append((SECOND[1], b.worker, False))
        if args.chroma_server:
            runs.append((SECOND[2], b.worker, True))
    for phase, via, server in runs:
        b.probe.set_phase("between phases")  # the setup's waits are the benchmark's, not a stall
        folder = b.tmp / ("second-" + phase.rsplit(", ", 1)[-1].replace(" ", "-"))
        chroma = await asyncio.to_thread(ChromaServer, b.tmp / "chroma-server") if server else None
        update = {"data_dir": folder} | ({"chroma_url": chroma.url} if chroma else {})
        second = Index(b.settings().model_copy(update=update), embedder=Embeddings(b.embedder.in_thread, worker=via))
        try:
            b.probe_chroma((await second.vectors()).in_thread)
            b.side[phase] = await b.while_answering(phase, lambda second=second, phase=phase: run_ingest(second, phase))
        finally:
            await second.close()
            if chroma is not None:
                await asyncio.to_thread(chroma.stop)
    if args.other_process:
        b.side[SECOND[3]] = await b.while_answering(SECOND[3], lambda: ingest_elsewhere(
            b.notes, b.tmp / "second-another-process", args.other_nice, SECOND[3]))
    if b.worker is not None:
        b.rss["worker_end"] = process_rss(b.worker.pid)
    b.rss["end_with_second_campaigns"] = rss_point()

"""Several campaigns in one process (--campaigns 1,5,20): one campaign's index built once, then for each
count a process of its own opening that many copies through one `Library` (one model, one embedding
worker, one Ollama client): its peak memory, the worker's, question latency, and (unless
--no-campaigns-ingest) one more campaign built from cold while the others answer."""
from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import gc
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.common import bench_settings, copy_notes, log, python_env, start_fake_ollama
from bench.load.asking import Asker, latency_json, load_questions
from bench.load.measures import process_rss, rss_point, summary
from bench.load.phases import ATTRIBUTE_MS, TICK
from bench.load.probe import machine_pauses_json
from bench.load.startup import run_ingest
from bench.machine import PauseProbe


async def build_template(args, root: Path) -> dict:
    """One campaign's notes copy and its index, built once; every campaign of every count reuses them."""
    from oracle.index.index import Index

    notes, data = root / "notes", root / "template"
    copy_notes(args.notes_dir, notes)
    async with Index(bench_settings(notes, data, ollama_host="http://127.0.0.1:9")) as index:
        report, seconds, error = await run_ingest(index, "template ingest")
    if error:
        raise SystemExit(f"the template ingest failed: {error}")
    return {"chunks": report.chunks, "windows": report.windows_embedded, "seconds": round(seconds, 1)}


def fill_from_template(root: Path, embeddings, settings_of: list) -> None:
    """Each campaign's collections on the Chroma server, copied from the template's embedded store:
    the same notes, so the same windows (a copy stands for an ingest, as the SQLite files' copy does)."""
    import sqlite3

    import numpy as np

    from oracle.index import folders
    from oracle.index.index import collection_name
    from oracle.index.vectors import VectorStore

    template = bench_settings(root / "notes", root / "template")
    with sqlite3.connect(template.sqlite_path) as db:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (folders.SERVED,)).fetchone()
    served = folders.folder_of(template.chroma_path, row[0] if row else "")
    source = VectorStore(served, collection_name(embeddings, template))
    for collection in source.collections.values():
        rows = collection.get(include=["embeddings", "metadatas"])
        for settings in settings_of:
            target = VectorStore(settings.chroma_path, collection_name(embeddings, settings), url=settings.chroma_url)
            target.upsert(rows["ids"], np.asarray(rows["embeddings"], dtype=np.float32), rows["metadatas"])


async def measure_campaign_count(args, root: Path, count: int) -> dict:
    """In a process of its own (`--campaigns-child`): `count` campaigns opened through one `Library`
    (one model, one embedding worker, one Ollama client), each answering questions; peak memory of
    this process and of the worker, and question latency, 1 at a time and `--concurrency` at once
    spread over the campaigns. With `--campaigns-store server`, every campaign's windows live on one
    `chroma run` server (ORACLE_CHROMA_URL), as in the README's scaling out."""
    rss = {"start_before_torch": rss_point()}
    questions, _ = load_questions(args.questions, args.notes_dir)
    n = args.concurrency
    fake = start_fake_ollama(args.ollama_in_thread)
    server = None
    try:
        if args.campaigns_store == "server":
            from testing.chroma_server import ChromaServer

            server = await asyncio.to_thread(ChromaServer, root / f"chroma-server-{count}")
        import oracle.index.embed as embed_mod
        from oracle.campaigns import Campaign, Campaigns
        from oracle.index.library import Library
        from oracle.oracle import Oracle

        loaded = []
        original_init = embed_mod.Embedder.__init__

        def counting_init(self, *a, **k):  # how many times this process loads the model
            loaded.append(1)
            original_init(self, *a, **k)

        embed_mod.Embedder.__init__ = counting_init
        campaigns = []
        for i in range(count):
            data = root / f"c{count}-{i}"
            # The same notes for every campaign: copying the built index stands for ingesting it again.
            await asyncio.to_thread(shutil.copytree, root / "template", data)
            campaigns.append(Campaign(f"c{i}", root / "notes", data))
        settings = bench_settings(root / "notes", root / f"base-{count}", ollama_host=fake.url, reranker="none",
                                  llm_concurrency=args.llm_concurrency or n, embed_worker=args.worker,
                                  chroma_url=server.url if server else None)
        t = time.perf_counter()
        library = await Library.open(settings, Campaigns(tuple(campaigns), source=root / "campaigns.toml"))
        try:
            if server:  # not part of opening: it stands for each campaign's first ingest
                filling = time.perf_counter()
                await library.embeddings.encode(["warm-up"])  # the fingerprint names the collections
                await asyncio.to_thread(fill_from_template, root, library.embeddings,
                                        [c.settings(settings) for c in campaigns])
                t += time.perf_counter() - filling
            await library.embeddings.encode(["warm-up"] * 4)
            for index in library.indexes().values():
                await index.vectors()  # opens its Chroma store and checks it holds every window
            open_seconds = time.perf_counter() - t
            rss["after_open"] = rss_point()
            gc.collect()
            gc.freeze()  # as `python -m bot` does
            sys.setswitchinterval(args.switch_interval_ms / 1000)
            oracles = [Oracle(library.index(c.name)) for c in campaigns]
            asker = Asker(questions)
            for oracle in oracles:  # each campaign's first question builds its matchers and guard
                await asker.one(oracle, "warm-up")
            rss["after_warm_up"] = rss_point()
            for i in range(args.serial):
                await asker.one(oracles[i % count], "x1")
            for w in range(args.waves):
                await asyncio.gather(*(asker.one(oracles[(w * n + j) % count], f"x{n}") for j in range(n)))
            rss["end"] = rss_point()
            worker = library.worker
            worker_memory = process_rss(worker.pid) if worker is not None else None
            during = None
            if args.campaigns_ingest:
                during = await ingest_beside(library, settings, root / f"c{count}-fresh", oracles, asker, n)
                rss["after_ingest"] = rss_point()
                during["worker_rss"] = process_rss(worker.pid) if worker is not None else None
            server_rss = process_rss(server.process.pid) if server else None
        finally:
            await library.close()
        return {
            "campaigns": count,
            "store": args.campaigns_store,
            "chroma_server_rss": server_rss,
            "models_loaded_in_process": len(loaded),
            "worker": args.worker,
            "open_seconds": round(open_seconds, 1),
            "rss": rss,
            "worker_rss": worker_memory,
            "x1": latency_json(asker.group("x1")),
            f"x{n}": latency_json(asker.group(f"x{n}")),
            "ingest_beside": during,
        }
    finally:
        fake.stop_thread()
        if server:
            await asyncio.to_thread(server.stop)


async def ingest_beside(library, settings, data: Path, oracles, asker, n: int) -> dict:
    """One more campaign (the same notes, a cold index) fully ingested with the library's shared
    parts (so through its worker) while waves of `n` questions go to the other campaigns, a second
    apart; a 10 ms sleep measures the loop's stalls meanwhile."""
    from oracle.index.index import Index
    from oracle.index.ingest import ingest

    fresh = Index(settings.model_copy(update={"data_dir": data, "collection_prefix": "fresh-"}),
                  embedder=library.embeddings, llm=library.llm,
                  llm_slots=library.llm_slots, search_slots=library.search_slots)
    loop = asyncio.get_running_loop()
    lateness: list[float] = []
    stop = asyncio.Event()
    full_collections: list[float] = []  # ms of each generation-2 collection: it holds the GIL throughout
    gc_started = [0.0]

    def on_gc(what: str, info: dict) -> None:
        if what == "start":
            gc_started[0] = time.perf_counter()
        elif info.get("generation") == 2:
            full_collections.append((time.perf_counter() - gc_started[0]) * 1000)

    gc.callbacks.append(on_gc)
    # faulthandler dumps every thread's stack from a C thread that needs no GIL: it names what holds
    # the GIL (or stops the process) when no Python thread can run to look.
    dumps = open(data.parent / "stalls.txt", "w+")  # noqa: SIM115 - closed below

    late_ticks: list[tuple[float, float]] = []  # (due, woke) of wake-ups ≥ ATTRIBUTE_MS late

    async def monitor() -> None:
        while not stop.is_set():
            due = loop.time() + TICK
            faulthandler.dump_traceback_later(0.1, file=dumps)
            await asyncio.sleep(TICK)
            faulthandler.cancel_dump_traceback_later()
            lateness.append((loop.time() - due) * 1000)
            if lateness[-1] >= ATTRIBUTE_MS:
                woke = time.perf_counter()
                late_ticks.append((woke - lateness[-1] / 1000, woke))
            if lateness[-1] >= 100:
                events.append((round(time.perf_counter() - t0, 2), f"loop {lateness[-1]:.0f} ms late"))

    async def waves() -> None:
        w = 0
        while not stop.is_set():
            await asyncio.gather(*(asker.one(oracles[(w * n + j) % len(oracles)], "during ingest") for j in range(n)))
            w += 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)

    events: list[tuple[float, str]] = []  # when the loop was 100 ms late, beside the ingest's stages
    t0 = time.perf_counter()

    def progress(p) -> None:
        if p.done in (0, p.total) or p.stage != "embed":
            events.append((round(time.perf_counter() - t0, 2), f"{p.stage} {p.done}/{p.total}"))

    before = rss_point()
    machine_probe = PauseProbe(data.parent)
    tasks = [asyncio.create_task(monitor()), asyncio.create_task(waves())]
    try:
        report = await ingest(fresh, by="bench.load", progress=progress)
    finally:
        seconds = time.perf_counter() - t0
        stop.set()
        await asyncio.gather(*tasks)
        gc.callbacks.remove(on_gc)
        machine_probe.stop()
        dumps.seek(0)
        stall_dumps = dumps.read()[:500_000]  # every thread of a 20-campaign process
        dumps.close()
        await fresh.close()
    return {
        "seconds": round(seconds, 1),
        "windows": report.windows_embedded,
        "stall": summary(lateness),
        "late_50ms": sum(1 for x in lateness if x >= 50),
        **machine_pauses_json(machine_probe.pauses(t0, t0 + seconds), late_ticks),
        "full_collections": len(full_collections),
        "full_collection_max_ms": round(max(full_collections, default=0.0), 1),
        "events": events,
        "stall_dumps": stall_dumps,
        "rss_before": before,
        "rss_after": rss_point(),
        "questions": latency_json(asker.group("during ingest")),
    }


async def measure_campaigns(args) -> dict:
    """Each count in a fresh process, so each peak is its own; the template index is built once here."""
    counts = [int(c) for c in args.campaigns.split(",")]
    stores = args.campaigns_store.split(",")
    with tempfile.TemporaryDirectory(prefix="oracle-campaigns-") as tmp:
        root = Path(tmp)
        template = await build_template(args, root)
        results = []
        for count, store in ((count, store) for count in counts for store in stores):
            log(f"{count} campaign(s) in one process, {store} Chroma")
            out = root / f"result-{count}-{store}.json"
            cmd = [sys.executable, "-m", "bench.load", str(args.notes_dir), "--campaigns-child", str(count),
                   "--campaigns-store", store,
                   "--campaigns-root", str(root), "--save", str(out), "--concurrency", str(args.concurrency),
                   "--serial", str(args.serial), "--waves", str(args.waves), "--worker" if args.worker else "--no-worker",
                   "--campaigns-ingest" if args.campaigns_ingest else "--no-campaigns-ingest",
                   "--switch-interval-ms", str(args.switch_interval_ms)]
            if args.questions:
                cmd += ["--questions", str(args.questions)]
            proc = await asyncio.create_subprocess_exec(*cmd, env=python_env())
            if await proc.wait() != 0:
                raise SystemExit(f"the run with {count} campaigns failed")
            results.append(json.loads(out.read_text()))
            for left in root.iterdir():  # the run's campaigns: a count given twice starts afresh
                if left.is_dir() and left.name not in ("template", "notes"):
                    await asyncio.to_thread(shutil.rmtree, left)
                elif left.is_file():
                    left.unlink()
    return {"mode": "campaigns", "notes_dir": str(args.notes_dir), "template": template, "concurrency": args.concurrency,
            "runs": results}

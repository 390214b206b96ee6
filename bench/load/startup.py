"""A load run's process, started as the bot starts (the model, then both stores, the embedding worker),
with the loop probe timing whatever may hold the interpreter lock or a core; and the ingests its
phases run, in this process or in another, while the first campaign answers."""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import bench_settings, log, python_env
from bench.load.asking import Asker
from bench.load.measures import process_cpu_seconds, process_rss, rss_point
from bench.load.probe import LoopProbe

WARM_UP = ["warm-up: the first call pays for lazy initialisation"] * 4


async def run_ingest(index, label: str) -> tuple[object | None, float, str]:
    """The real ingest of `index` in this process: (its report, seconds, error)."""
    from oracle.index.ingest import ingest

    last = [0.0]

    def progress(p) -> None:
        now = time.perf_counter()
        if p.stage != "embed" or now - last[0] > 15 or p.done == p.total:
            last[0] = now
            log(f"  {label}: {p.stage} {p.done}/{p.total}")

    started = time.perf_counter()
    try:
        report = await ingest(index, progress=progress, by="bench.load")
        return report, time.perf_counter() - started, ""
    except Exception as exc:
        return None, time.perf_counter() - started, f"{type(exc).__name__}: {exc}"


async def ingest_elsewhere(notes: Path, data: Path, nice: int, label: str) -> tuple[dict | None, float, str]:
    """`oracle ingest` in another process (as a shell or the reingest timer runs it), at CPU priority
    `nice`: (its JSON report, seconds, error)."""
    log(f"  {label}: oracle ingest in another process (nice {nice})")
    command = [sys.executable, "-m", "oracle.cli", "ingest", "--notes", str(notes), "--data", str(data), "--json"]
    if nice:
        command = ["nice", "-n", str(nice), *command]
    env = python_env(ORACLE_ANNOTATE="false", HF_HUB_OFFLINE="1")
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE, env=env, cwd=data.parent)
    out, err = await process.communicate()
    seconds = time.perf_counter() - started
    if process.returncode:
        return None, seconds, f"oracle ingest exited with {process.returncode}: {err.decode()[-300:].strip()}"
    return json.loads(out.decode().strip().splitlines()[-1]), seconds, ""


@dataclass
class Bench:
    """One load run: its options and temporary folder, the first campaign's stores, model and worker,
    and what each phase measured."""

    args: argparse.Namespace
    tmp: Path
    asker: Asker
    rss: dict
    probe: LoopProbe
    fake: object = None  # the fake Ollama: `.url`, `.stop_thread()`
    index: object = None  # the first campaign, asked with reranker none ...
    oracle: object = None
    llm_index: object = None  # ... and with reranker llm (the same model, its own Chroma client)
    llm_oracle: object = None
    embedder: object = None  # the index's embeddings (`Embeddings`: the model in this process)
    worker: object = None  # the embedding worker process, unless --no-worker
    worker_cpu: float = 0.0
    model_seconds: float = 0.0
    worker_threads: int = 0
    full: tuple = ()  # the full ingest: (report, seconds, error, waves of questions meanwhile)
    latency_groups: dict = field(default_factory=dict)  # reranker -> its answering-only groups
    side: dict[str, tuple] = field(default_factory=dict)  # ingest phase -> (report, seconds, error, answers)
    edit: object = None  # the last session edit (bench.common.Edit)
    fresh: dict | None = None  # after another process's reingest: path -> the next question found the edit

    @property
    def notes(self) -> Path:
        return self.tmp / "notes"

    @property
    def data(self) -> Path:
        return self.tmp / "data"

    def settings(self, reranker: str = "none"):
        return bench_settings(self.notes, self.data, ollama_host=self.fake.url, reranker=reranker,
                              llm_concurrency=self.args.llm_concurrency or self.args.concurrency)

    def probe_chroma(self, vs) -> None:
        """Time a Chroma store's calls, in whatever thread runs them."""
        for name in ("upsert", "query", "all_ids", "delete"):
            self.probe.wrap(vs, name, f"Chroma {name}")

    async def start(self) -> None:
        """Start as the bot does: the model, then both stores, before any question."""
        import torch

        from oracle.index.index import Index
        from oracle.oracle import Oracle

        args = self.args
        self.index = Index(self.settings())
        t = time.perf_counter()
        self.embedder = await self.index.embedder()
        await self.embedder.encode(WARM_UP)
        self.model_seconds = time.perf_counter() - t
        vectors = await self.index.vectors()
        self.rss["after_model_load"] = rss_point()
        if args.gc_freeze:  # what bot/__main__.py does once it has loaded everything
            gc.collect()
            gc.freeze()
        if args.switch_interval_ms:
            sys.setswitchinterval(args.switch_interval_ms / 1000)
        self.worker_threads = await asyncio.to_thread(torch.get_num_threads)
        self.oracle = Oracle(self.index)
        if args.worker:
            from oracle.index.worker import EmbedWorker

            # Started as the bot starts it, before anything is measured: once, the model loaded there.
            settings = self.settings()
            self.worker = EmbedWorker(settings.embed_model, query_prompt=settings.embed_query_prompt,
                                      passage_prompt=settings.embed_passage_prompt)
            self.worker.start()
            await self.worker.ready()
            await self.worker.encode(WARM_UP)
            self.rss["worker_after_model_load"] = process_rss(self.worker.pid)
        self.llm_index = Index(self.settings("llm"), embedder=self.embedder)
        self.llm_oracle = Oracle(self.llm_index)
        for vs in (vectors.in_thread, (await self.llm_index.vectors()).in_thread):
            self.probe_chroma(vs)
        self._probe_suspects()
        await asyncio.sleep(0.5)  # the setup's own steps stay out of the idle phase

    def _probe_suspects(self) -> None:
        """What may hold the GIL or a core while the loop is late: timed in whatever thread runs it."""
        import oracle.answer.leaks as leaks_mod
        import oracle.answer.writer as writer_mod
        import oracle.index.scan as scan_mod
        import oracle.retrieve.entity as entity_mod

        # Each is wrapped in the module that looks it up when called.
        wrap = self.probe.wrap
        wrap(self.embedder.in_thread, "encode", lambda texts, *a, **k: "encode 1 text" if len(texts) == 1 else "encode batch")
        wrap(self.embedder, "windows", "tokenize windows")
        wrap(leaks_mod, "SecretGuard", "SecretGuard build")
        # A question's own CPU steps, off the loop but wanting the interpreter lock.
        wrap(writer_mod, "fit_answer_prompt", "fit prompt")
        wrap(writer_mod, "_checked", "check answer")
        wrap(entity_mod, "EntityMatcher", "EntityMatcher build")  # built where it is named
        wrap(scan_mod, "scan_notes", "scan notes")
        wrap(scan_mod, "chunk_all", "chunk notes")
        # Its inner step, not `build_compendium` itself: that one is sent to the embedding worker
        # by reference (pickled), which a wrapper defined here cannot be. In the worker it runs
        # unwrapped, off this process, as it should be: it holds none of this process's locks.
        wrap(scan_mod, "_compendium", "build Compendium")

    async def while_answering(self, phase: str, work) -> tuple:
        """`work()` (an ingest: (report, seconds, error)) while the first campaign answers one question
        at a time: (report, seconds, error, answers)."""
        self.probe.set_phase(phase)
        stop = asyncio.Event()
        answering = asyncio.create_task(self.asker.answers(self.oracle, self.args.answer_gap, stop, phase))
        try:
            report, seconds, error = await work()
        finally:
            stop.set()
            count = await answering
            self.probe.set_phase("between phases")
        return report, seconds, error, count

    async def close(self) -> None:
        self.probe.set_phase("done")  # closing is not a phase: its waits are nobody's stall
        if self.index is not None:
            await self.index.close()
        if self.llm_index is not None:
            await self.llm_index.close()
        if self.worker is not None:
            self.worker_cpu = process_cpu_seconds(self.worker.pid)
            await self.worker.close()

"""The run: the model loaded once, every scale built then measured, the targets checked; and the
command line."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import bench.retrieval
from bench.common import CRD3_NOTES, CRD3_QUESTIONS, bench_settings, log, offline, read_questions
from bench.machine import machine
from bench.retrieval.embedding import source_vectors
from bench.retrieval.measure import measure_scale
from bench.retrieval.report import print_table
from bench.retrieval.scale import Built, build_scale

TARGET_1X_MS = 30.0
TARGET_SCALING = 1.5
TARGET_SPEEDUP = 3.0
TARGET_LEARNED_MS = 3.0  # what ORACLE_FUSION=learned may add to a question, p50, at every scale


async def run(args, say) -> dict:
    import torch

    import oracle.index.compendium  # noqa: F401
    import oracle.index.ingest  # noqa: F401
    import oracle.index.store  # noqa: F401
    import oracle.index.vectors  # noqa: F401

    # Every module the run uses, imported now: others may edit oracle/ while a long run builds, and
    # a module first imported an hour later could disagree with the ones already loaded.
    import oracle.oracle  # noqa: F401
    import oracle.retrieve.entity  # noqa: F401
    import oracle.retrieve.keyword  # noqa: F401
    import oracle.retrieve.linked  # noqa: F401
    import oracle.retrieve.semantic  # noqa: F401
    from oracle.index.embed import Embedder
    from oracle.index.index import Index
    from oracle.settings import BUNDLED_EMBED_MODEL

    work = args.work
    questions = read_questions(args.questions)[: args.queries or None]
    load_start = os.getloadavg()[0]

    started = time.perf_counter()
    embedder = await asyncio.to_thread(
        Embedder,
        os.environ.get("ORACLE_EMBED_MODEL", BUNDLED_EMBED_MODEL),
        query_backend=os.environ.get("ORACLE_QUERY_BACKEND", "onnx"),
    )
    load_seconds = time.perf_counter() - started
    embedder.encode(["warm-up: the first call pays for lazy initialisation"] * 4)
    await asyncio.to_thread(embedder.prepare_queries)
    worker_threads = await asyncio.to_thread(torch.get_num_threads)

    builds: dict[int, Built] = {}
    source = None
    for scale in args.scales:
        if scale != 1 and source is None:
            if 1 not in builds:  # the 1× index is the source of every enlarged one's vectors
                builds[1] = await build_scale(1, args.notes, work, embedder, None, args.reingest, say)
            one = Index(bench_settings(args.notes, work / "x1" / "data"), embedder=embedder)
            try:
                source = await source_vectors(one)
            finally:
                await one.close()
        if scale not in builds:
            builds[scale] = await build_scale(scale, args.notes, work, embedder, source, args.reingest, say)
    source = None

    results = {}
    for scale in args.scales:
        results[scale] = await measure_scale(builds[scale], embedder, questions, args.repeat, say)

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 2) if a and b else None

    p50 = {s: r["p50"] for s, r in results.items()}
    checks = []
    if 1 in p50:
        checks.append({"name": "Oracle p50 at 1×", "value": p50[1]["total"], "unit": "ms",
                       "target": f"≤ {TARGET_1X_MS:g} ms", "pass": p50[1]["total"] <= TARGET_1X_MS})
    if 1 in p50 and 10 in p50:
        v = ratio(p50[10]["total"], p50[1]["total"])
        checks.append({"name": "Oracle p50 10× ÷ 1×", "value": v, "unit": "×",
                       "target": f"≤ {TARGET_SCALING:g}", "pass": v is not None and v <= TARGET_SCALING})
    for scale in sorted(p50):
        added = p50[scale].get("l_added")
        checks.append({"name": f"learned fusion's added p50 at {scale}×", "value": added, "unit": "ms",
                       "target": f"≤ {TARGET_LEARNED_MS:g} ms", "pass": added is not None and added <= TARGET_LEARNED_MS})
    top = max(p50) if p50 else None
    if top is not None:
        v = ratio(p50[top]["b_total"], p50[top]["total"])
        checks.append({"name": f"baseline p50 ÷ Oracle p50 at {top}×", "value": v, "unit": "×",
                       "target": f"≥ {TARGET_SPEEDUP:g}" + ("" if top == 100 else " (target is for 100×)"),
                       "pass": v is not None and v >= TARGET_SPEEDUP})

    settings = bench_settings(args.notes, work / "x1" / "data")
    return {
        "machine": machine(worker_threads, load_start),
        "model": {"ref": embedder.ref, "fingerprint": embedder.fingerprint, "query_runtime": embedder.query_runtime,
                  "load_seconds": round(load_seconds, 2)},
        "settings": {"k": settings.k, "fusion": settings.fusion, "fused_pool": settings.fused_pool,
                     "window_tokens": settings.window_tokens, "session_max_words": settings.session_max_words},
        "questions": len(questions),
        "repeat": args.repeat,
        "work": str(work),
        "builds": {s: b.__dict__ for s, b in builds.items() if s in args.scales},
        "results": results,
        "checks": checks,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval",
                                     description=bench.retrieval.__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="1,10,100", help="corpus sizes, comma-separated (default 1,10,100)")
    parser.add_argument("--queries", type=int, default=0, help="use only the first N questions (default: all)")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes over the questions (default 3)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for the indexes, kept between runs (default: a temporary folder, removed)")
    parser.add_argument("--notes", type=Path, default=CRD3_NOTES, help=f"the 1× notes (default {CRD3_NOTES})")
    parser.add_argument("--questions", type=Path, default=CRD3_QUESTIONS, help="one question a line")
    parser.add_argument("--reingest", action="store_true", help="run the incremental ingest even over a kept index")
    args = parser.parse_args(argv)
    try:
        args.scales = sorted({int(s) for s in args.scales.split(",") if s.strip()})
    except ValueError:
        parser.error("--scales takes whole numbers, e.g. 1,10,100")
    if not args.scales or min(args.scales) < 1 or max(args.scales) > 999:
        parser.error("--scales takes whole numbers from 1 to 999")
    if not args.notes.is_dir():
        parser.error(f"{args.notes} is not a folder (the CRD3 notes: --notes DIR)")
    if not read_questions(args.questions):
        parser.error(f"no questions in {args.questions}")
    try:
        import rank_bm25  # noqa: F401
    except ImportError:
        print("bench.retrieval: the baseline needs rank_bm25, which the Oracle itself does not depend on.\n"
              "Install it into this environment first:  pip install rank_bm25", file=sys.stderr)
        return 2

    offline()
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    args.notes = args.notes.resolve()
    temporary = args.work is None
    args.work = Path(tempfile.mkdtemp(prefix="oracle-retrieval-bench-")) if temporary else args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)

    try:
        result = asyncio.run(run(args, log))
    finally:
        if temporary:
            shutil.rmtree(args.work, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print_table(result)
    return 0

"""The command line of `python -m bench.load` (see bench/load/__init__.py for what it measures)."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

import bench.load
from bench.common import CRD3_NOTES, SAMPLE_NOTES
from bench.load.campaigns import measure_campaign_count, measure_campaigns
from bench.load.report import failed_phases, missed_targets
from bench.load.run import measure
from bench.load.table import print_campaigns_table, print_table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=bench.load.__doc__.split("\n\n")[0])
    parser.add_argument("notes_dir", nargs="?", type=Path, default=None,
                        help=f"the notes folder (default: {CRD3_NOTES})")
    parser.add_argument("--quick", action="store_true", help=f"smoke run on the bundled sample {SAMPLE_NOTES}")
    parser.add_argument("--questions", type=Path, help="questions, one a line (.txt) or a .jsonl bank")
    parser.add_argument("--concurrency", type=int, default=20, help="questions asked at once")
    parser.add_argument("--llm-concurrency", type=int, default=0,
                        help="ORACLE_LLM_CONCURRENCY (default: --concurrency, so the fake LLM never queues)")
    parser.add_argument("--gap", type=float, default=1.0, help="seconds between question waves during ingests")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of idle baseline")
    parser.add_argument("--serial", type=int, default=None, help="questions asked one at a time (per reranker)")
    parser.add_argument("--waves", type=int, default=None, help="waves of --concurrency questions (per reranker)")
    parser.add_argument("--slow-ms", type=float, default=20.0, help="a loop iteration this slow is examined")
    parser.add_argument("--dump-after-ms", type=float, default=50.0, help="sample all stacks when the loop is this late")
    parser.add_argument("--no-dump", action="store_true", help="no stack-sampling watchdog")
    parser.add_argument("--asyncio-debug", action="store_true", help="also turn on asyncio's debug mode")
    parser.add_argument("--gc-freeze", action=argparse.BooleanOptionalAction, default=True,
                        help="gc.freeze() once the model and stores are loaded, as `python -m bot` does "
                             "(--no-gc-freeze measures without it)")
    parser.add_argument("--switch-interval-ms", type=float, default=1.0,
                        help="sys.setswitchinterval, the GIL hand-over period: 1 ms as the bot sets it "
                             "(oracle.offload.SWITCH_INTERVAL); 5 is Python's default")
    parser.add_argument("--answer-gap", type=float, default=0.2,
                        help="seconds between two questions answered one at a time (phases 4-6)")
    parser.add_argument("--answer-idle", type=float, default=None,
                        help="seconds of answers alone, the idle baseline (default 30; 8 with --quick)")
    parser.add_argument("--reingests", type=int, default=None,
                        help="session reingests in a row in each reingest phase (default 10; 2 with --quick)")
    parser.add_argument("--worker", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the ingests through the embedding worker process, side by side with the "
                             "in-process ones")
    parser.add_argument("--chroma-server", action=argparse.BooleanOptionalAction, default=True,
                        help="also build the second campaign into a `chroma run` server (ORACLE_CHROMA_URL), "
                             "through the worker")
    parser.add_argument("--other-process", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the ingests by `oracle ingest` in another process, as a shell or the "
                             "reingest timer does")
    parser.add_argument("--other-nice", type=int, default=0,
                        help="the CPU priority (nice) of that other process (default 0, as systemd starts it)")
    parser.add_argument("--campaigns", help="several campaigns in one process instead: counts, e.g. 1,5,20 "
                                            "(each in a process of its own; peak memory and question latency)")
    parser.add_argument("--campaigns-ingest", action=argparse.BooleanOptionalAction, default=True,
                        help="with --campaigns, also build one more campaign from cold while the others answer")
    parser.add_argument("--campaigns-store", default="embedded",
                        help="with --campaigns, where the campaigns' windows live: embedded (each campaign's own "
                             "Chroma folder), server (one `chroma run` server for all), or embedded,server "
                             "to run each count with both, side by side")
    parser.add_argument("--campaigns-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--campaigns-root", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--ollama-in-thread", action="store_true",
                        help="run the fake Ollama in a thread of this process (it then competes for the GIL)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--save", type=Path, help="also write the JSON object to this file")
    parser.add_argument("--show", type=Path, help="print the table of a result saved by --save or --json; run nothing")
    args = parser.parse_args(argv)
    if args.show:
        saved = json.loads(args.show.read_text())
        print_campaigns_table(saved) if saved.get("mode") == "campaigns" else print_table(saved)
        return 0
    if not set(args.campaigns_store.split(",")) <= {"embedded", "server"}:
        parser.error("--campaigns-store takes embedded, server or embedded,server")
    if args.notes_dir is None:
        args.notes_dir = SAMPLE_NOTES if args.quick else CRD3_NOTES
    if not args.notes_dir.is_dir():
        parser.error(f"{args.notes_dir} is not a folder")
    args.notes_dir = args.notes_dir.resolve()
    args.serial = args.serial if args.serial is not None else (20 if args.quick else 90)
    args.waves = args.waves if args.waves is not None else (2 if args.quick else 10)
    args.answer_idle = args.answer_idle if args.answer_idle is not None else (8.0 if args.quick else 30.0)
    args.reingests = args.reingests if args.reingests is not None else (2 if args.quick else 10)
    if args.quick:
        args.idle = min(args.idle, 2.0)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.campaigns_child:
        result = asyncio.run(measure_campaign_count(args, args.campaigns_root, args.campaigns_child))
        args.save.write_text(json.dumps(result, indent=2))
        return 0
    if args.campaigns:
        result = asyncio.run(measure_campaigns(args))
        printer = print_campaigns_table
    else:
        result = asyncio.run(measure(args))
        printer = print_table
    if args.save:
        args.save.write_text(json.dumps(result, indent=2))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        printer(result)
    failed = failed_phases(result) if printer is print_table else []
    for label, error in failed:
        print(f"bench.load: the {label} failed: {error}", file=sys.stderr)
    missed = missed_targets(result) if printer is print_table else []
    for what in missed:
        print(f"bench.load: target missed: {what}", file=sys.stderr)
    return 1 if failed or missed else 0


if __name__ == "__main__":
    sys.exit(main())

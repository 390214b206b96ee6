"""Ingest benchmark: how much of an ingest is encoding, and what a small edit costs.

    python -m bench.ingest [NOTES_DIR] [--repeat N] [--json]

NOTES_DIR defaults to the bundled sample campaign (notes/ at the repository root). The notes are
copied into a temporary folder (one session gets edited) and indexed into a temporary data folder,
with annotations off and OLLAMA_HOST pointed at a closed local port, so nothing waits on Ollama.

Everything is measured in one process with one loaded model, loaded (and warmed up) before any
timing starts:

1. a full ingest: wall seconds, chunks, windows embedded, windows/s;
2. raw `Embedder.encode` throughput on the same window texts (rebuilt with `Embedder.windows` from
   the chunks read back from the store), in one call, best of --repeat runs;
3. the share of ingest time not spent encoding, (ingest s - raw encode s) / ingest s, target < 15%;
4. a re-ingest with nothing changed (must embed 0 windows);
5. a re-ingest after one sentence is appended inside one session: target < 5% of the full ingest.

Extra rows break the full ingest into phases (from its progress callbacks) to show where the
non-encoding time goes.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import SAMPLE_NOTES, bench_settings, copy_notes, edit_one_session, ingest_phases, offline
from bench.machine import contention, cpu_sample, machine
from bench.printing import console, new_table, print_machine, verdict

OVERHEAD_TARGET = 0.15  # share of full-ingest time not spent encoding
CHANGE_TARGET = 0.05  # one-session re-ingest, as a share of the full ingest


# ---------------------------------------------------------------------------------------------
# Instrumentation (in this process only; oracle/ is not touched)


class EncodeTimer:
    """Replaces `embedder.encode` on the instance and adds up the seconds spent inside it."""

    def __init__(self, embedder) -> None:
        self.original = embedder.encode  # the bound method
        self.seconds = 0.0
        self.texts = 0
        self.calls = 0
        embedder.encode = self

    def reset(self) -> None:
        self.seconds, self.texts, self.calls = 0.0, 0, 0

    def __call__(self, texts, *args, **kwargs):
        started = time.perf_counter()
        try:
            return self.original(texts, *args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - started
            self.texts += len(texts)
            self.calls += 1


@dataclass
class Run:
    seconds: float
    report: object
    encode_seconds: float
    encode_calls: int
    phases: dict[str, float] = field(default_factory=dict)


async def timed_ingest(index, timer: EncodeTimer) -> Run:
    from oracle.index.ingest import ingest

    events: list[tuple[float, str, int, int]] = []
    timer.reset()
    started = time.perf_counter()
    report = await ingest(index, progress=lambda p: events.append((time.perf_counter(), p.stage, p.done, p.total)))
    seconds = time.perf_counter() - started
    return Run(seconds, report, timer.seconds, timer.calls, ingest_phases(started, started + seconds, events))


def rebuild_windows(embedder, chunks, settings) -> list:
    """The windows ingest cut for these chunks: same overlap and, where the code has one, same size."""
    import inspect

    kwargs = {}
    if "size" in inspect.signature(embedder.windows).parameters and hasattr(settings, "window_tokens"):
        kwargs["size"] = settings.window_tokens
    return embedder.windows(chunks, settings.window_overlap_tokens, **kwargs)


def best_of(repeat: int, *fns) -> list[float]:
    """Best wall seconds of each function over `repeat` rounds, interleaved so drift hits all alike."""
    best = [float("inf")] * len(fns)
    for _ in range(max(1, repeat)):
        for k, fn in enumerate(fns):
            started = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - started)
    return best


# ---------------------------------------------------------------------------------------------
# The run


async def measure(notes_src: Path, repeat: int) -> dict:
    offline()

    import torch

    import oracle.index.ingest
    from oracle.index.index import Index

    _EMBED_BATCH = getattr(oracle.index.ingest, "_EMBED_BATCH", 64)  # the ingest's encode() call size

    cpu_before = cpu_sample()
    load_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    with tempfile.TemporaryDirectory(prefix="oracle-bench-") as tmp:
        notes = Path(tmp, "notes")
        copy_notes(notes_src, notes)
        settings = bench_settings(notes, Path(tmp, "data"))
        index = Index(settings)
        try:
            started = time.perf_counter()
            embedder = (await index.embedder()).in_thread  # timed and patched as the model itself
            load_seconds = time.perf_counter() - started
            started = time.perf_counter()
            embedder.encode(["warm-up: the first call pays for lazy initialisation"] * 4)
            warmup_seconds = time.perf_counter() - started
            worker_threads = await asyncio.to_thread(torch.get_num_threads)
            timer = EncodeTimer(embedder)

            # 1. Full ingest.
            full = await timed_ingest(index, timer)

            # 2. Raw encoding of the same window texts, rebuilt from the stored chunks in ingest order.
            store = await index.store()
            ids = [r.chunk_id for r in await store.chunk_hashes()]
            chunks = await store.chunks_by_ids(ids)
            windows = rebuild_windows(embedder, chunks, settings)
            texts = [w.text for w in windows]
            stored_windows = await store.window_ids()
            same_windows = {w.id for w in windows} == stored_windows and len(windows) == full.report.windows_embedded
            raw_seconds, batched_seconds = best_of(
                repeat,
                lambda: timer.original(texts),
                lambda: [timer.original(texts[i : i + _EMBED_BATCH]) for i in range(0, len(texts), _EMBED_BATCH)],
            )

            # 4. Nothing changed.
            noop = await timed_ingest(index, timer)

            # 5. One session changed.
            edit = edit_one_session(notes)
            changed = await timed_ingest(index, timer)
        finally:
            await index.close()

    busy = contention(cpu_before, cpu_sample())

    n = full.report.windows_embedded
    ingest_wps = n / full.seconds if full.seconds else 0.0
    raw_wps = len(texts) / raw_seconds if raw_seconds else 0.0
    encode_seconds = n / raw_wps if raw_wps else 0.0
    overhead = (full.seconds - encode_seconds) / full.seconds if full.seconds else 0.0
    change_share = changed.seconds / full.seconds if full.seconds else 0.0

    def run_json(run: Run) -> dict:
        r = run.report
        return {
            "seconds": round(run.seconds, 3),
            "chunks": r.chunks,
            "windows_embedded": r.windows_embedded,
            "windows_repaired": getattr(r, "windows_repaired", 0),
            "encode_seconds_inside": round(run.encode_seconds, 3),
            "encode_calls": run.encode_calls,
            "files": {"added": len(r.added), "changed": len(r.changed), "removed": len(r.removed),
                      "unchanged": r.unchanged, "skipped": len(r.skipped)},
            "entities": r.entities,
            "phases": {k: round(v, 3) for k, v in run.phases.items()},
        }

    return {
        "notes_dir": str(notes_src),
        "machine": {
            **machine(worker_threads, load_start),
            # CPU other processes used while this ran, as a share of all cores: noise in every number.
            **busy,
        },
        "model": {
            "ref": settings.embed_model,
            "fingerprint": embedder.fingerprint,
            "max_tokens": embedder.max_tokens,
            "window_tokens": getattr(settings, "window_tokens", embedder.max_tokens),
            "window_overlap_tokens": settings.window_overlap_tokens,
            "load_seconds": round(load_seconds, 3),
            "warmup_seconds": round(warmup_seconds, 3),
        },
        "full_ingest": run_json(full) | {"windows_per_second": round(ingest_wps, 2)},
        "raw_encode": {
            "windows": len(texts),
            "same_windows_as_ingest": same_windows,
            "repeat": repeat,
            "best_seconds": round(raw_seconds, 3),
            "windows_per_second": round(raw_wps, 2),
            "ingest_batching_seconds": round(batched_seconds, 3),
            "ingest_batching_windows_per_second": round(len(texts) / batched_seconds, 2) if batched_seconds else 0.0,
            "ingest_batch": _EMBED_BATCH,
        },
        "non_encoding_share": {
            "value": round(overhead, 4),
            # The same share from the clock around each encode() call inside the ingest: immune to
            # the machine's speed changing between the ingest and the raw runs, blind to slow encoding.
            "outside_encode_calls": round(1 - full.encode_seconds / full.seconds, 4) if full.seconds else 0.0,
            "target": OVERHEAD_TARGET,
            "pass": overhead < OVERHEAD_TARGET,
        },
        "reingest_unchanged": run_json(noop) | {"pass": noop.report.windows_embedded == 0},
        "reingest_one_session": run_json(changed)
        | {
            "edit": {"path": edit.path, "line": edit.line, "session": edit.session},
            "share_of_full": round(change_share, 4),
            "target": CHANGE_TARGET,
            "pass": change_share < CHANGE_TARGET,
        },
    }


# ---------------------------------------------------------------------------------------------
# Output


def print_table(r: dict) -> None:
    out = console(150)
    m, model = r["machine"], r["model"]
    print_machine(out, m)
    out.print(
        f"Model: {model['ref']} ({model['fingerprint']}, reads {model['max_tokens']} tokens; windows of "
        f"{model['window_tokens']} tokens, {model['window_overlap_tokens']} overlap) loaded in "
        f"{model['load_seconds']:.2f} s, warm-up encode {model['warmup_seconds']:.2f} s (neither is in any ingest time)"
    )
    out.print(f"Notes: {r['notes_dir']}")

    t = new_table("Oracle ingest benchmark", [
        ("Measure", "left"), ("Seconds", "right"), ("Chunks", "right"), ("Windows", "right"),
        ("Windows/s", "right"), ("Share", "right"), ("Target", "right"), ("Result", "center")])

    full, raw, ov = r["full_ingest"], r["raw_encode"], r["non_encoding_share"]
    t.add_row("1. Full ingest", f"{full['seconds']:.2f}", str(full["chunks"]), str(full["windows_embedded"]),
              f"{full['windows_per_second']:.1f}", "100%", "", "")
    for name, sec in full["phases"].items():
        t.add_row(f"   [dim]{name}[/]", f"[dim]{sec:.2f}[/]", "", "", "", f"[dim]{sec / full['seconds']:.1%}[/]", "", "")
    t.add_row(f"   [dim]  of which encode() inside ingest ({full['encode_calls']} calls)[/]",
              f"[dim]{full['encode_seconds_inside']:.2f}[/]", "", "", "",
              f"[dim]{full['encode_seconds_inside'] / full['seconds']:.1%}[/]", "", "")
    check = "" if raw["same_windows_as_ingest"] else " [red](window ids differ from the index!)[/]"
    t.add_row(f"2. Raw encode, one call, best of {raw['repeat']}{check}", f"{raw['best_seconds']:.2f}", "",
              str(raw["windows"]), f"{raw['windows_per_second']:.1f}",
              f"{raw['best_seconds'] / full['seconds']:.1%}", "", "")
    t.add_row(f"   [dim]raw encode in the ingest's {raw['ingest_batch']}-window calls[/]",
              f"[dim]{raw['ingest_batching_seconds']:.2f}[/]", "", "",
              f"[dim]{raw['ingest_batching_windows_per_second']:.1f}[/]", "", "", "")
    t.add_row("3. Ingest time not spent encoding", "", "", "", "", f"{ov['value']:.1%}",
              f"< {ov['target']:.0%}", verdict(ov["pass"]))
    t.add_row("   [dim]measured directly: ingest time outside encode() calls[/]",
              f"[dim]{full['seconds'] - full['encode_seconds_inside']:.2f}[/]", "", "", "",
              f"[dim]{ov['outside_encode_calls']:.1%}[/]", "", "")
    noop = r["reingest_unchanged"]
    t.add_row("4. Re-ingest, nothing changed", f"{noop['seconds']:.2f}", str(noop["chunks"]),
              str(noop["windows_embedded"]), "", f"{noop['seconds'] / full['seconds']:.1%}", "0 windows",
              verdict(noop["pass"]))
    ch = r["reingest_one_session"]
    t.add_row("5. Re-ingest, one session edited", f"{ch['seconds']:.2f}", str(ch["chunks"]),
              str(ch["windows_embedded"]), "", f"{ch['share_of_full']:.1%}", f"< {ch['target']:.0%}",
              verdict(ch["pass"]))
    for name, sec in ch["phases"].items():
        t.add_row(f"   [dim]{name}[/]", f"[dim]{sec:.2f}[/]", "", "", "", f"[dim]{sec / full['seconds']:.1%}[/]", "", "")
    e = ch["edit"]
    t.caption = (f"Share = of the full ingest. Row 3 = (ingest s - windows / raw windows/s) / ingest s. "
                 f"Edit: {e['path']} line {e['line']} ({e['session']}).")
    out.print(t)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest", description=__doc__.split("\n\n")[0])
    parser.add_argument("notes_dir", nargs="?", type=Path, default=SAMPLE_NOTES,
                        help=f"the notes folder to ingest (default: {SAMPLE_NOTES})")
    parser.add_argument("--repeat", type=int, default=1, help="raw-encode measurements to take the best of")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if not args.notes_dir.is_dir():
        parser.error(f"{args.notes_dir} is not a folder")
    result = asyncio.run(measure(args.notes_dir.resolve(), args.repeat))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

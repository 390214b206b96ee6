#!/usr/bin/env python
"""Ingest benchmark: how much of an ingest is encoding, and what a small edit costs.

    python bench/ingest.py [NOTES_DIR] [--repeat N] [--json]

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
import platform
import shutil
import socket
import stat
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_NOTES = REPO / "notes"
OVERHEAD_TARGET = 0.15  # share of full-ingest time not spent encoding
CHANGE_TARGET = 0.05  # one-session re-ingest, as a share of the full ingest
EDIT_SENTENCE = "Before dawn the party counted their coins twice and still came up one short."


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# The notes copy and the one-session edit


def copy_notes(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True)
    # Sources may be read-only (shared eval data): the copy must be editable and removable.
    for folder, dirs, files in os.walk(dst):
        for name in dirs + files:
            p = Path(folder, name)
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | stat.S_IWUSR | stat.S_IRUSR | (stat.S_IXUSR if p.is_dir() else 0))
    dst.chmod(dst.stat().st_mode | stat.S_IWUSR)


@dataclass
class Edit:
    path: str
    line: int
    session: str


_NOT_PROSE = ("#", ">", "|", "```", "~~~", "---", "<", "%%", "[^")


def edit_one_session(root: Path) -> Edit:
    """Append a sentence to the last prose line of the middle session of the note with the most sessions.

    For a one-file log (like CRD3) that file holds every session, so the edit stays inside one
    session's text. A folder with no session headers gets the sentence on the largest note instead.
    """
    from oracle.notes.sessions import match_header

    best: tuple[Path, list[str], list[int]] | None = None
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or path.is_symlink():
            continue
        lines = path.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
        headers = [i for i, line in enumerate(lines) if match_header(line)]
        key = (len(headers), path.stat().st_size)
        if best is None or key > (len(best[2]), best[0].stat().st_size):
            best = (path, lines, headers)
    if best is None:
        raise SystemExit(f"no Markdown notes under {root}")
    path, lines, headers = best

    def prose_lines(first: int, stop: int) -> list[int]:
        """Lines of running text (not headings, quotes/callouts, tables, comments or fences)."""
        found, in_comment = [], False
        for i in range(first, stop):
            s = lines[i].strip()
            if in_comment:
                if "-->" in s or s.endswith("%%"):
                    in_comment = False
                continue
            if s.startswith("<!--") and "-->" not in s[4:]:
                in_comment = True
                continue
            if s == "%%" or (s.startswith("%%") and not s.endswith("%%", 2)):
                in_comment = True
                continue
            if len(s.split()) >= 5 and not s.startswith(_NOT_PROSE) and "%%" not in s and "<!--" not in s:
                found.append(i)
        return found

    target = None
    session = "(no session headers: the largest note)"
    if headers:
        ends = headers[1:] + [len(lines)]
        sizes = [sum(len(line) for line in lines[a:b]) for a, b in zip(headers, ends)]
        median = sorted(sizes)[len(sizes) // 2]
        # The session nearest the middle of the log among those of at least median length (a typical
        # session, not a stub), then any other with a line of text.
        order = sorted(range(len(headers)), key=lambda k: (sizes[k] < median, abs(k - len(headers) // 2)))
        for k in order:
            start = headers[k]
            stop = headers[k + 1] if k + 1 < len(headers) else len(lines)
            found = prose_lines(start + 1, stop)
            target = found[-1] if found else None  # the session's last line of text: an addition
            if target is not None:
                session = lines[start].strip().lstrip("#").strip()
                break
    if target is None:
        found = prose_lines(0, len(lines))
        target = found[-1] if found else None
    if target is None:  # nothing prose-like at all: add a paragraph at the end
        lines.append("")
        lines.append(EDIT_SENTENCE)
        target = len(lines) - 1
    else:
        line = lines[target]
        cr = "\r" if line.endswith("\r") else ""
        lines[target] = f"{line.rstrip()} {EDIT_SENTENCE}{cr}"
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogateescape")
    return Edit(path.relative_to(root).as_posix(), target + 1, session)


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


def phases_from(start: float, end: float, events: list[tuple[float, str, int, int]]) -> dict[str, float]:
    """Wall seconds between the ingest's progress callbacks."""

    def first(stage: str, pred=lambda d, t: True) -> float | None:
        return next((t for t, s, d, n in events if s == stage and pred(d, n)), None)

    def last(stage: str) -> float | None:
        return next((t for t, s, _, _ in reversed(events) if s == stage), None)

    marks = [
        ("open store + Chroma, read meta/manifest", first("scan")),
        ("scan, hash, parse, chunk", last("scan")),
        ("plan, tokenize windows, Chroma lookup", first("embed")),
        ("embed loop (encode + Chroma upsert)", last("embed")),
        ("file records, heads", first("commit")),
        ("read back, Compendium, SQLite commit", last("commit")),
        ("orphan sweep, annotations, meta", end),
    ]
    out = {}
    prev = start
    for name, t in marks:
        if t is None:
            continue
        out[name] = t - prev
        prev = t
    return out


async def timed_ingest(index, timer: EncodeTimer) -> Run:
    from oracle.index.ingest import ingest

    events: list[tuple[float, str, int, int]] = []
    timer.reset()
    started = time.perf_counter()
    report = await ingest(index, progress=lambda p: events.append((time.perf_counter(), p.stage, p.done, p.total)))
    seconds = time.perf_counter() - started
    return Run(seconds, report, timer.seconds, timer.calls, phases_from(started, started + seconds, events))


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


def cpu_sample() -> tuple[float, float, float, float]:
    """(wall s, machine busy CPU s, machine steal CPU s, this process's CPU s), for contention."""
    wall = time.perf_counter()
    own = sum(os.times()[:2])
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return wall, 0.0, 0.0, own
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return wall, (user + nice + system + irq + softirq) / hz, steal / hz, own


def contention(before: tuple[float, float, float, float], after: tuple[float, float, float, float]) -> dict:
    """How much of the machine other processes (and the hypervisor) took while we measured."""
    wall = after[0] - before[0]
    capacity = wall * (os.cpu_count() or 1)
    if capacity <= 0 or after[1] == 0.0:
        return {"other_processes_share": None, "steal_share": None}
    others = max(0.0, (after[1] - before[1]) - (after[3] - before[3]))
    return {
        "other_processes_share": round(others / capacity, 4),
        "steal_share": round((after[2] - before[2]) / capacity, 4),
    }


# The pause probe's whole program: sleep 1 ms, note every wake-up `gap` seconds late (its start and end
# on CLOCK_MONOTONIC, the clock of every process on the machine). It runs no Python threads and holds no
# lock anybody else wants, so a pause it sees is the machine's: the hypervisor took the CPU (steal), or
# the kernel stopped the whole machine.
_PAUSE_PROBE = """
import sys, time
gap = float(sys.argv[2]) / 1000
with open(sys.argv[1], "w", buffering=1) as out:
    last = time.monotonic()
    while True:
        time.sleep(0.001)
        now = time.monotonic()
        if now - last >= gap:
            out.write(f"{last:.4f} {now:.4f}\\n")
        last = now
"""


class PauseProbe:
    """A process of its own that notes when the machine paused, so a benchmark can tell a stall of its
    event loop that the whole machine shared from one of its own making. Times are `time.perf_counter()`
    values (CLOCK_MONOTONIC on Linux, like the probe's)."""

    def __init__(self, folder: Path, gap_ms: float = 30.0) -> None:
        import subprocess

        self.gap_ms = gap_ms
        self.path = Path(folder) / "machine-pauses.txt"
        self._proc = subprocess.Popen([sys.executable, "-c", _PAUSE_PROBE, str(self.path), str(gap_ms)])

    def pauses(self, start: float = float("-inf"), end: float = float("inf")) -> list[tuple[float, float]]:
        """Pauses (start, end) that overlap [start, end]."""
        try:
            lines = self.path.read_text().splitlines()
        except OSError:
            return []
        spans = [tuple(map(float, line.split())) for line in lines if len(line.split()) == 2]
        return [(s, e) for s, e in spans if e > start and s < end]

    def stop(self) -> None:
        self._proc.kill()
        self._proc.wait()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(worker_threads: int, load_start: float) -> dict:
    """What every bench prints first: the numbers mean little without it."""
    import torch

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch_threads_worker": worker_threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "load_average_at_start": round(load_start, 2),
    }


def machine_line(m: dict) -> str:
    return (
        f"Machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), torch {m['torch']} with "
        f"{m['torch_threads']} threads ({m['torch_threads_worker']} in a worker thread), Python {m['python']}; "
        f"load {m['load_average_at_start']:.2f} at start"
    )


# ---------------------------------------------------------------------------------------------
# The run


async def measure(notes_src: Path, repeat: int) -> dict:
    os.environ["OLLAMA_HOST"] = f"http://127.0.0.1:{closed_port()}"
    os.environ["ORACLE_ANNOTATE"] = "false"

    import torch

    import oracle.index.ingest
    from oracle.index.index import Index
    from oracle.settings import Settings

    _EMBED_BATCH = getattr(oracle.index.ingest, "_EMBED_BATCH", 64)  # the ingest's encode() call size

    cpu_before = cpu_sample()
    load_start = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    with tempfile.TemporaryDirectory(prefix="oracle-bench-") as tmp:
        notes = Path(tmp, "notes")
        copy_notes(notes_src, notes)
        settings = Settings(
            notes_dir=notes,
            data_dir=Path(tmp, "data"),
            _env_file=None,
            annotate=False,
            ollama_host=os.environ["OLLAMA_HOST"],
        )
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
    from rich.console import Console
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=150)
    m, model = r["machine"], r["model"]
    console.print(machine_line(m))
    if m["other_processes_share"] is not None:
        share = m["other_processes_share"]
        note = " [red]- the machine was busy: numbers are unreliable[/]" if share > 0.05 else ""
        console.print(
            f"During the run other processes used {share:.1%} of all cores, hypervisor steal "
            f"{m['steal_share']:.1%}{note}"
        )
    console.print(
        f"Model: {model['ref']} ({model['fingerprint']}, reads {model['max_tokens']} tokens; windows of "
        f"{model['window_tokens']} tokens, {model['window_overlap_tokens']} overlap) loaded in "
        f"{model['load_seconds']:.2f} s, warm-up encode {model['warmup_seconds']:.2f} s (neither is in any ingest time)"
    )
    console.print(f"Notes: {r['notes_dir']}")

    verdict = lambda ok: "[green]PASS[/]" if ok else "[red]MISS[/]"  # noqa: E731
    t = Table(title="Oracle ingest benchmark", show_lines=False)
    for name, justify in [("Measure", "left"), ("Seconds", "right"), ("Chunks", "right"), ("Windows", "right"),
                          ("Windows/s", "right"), ("Share", "right"), ("Target", "right"), ("Result", "center")]:
        t.add_column(name, justify=justify)

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
    console.print(t)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notes_dir", nargs="?", type=Path, default=DEFAULT_NOTES,
                        help=f"the notes folder to ingest (default: {DEFAULT_NOTES})")
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

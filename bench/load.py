#!/usr/bin/env python
"""Load benchmark: the time to answer while notes are indexed, event-loop stalls and peak memory, in one run.

    python bench/load.py [NOTES_DIR] [--quick] [--json] [--save FILE] [--concurrency 20] [--asyncio-debug]
    python bench/load.py --show FILE      # the table of a saved result

NOTES_DIR defaults to the real 113-session CRD3 log (/work/shared/eval/crd3/notes); `--quick` uses
the bundled sample campaign (notes/) for a smoke run. The notes are copied into a temporary folder
(one session gets edited) and indexed into a cold temporary data folder. A fake Ollama
(tests/fakes/ollama_server.py, real HTTP on 127.0.0.1) answers every chat at once, so no LLM time
is in any number. It runs in a process of its own, as a real Ollama does (`--ollama-in-thread`: in
a thread of this one, where its HTTP handling competes with the loop for the GIL).
Annotations are off: without a real model none would exist.

The process starts as the bot does (load the model, open the stores), then runs these phases while a
monitor task sleeps 10 ms in a loop and records how late each wake-up is (`loop.time()` drift):

1. idle: nothing but the monitor;
2. full ingest of the cold index AND, concurrently, waves of `--concurrency` questions through
   `Oracle.ask` (questions before the first commit find nothing: they must still be answered);
3. answering only: `ask()` latency, 1 question at a time and `--concurrency` at once, with
   `reranker="none"` and `reranker="llm"` (which turns itself off: no chunk has an annotation);
4. answers alone: the time to answer a question without a model (retrieval, then the passages a
   reply shows: `answer_without_model`), one question at a time, `--answer-gap` seconds apart, for
   `--answer-idle` seconds. This is the idle baseline of every phase below;
5. a session's reingest (one session edited, `--reingests` times in a row) while the same answers go
   on: embedded in this process; (unless --no-worker) in the embedding worker process
   (`oracle/index/worker.py`, started once during setup, as the bot starts it); and (unless
   --no-other-process) by `oracle ingest` in another process, at `--other-nice`, as the reingest
   timer runs it. After that one, the next question must find the edit through every path;
6. a second campaign (the same notes, a cold data folder of its own) fully ingested while the first
   campaign answers: in this process; through the worker; through the worker into a `chroma run`
   server on 127.0.0.1 (unless --no-chroma-server); and by `oracle ingest` in another process.

For each phase of 5 and 6 the table gives the p95 time to answer against the idle baseline's: the
target is at most `ANSWER_RATIO_TARGET` (1.5) times idle. That is what a table feels while notes are
indexed. The loop's stalls are printed for information only.

To name what stalls the loop, every callback the loop runs is timed (as asyncio's debug mode does
with `slow_callback_duration`, without its overhead): loop iterations whose callbacks took at least
`--slow-ms` are kept with the frame and the lines each slow task step resumed and stopped at; and a
watchdog thread samples every thread's stack whenever the monitor is `--dump-after-ms` overdue,
naming the line that holds the loop even when the cause is another thread holding the GIL.
`--asyncio-debug` also turns on asyncio's own debug mode and collects its "Executing <Task ...> took
X seconds" warnings (debug mode slows everything: use those runs to name blockers, not for numbers).
A step's time includes waiting for the GIL: on 2 cores, a step can be slow because an embedding or
Chroma thread runs; the stack samples tell which.

It starts as `python -m bot` does: gc.freeze() once everything is loaded, so a full collection no
longer walks the ~480k objects the imports leave (`--no-gc-freeze` measures without it, 300+ ms
stalls). It hands the GIL over every 1 ms, as the bot does (`--switch-interval-ms 5`: Python's default).

With `--campaigns 1,5,20`, it measures several campaigns in one process instead: one campaign's
index is built once (a full ingest of NOTES_DIR), then, for each count, a fresh process copies that
built data folder once per campaign (they are the same notes: a copy stands for the same ingest, and
keeps 20 CRD3-sized campaigns to minutes on two cores), opens them all through one `Library` (one
model, one embedding worker, one Ollama client) and asks `--serial` questions one at a time and
`--waves` waves of `--concurrency` at once, spread over the campaigns. It reports, per count, how many
times the bot process loaded the model, its peak and current RSS, the embedding worker's peak RSS,
and question latency p50/p95.

Peak RSS (`ru_maxrss`) is read at start (before torch is imported), after the model loads, after the
full ingest, after the answering phase and at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import functools
import gc
import json
import logging
import os
import re
import resource
import shutil
import sys
import tempfile
import threading
import time
from array import array
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests.fakes and bench.ingest

DEFAULT_NOTES = Path("/work/shared/eval/crd3/notes")
QUICK_NOTES = REPO / "notes"
CRD3_QUESTIONS = REPO / "bench" / "crd3_questions.txt"
ANSWER_RATIO_TARGET = 1.5  # p95 time to answer while an ingest runs, against idle
TICK = 0.010  # the monitor's sleep
MACHINE_PAUSE = "the whole machine paused (another process saw it)"
ATTRIBUTE_MS = 50.0  # a wake-up this late is matched against what was running meanwhile
ANSWERS_IDLE = "answers alone"
PHASES = ("idle", "full ingest + questions", "answering only", ANSWERS_IDLE)
# The ingests measured against the idle answers: one session's reingest of the campaign being asked,
# and a second campaign (a copy of the notes) built from cold while the first answers, each run in
# this process, through the embedding worker and by another process.
REINGESTS = (
    "session reingest, in-process",
    "session reingest, worker process",
    "session reingest, another process",
)
SECOND = (
    "second campaign's full ingest, in-process",
    "second campaign's full ingest, worker process",
    "second campaign's full ingest, worker process, Chroma server",
    "second campaign's full ingest, another process",
)
INGEST_PHASES = REINGESTS + SECOND
ALL_PHASES = PHASES + INGEST_PHASES


IDLE_THREAD_FRAMES = (  # a thread whose top frame is one of these is waiting, not working
    ("threading.py", "wait"),
    ("queue.py", "get"),
    ("thread.py", "_worker"),  # concurrent.futures: blocked in its work queue
    ("selectors.py", "select"),
    ("threading.py", "_wait_for_tstate_lock"),
)


def log_progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Memory


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def current_rss_mib() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def rss_point() -> dict:
    return {"peak_mib": round(peak_rss_mib(), 1), "current_mib": round(current_rss_mib(), 1)}


def process_rss(pid: int | None) -> dict:
    """Peak (VmHWM) and current (VmRSS) memory of another process, e.g. the embedding worker."""
    out = {"peak_mib": None, "current_mib": None}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                out["peak_mib"] = round(int(line.split()[1]) / 1024, 1)
            elif line.startswith("VmRSS:"):
                out["current_mib"] = round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError, TypeError):
        pass
    return out


def worker_rss(worker) -> dict:
    return process_rss(worker.pid)


def worker_cpu_seconds(worker) -> float:
    """The worker process's CPU seconds so far (user + system), from /proc."""
    try:
        fields = Path(f"/proc/{worker.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, TypeError):
        return 0.0


# ---------------------------------------------------------------------------------------------
# Statistics


def pct(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(q / 100 * len(s) + 0.5)) - 1))
    return s[k]


def summary(values: list[float]) -> dict:
    return {
        "n": len(values),
        "p50": _r(pct(values, 50)),
        "p95": _r(pct(values, 95)),
        "p99": _r(pct(values, 99)),
        "max": _r(max(values) if values else None),
    }


def _r(x: float | None, nd: int = 2) -> float | None:
    return None if x is None else round(x, nd)


# ---------------------------------------------------------------------------------------------
# Where code runs: frames, described only after the run (describing costs file-system calls)

Frame = tuple[int, str, int, str]  # (id of the frame, file, line, function)


@functools.lru_cache(maxsize=None)
def _short(filename: str) -> str:
    p = Path(filename)
    parts = p.parts
    for marker in ("site-packages", f"python{sys.version_info[0]}.{sys.version_info[1]}"):
        if marker in parts:
            return "/".join(parts[parts.index(marker) + 1 :])
    try:
        return p.resolve().relative_to(REPO).as_posix()
    except (ValueError, OSError):
        return p.name


@functools.lru_cache(maxsize=None)
def _is_project(filename: str) -> bool:
    return _short(filename).split("/", 1)[0] in ("oracle", "bot")


def coro_frames(coro) -> list[Frame]:
    """The frames of a coroutine chain, outermost first (cheap: taken around every task step)."""
    out = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None) or getattr(coro, "ag_frame", None)
        if frame is None:
            break
        out.append((id(frame), frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_qualname))
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None) or getattr(coro, "ag_await", None)
    return out


def thread_stack(frame, limit: int = 60) -> list[Frame]:
    """A thread's stack, most recent call first. Another thread's frames are read while it runs: when
    it has left the frame being read (seen as a code object where a frame was), the stack ends there
    instead of the watchdog thread."""
    out = []
    try:
        while frame is not None and len(out) < limit:
            out.append((id(frame), frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_qualname))
            frame = frame.f_back
    except AttributeError:
        out.append((0, "?", 0, "(the thread left this frame while it was read)"))
    return out


def describe_step(before: list[Frame], after: list[Frame] | None) -> str:
    """What one task step ran: the deepest frame alive both before and after the step (its code ran
    from the line it resumed at to the line it stopped at), with the frames that returned or were called."""
    common = 0
    if after is not None:
        while common < min(len(before), len(after)) and before[common][0] == after[common][0]:
            common += 1
    if common == 0:  # the task finished, or a new chain: name the innermost project frame it resumed in
        proj = [f for f in before if _is_project(f[1])] or before[-1:]
        if not proj:
            return "?"
        _, file, line, func = proj[-1]
        return f"{_short(file)}:{line}→end {func}" + (" (task finished)" if after is None else "")
    _, file, line, func = before[common - 1]
    end = after[common - 1][2] if after else "?"
    text = f"{_short(file)}:{line}→{end} {func}"
    returned = [f[3] for f in before[common:]]
    called = [f[3] for f in after[common:]] if after else []
    if returned:
        text += f" (resumed in {returned[-1]})"
    if called:
        inner = [f for f in after[common:] if _is_project(f[1])]
        where = f"{inner[-1][3]} at {_short(inner[-1][1])}:{inner[-1][2]}" if inner else called[-1]
        text += f" (then awaited in {where})"
    return text


def blame(stack: list[Frame]) -> str:
    """A thread's top frame and, if different, its innermost project frame (stack: most recent first)."""
    if not stack:
        return "?"
    _, file, line, func = stack[0]
    text = f"{_short(file)}:{line} {func}"
    proj = next((f for f in stack if _is_project(f[1])), None)
    if proj is not None and proj[0] != stack[0][0]:
        text += f" ⟵ {_short(proj[1])}:{proj[2]} {proj[3]}"
    return text


def _idle_thread(stack: list[Frame]) -> bool:
    if not stack:
        return True
    _, file, _, func = stack[0]
    return any(file.endswith(f) and func.split(".")[-1] == fn for f, fn in IDLE_THREAD_FRAMES)


# ---------------------------------------------------------------------------------------------
# The loop probe: the 10 ms monitor, per-iteration callback timing, a stack-sampling watchdog


@dataclass
class SlowIteration:
    at: float  # seconds since the probe started
    ms: float  # callbacks' wall time in this loop iteration
    cpu_ms: float  # the loop thread's CPU time in them: far below `ms` means it waited for the GIL/CPU
    callbacks: int
    top: list[tuple[float, float, float, object]]  # (wall, CPU, GC ms, raw description) of its callbacks over 1 ms


# The benchmark's own records stay out of the garbage collector's way: a collection in this process
# walks every tracked object and every reference it holds, so tens of thousands of boxed floats in
# lists and a dict per answer would lengthen the very pauses it measures (they were a third of the
# references a full collection walked during a reingest). Numbers go into arrays (one object, no
# references), answers into slotted records whose timings are a tuple of plain values.


@dataclass
class PhaseData:
    lateness_ms: array = field(default_factory=lambda: array("d"))
    slow_iterations: list[SlowIteration] = field(default_factory=list)
    select_overshoot_ms: array = field(default_factory=lambda: array("d"))  # an idle poll returned this late
    samples: list[dict] = field(default_factory=list)  # the watchdog's stack samples
    # (generation, wall ms, on the loop thread, the collecting thread's CPU ms, objects collected)
    gc_pauses: list[tuple[int, float, bool, float, int]] = field(default_factory=list)
    late_ticks: list[tuple[float, float]] = field(default_factory=list)  # (due, woke) of wake-ups ≥ ATTRIBUTE_MS late
    seconds: float = 0.0


class LoopProbe:
    """Measures the loop's lateness and records what made it late.

    - the monitor task sleeps 10 ms and records how late it wakes;
    - every callback the loop runs is timed (what asyncio's debug mode does for
      `slow_callback_duration`, without debug mode's cost); an iteration of the loop whose callbacks
      took `slow_ms` or more keeps the steps over 1 ms, with the frames each task step ran in;
    - a watchdog thread samples every thread's stack (`sys._current_frames`) each `sample_ms` the
      monitor is overdue past `dump_after_ms`, naming the line that holds the loop even when the
      loop thread is waiting for the GIL or the CPU. (A `faulthandler.dump_traceback_later` dead-man
      switch re-armed on every tick was tried first: each re-arm joins a thread while holding the
      GIL, and on a busy 2-core machine that alone stalled the loop by up to 108 ms.)
    """

    def __init__(self, slow_ms: float, dump_after_ms: float | None, sample_ms: float = 25.0) -> None:
        self.slow_ms = slow_ms
        self.dump_after = dump_after_ms / 1000 if dump_after_ms else None
        self.sample_every = sample_ms / 1000
        self.phase = "setup"
        self.data: dict[str, PhaseData] = defaultdict(PhaseData)
        self.started = self._phase_started = time.perf_counter()
        self._stop = False
        self._task: asyncio.Task | None = None
        self._watchdog: threading.Thread | None = None
        self._beat: float | None = None
        self._iter_ms = 0.0
        self._iter_cpu = 0.0
        self._iter_n = 0
        self._iter_top: list[tuple[float, float, float, object]] = []
        self._gc_started: float | None = None
        self._gc_cpu_started = 0.0
        self._gc_loop_ms = 0.0  # garbage collection on the loop thread, running total
        self._main_ident = threading.main_thread().ident
        self._orig_run = None
        self._selector = None
        self.asyncio_debug: dict[str, list[str]] = defaultdict(list)
        self.intervals: list[tuple[str, float, float]] = []  # (what, start, end) of suspects, any thread
        self._unwrap: list = []

    def set_phase(self, name: str) -> None:
        now = time.perf_counter()
        self.data[self.phase].seconds += now - self._phase_started
        self.phase, self._phase_started = name, now
        log_progress(f"phase: {name}")

    async def _monitor(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stop:
            self._beat = due = time.perf_counter()
            target = loop.time() + TICK
            await asyncio.sleep(TICK)
            late = (loop.time() - target) * 1000
            data = self.data[self.phase]
            data.lateness_ms.append(late)
            if late >= ATTRIBUTE_MS:
                data.late_ticks.append((due + TICK, time.perf_counter()))
        self._beat = None

    def wrap(self, obj, name: str, kind) -> None:
        """Record when `obj.name` runs (in whatever thread); `kind` names it, or is a function of the
        call's arguments that does."""
        orig = getattr(obj, name)
        if getattr(orig, "_probe_wrapped", False):
            return
        intervals = self.intervals

        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return orig(*args, **kwargs)
            finally:
                intervals.append((kind(*args, **kwargs) if callable(kind) else kind, t, time.perf_counter()))

        wrapper._probe_wrapped = True
        had = name in getattr(obj, "__dict__", {})
        setattr(obj, name, wrapper)
        self._unwrap.append((obj, name, orig if had else None))

    def unwrap_all(self) -> None:
        for obj, name, orig in reversed(self._unwrap):
            if orig is None:
                with contextlib.suppress(AttributeError):
                    delattr(obj, name)
            else:
                setattr(obj, name, orig)
        self._unwrap.clear()

    def _watch(self) -> None:
        main_id = threading.main_thread().ident
        main_clock = time.pthread_getcpuclockid(main_id)
        me = threading.get_ident()
        beat_seen, next_sample, seen_wall, seen_cpu = None, 0.0, 0.0, 0.0
        while not self._stop:
            time.sleep(0.005)
            beat = self._beat
            if beat is None:
                continue
            now = time.perf_counter()
            late = now - beat - TICK
            if beat != beat_seen:
                beat_seen, next_sample = beat, self.dump_after
                seen_wall, seen_cpu = now, time.clock_gettime(main_clock)
            if late < next_sample:
                continue
            next_sample = late + self.sample_every
            wall = time.perf_counter() - seen_wall
            cpu_share = (time.clock_gettime(main_clock) - seen_cpu) / wall if wall > 0 else 0.0
            frames = sys._current_frames()
            main = thread_stack(frames.get(main_id))
            others = [thread_stack(f) for tid, f in frames.items() if tid not in (main_id, me)]
            self.data[self.phase].samples.append({
                "late_ms": late * 1000,
                "loop_cpu_share": cpu_share,  # of the loop thread since the watchdog saw it overdue
                "main": main,
                "others": [s for s in others if not _idle_thread(s)],
            })
            del frames

    def _install(self, loop: asyncio.AbstractEventLoop) -> None:
        probe = self
        orig_run = self._orig_run = asyncio.events.Handle._run

        def timed_run(handle):
            cb = handle._callback
            task = getattr(cb, "__self__", None)
            if isinstance(task, asyncio.Task):
                before = coro_frames(task.get_coro())
            else:
                task = before = None
            g = probe._gc_loop_ms
            c = time.thread_time()
            t = time.perf_counter()
            try:
                return orig_run(handle)
            finally:
                ms = (time.perf_counter() - t) * 1000
                cpu = (time.thread_time() - c) * 1000
                probe._iter_ms += ms
                probe._iter_cpu += cpu
                probe._iter_n += 1
                if ms >= 1.0:
                    if task is not None:
                        after = None if task.done() else coro_frames(task.get_coro())
                        probe._iter_top.append((ms, cpu, probe._gc_loop_ms - g, ("task", task.get_name(), before, after)))
                    else:
                        probe._iter_top.append((ms, cpu, probe._gc_loop_ms - g, ("callback", cb)))

        asyncio.events.Handle._run = timed_run
        selector = self._selector = loop._selector  # type: ignore[attr-defined]
        orig_select = selector.select

        def timed_select(timeout=None):
            probe._end_iteration()
            t = time.perf_counter()
            events = orig_select(timeout)
            if timeout is not None and timeout > 0 and not events:
                over = (time.perf_counter() - t - timeout) * 1000
                if over > 0:
                    probe.data[probe.phase].select_overshoot_ms.append(over)
            return events

        selector.select = timed_select

    def _gc_callback(self, what: str, info: dict) -> None:
        """Every garbage collection, in any thread: it holds the GIL throughout, so it stops the loop.
        Its wall time against the collecting thread's CPU time tells a long walk (or finalizers) from
        a thread the OS took off its core while it held the GIL."""
        if what == "start":
            self._gc_started = time.perf_counter()
            self._gc_cpu_started = time.thread_time()
        elif self._gc_started is not None:
            ms = (time.perf_counter() - self._gc_started) * 1000
            cpu_ms = (time.thread_time() - self._gc_cpu_started) * 1000
            self._gc_started = None
            on_loop = threading.get_ident() == self._main_ident
            if on_loop:
                self._gc_loop_ms += ms
            generation = info.get("generation", -1)
            self.data[self.phase].gc_pauses.append((generation, ms, on_loop, cpu_ms, info.get("collected", 0)))
            if generation == 2 or ms >= 5:
                end = time.perf_counter()
                self.intervals.append((f"GC gen {generation}", end - ms / 1000, end))

    def _end_iteration(self) -> None:
        if self._iter_ms >= self.slow_ms:
            top = sorted(self._iter_top, key=lambda x: -x[0])[:8]
            self.data[self.phase].slow_iterations.append(
                SlowIteration(time.perf_counter() - self.started, self._iter_ms, self._iter_cpu, self._iter_n, top)
            )
        self._iter_ms, self._iter_cpu, self._iter_n, self._iter_top = 0.0, 0.0, 0, []

    async def start(self, asyncio_debug: bool) -> None:
        loop = asyncio.get_running_loop()
        if asyncio_debug:
            loop.set_debug(True)
            loop.slow_callback_duration = self.slow_ms / 1000
            probe = self

            class Catch(logging.Handler):
                def emit(self, record: logging.LogRecord) -> None:
                    msg = record.getMessage()
                    if msg.startswith("Executing"):
                        probe.asyncio_debug[probe.phase].append(msg[:600])

            logging.getLogger("asyncio").addHandler(Catch(logging.WARNING))
        self._install(loop)
        gc.callbacks.append(self._gc_callback)
        self._task = asyncio.create_task(self._monitor(), name="loop-monitor")
        if self.dump_after is not None:
            self._watchdog = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
            self._watchdog.start()

    async def stop(self) -> None:
        self.set_phase("done")
        self._stop = True
        if self._task is not None:
            await self._task
        if self._watchdog is not None:
            self._watchdog.join()
        if self._gc_callback in gc.callbacks:
            gc.callbacks.remove(self._gc_callback)
        self.unwrap_all()
        if self._orig_run is not None:
            asyncio.events.Handle._run = self._orig_run
        if self._selector is not None:
            with contextlib.suppress(AttributeError):
                del self._selector.select


def describe(raw) -> str:
    if raw[0] == "task":
        _, name, before, after = raw
        prefix = "" if re.fullmatch(r"Task-\d+", name) else f"[{name}] "
        return prefix + describe_step(before, after)
    cb = raw[1]
    target = getattr(cb, "__func__", cb)
    code = getattr(target, "__code__", None)
    name = getattr(cb, "__qualname__", None) or type(cb).__name__
    return f"callback {name}" + (f" ({_short(code.co_filename)}:{code.co_firstlineno})" if code else "")


def summarize_iterations(iters: list[SlowIteration]) -> list[dict]:
    """The steps of slow loop iterations, grouped by what they ran: count, worst and total ms, and the
    loop thread's CPU ms in them (wall far above CPU: the step waited for the GIL or a core)."""
    by: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for it in iters:
        for ms, cpu, gc_ms, raw in it.top:
            by[describe(raw)].append((ms, cpu, gc_ms))
    rows = [
        {"where": d, "count": len(v), "max_ms": round(max(v)[0], 1), "cpu_ms_of_max": round(max(v)[1], 1),
         "gc_ms_of_max": round(max(v)[2], 1), "total_ms": round(sum(x[0] for x in v), 1),
         "total_cpu_ms": round(sum(x[1] for x in v), 1)}
        for d, v in by.items()
    ]
    rows.sort(key=lambda r: (-r["max_ms"], -r["total_ms"]))
    return rows[:8]


def attribute(late_ticks: list[tuple[float, float]], intervals: list[tuple[str, float, float]]) -> dict[str, int]:
    """For each late wake-up, what was running (in any thread) for at least half of its lateness."""
    counts: Counter = Counter()
    for due, woke in late_ticks:
        need = 0.5 * (woke - due)
        kinds = sorted({k for k, s, e in intervals if min(woke, e) - max(due, s) >= need})
        counts[" + ".join(kinds) or "nothing recorded"] += 1
    return dict(counts.most_common())


def machine_pauses_json(pauses: list[tuple[float, float]], late_ticks: list[tuple[float, float]]) -> dict:
    """How often the pause probe saw the machine pause, and how many of the loop's late wake-ups fell
    in one (by `attribute`'s rule): those were the machine's, not the loop's."""
    shared = attribute(late_ticks, [(MACHINE_PAUSE, s, e) for s, e in pauses])
    return {
        "machine_pauses": len(pauses),
        "machine_pause_max_ms": round(max(((e - s) * 1000 for s, e in pauses), default=0.0), 1),
        "late_ticks_in_machine_pause": shared.get(MACHINE_PAUSE, 0),
    }


def interval_stats(intervals: list[tuple[str, float, float]]) -> dict:
    by: dict[str, list[float]] = defaultdict(list)
    for k, s, e in intervals:
        by[k].append((e - s) * 1000)
    return {k: {"calls": len(v), "p50_ms": _r(pct(v, 50)), "max_ms": _r(max(v)), "total_s": round(sum(v) / 1000, 2)}
            for k, v in sorted(by.items())}


def gc_json(pauses: list[tuple[int, float, bool, float, int]]) -> dict:
    full = [p for p in pauses if p[0] == 2]
    return {
        "count": len(pauses),
        "total_ms": round(sum(p[1] for p in pauses), 1),
        "max_ms": _r(max((p[1] for p in pauses), default=0.0)),
        "gen2": len(full),
        "gen2_on_loop": sum(1 for p in full if p[2]),
        "gen2_p50_ms": _r(pct([p[1] for p in full], 50) or 0.0),
        "gen2_max_ms": _r(max((p[1] for p in full), default=0.0)),
        "gen2_cpu_p50_ms": _r(pct([p[3] for p in full], 50) or 0.0),  # the rest of the wall time: off its core
        "gen2_cpu_max_ms": _r(max((p[3] for p in full), default=0.0)),
        "gen2_collected_max": max((p[4] for p in full), default=0),
    }


def summarize_samples(samples: list[dict]) -> list[dict]:
    """The watchdog's samples grouped by where the loop thread stood. A loop thread in the selector's
    poll was waiting for the GIL or the CPU: then the busy other threads are named instead."""
    groups: Counter = Counter()
    worst: dict[str, float] = {}
    for s in samples:
        main = s["main"]
        running = s["loop_cpu_share"] >= 0.5
        if not running:
            others = sorted({blame(st) for st in s["others"]}) or ["no other busy thread"]
            key = (f"loop thread waiting for the GIL/a core (at {blame(main)}); busy threads: " + " | ".join(others))
        else:
            key = "loop thread running " + blame(main)
        groups[key] += 1
        worst[key] = max(worst.get(key, 0.0), s["late_ms"])
    return [{"where": k, "samples": n, "max_late_ms": round(worst[k], 1)} for k, n in groups.most_common(6)]


# ---------------------------------------------------------------------------------------------
# Questions


def load_questions(path: Path | None, notes_src: Path) -> tuple[list[str], str]:
    candidates = [path] if path else [notes_src / "questions.jsonl", CRD3_QUESTIONS]
    for p in candidates:
        if p is None or not p.is_file():
            continue
        out = []
        for line in p.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if p.suffix == ".jsonl":
                try:
                    q = json.loads(line).get("question", "")
                except ValueError:
                    continue
                if q:
                    out.append(q)
            else:
                out.append(line)
        if out:
            return out, str(p)
    raise SystemExit("no questions found (pass --questions FILE)")


_FIRST_LABEL = re.compile(r"^\[([^\]\n]+)\] \(", re.M)


class _OllamaProcess:
    """The fake Ollama in a process of its own, as a real Ollama is: its HTTP handling never holds
    this process's GIL, so the loop's stalls are the bot's own."""

    def __init__(self) -> None:
        import subprocess

        root = Path(__file__).resolve().parent.parent
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.ollama_server", "--port", "0", "--responder", "bench.load:fake_answer"],
            stdout=subprocess.PIPE, text=True, cwd=root, env=env,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http"):
            self.process.kill()
            raise RuntimeError("the fake Ollama process did not start")

    def stop_thread(self) -> None:  # the name FakeOllama's thread mode uses
        self.process.terminate()
        self.process.wait(10)


def fake_ollama(in_thread: bool):
    """The fake Ollama: a process of its own (the default), or a thread of this process."""
    if in_thread:
        from tests.fakes.ollama_server import FakeOllama

        return FakeOllama(models=["qwen2.5:14b"], responder=fake_answer).run_in_thread()
    return _OllamaProcess()


def fake_answer(request: dict) -> str:
    """An instant, plausible answer: two sentences citing the first fragment of the context."""
    user = next((m.get("content", "") for m in reversed(request.get("messages") or []) if m.get("role") == "user"), "")
    m = _FIRST_LABEL.search(user)
    if not m:
        return "The notes do not say."
    label = m.group(1)
    return (
        f"The notes describe this in some detail [{label}]. "
        f"The party remembered it differently afterwards, as the same note tells [{label}]."
    )


class Asked(NamedTuple):
    """One answer's record. Kept as a plain tuple of plain values (`Asker.records`), which the
    collector stops tracking once it has seen it: kept as objects, thousands of them were a fifth of
    the references a full collection walked while the second campaigns were built."""

    phase: str
    mode: str  # llm | passages | not_found | error
    ms: float
    timings: tuple[tuple[str, float], ...]  # (stage, ms)
    rerank: str = ""
    error: str = ""


class Asker:
    def __init__(self, questions: list[str]) -> None:
        self.questions = questions
        self.next = 0
        self.records: list[tuple] = []  # each an Asked's plain tuple (see `Asked`)

    def pick(self) -> str:
        q = self.questions[self.next % len(self.questions)]
        self.next += 1
        return q

    async def one(self, oracle, group: str) -> Asked:
        q = self.pick()
        t = time.perf_counter()
        try:
            answer = await oracle.ask(q)
            rec = Asked(group, answer.mode, (time.perf_counter() - t) * 1000, tuple((answer.trace.timings_ms or {}).items()),
                        (answer.trace.rerank or {}).get("reason", ""))
        except Exception as exc:  # ask() must never raise: count it
            rec = Asked(group, "error", (time.perf_counter() - t) * 1000, (), error=f"{type(exc).__name__}: {exc}"[:300])
        self.records.append(tuple(rec))
        return rec

    async def wave(self, oracle, n: int, group: str) -> list[Asked]:
        return list(await asyncio.gather(*(self.one(oracle, group) for _ in range(n))))

    async def stream(self, oracle, n: int, gap: float, stop: asyncio.Event, group: str) -> int:
        """Waves of n questions at once, `gap` seconds apart, until `stop` is set; returns the waves."""
        waves = 0
        while not stop.is_set():
            await self.wave(oracle, n, group)
            waves += 1
            try:
                await asyncio.wait_for(stop.wait(), gap)
            except asyncio.TimeoutError:
                pass
        return waves

    def group(self, name: str) -> list[Asked]:
        return [Asked._make(r) for r in self.records if r[0] == name]

    async def answer(self, oracle, group: str) -> Asked:
        """One question answered without a model (`answer_without_model`), timed."""
        q = self.pick()
        t = time.perf_counter()
        try:
            mode, timings = await answer_without_model(oracle, q)
            rec = Asked(group, mode, (time.perf_counter() - t) * 1000, tuple(timings.items()))
        except Exception as exc:  # a question must never fail: count it
            rec = Asked(group, "error", (time.perf_counter() - t) * 1000, (), error=f"{type(exc).__name__}: {exc}"[:300])
        self.records.append(tuple(rec))
        return rec

    async def answers(self, oracle, gap: float, stop: asyncio.Event, group: str) -> int:
        """Questions one at a time, `gap` seconds apart, until `stop` is set; returns how many."""
        n = 0
        while not stop.is_set():
            await self.answer(oracle, group)
            n += 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), gap)
        return n


async def answer_without_model(oracle, question: str) -> tuple[str, dict[str, float]]:
    """What a question costs before a model would write: retrieval (the three paths, fusion, the
    linked notes), the selection (reranker none) and the passages a reply without the model shows,
    all in one snapshot, as `Oracle.ask` reads them. (mode, stage timings in ms)."""
    from oracle.answer.results import PASSAGES_SHOWN

    async with oracle.index.snapshot() as store:
        retrieval = await oracle.search(question, store=store)
        if not retrieval.fused:
            return "not_found", dict(retrieval.timings_ms)
        selection = await oracle.select(retrieval, store=store)
        t = time.perf_counter()
        await oracle.excerpts(retrieval, selection.context.fragments[:PASSAGES_SHOWN])
        return "passages", dict(retrieval.timings_ms) | {"excerpts": (time.perf_counter() - t) * 1000}


def latency_json(recs: list[Asked]) -> dict:
    modes = Counter(r.mode for r in recs)
    stages: dict[str, list[float]] = defaultdict(list)
    for r in recs:
        for k, v in r.timings:
            stages[k].append(v)
    errors = Counter(r.error for r in recs if r.error)
    return {
        **summary([r.ms for r in recs]),
        "modes": dict(modes),
        "errors": dict(errors.most_common(5)),
        "rerank_reasons": dict(Counter(r.rerank for r in recs if r.rerank).most_common(3)),
        "stages_ms": {k: summary(v) for k, v in stages.items()},
    }


# ---------------------------------------------------------------------------------------------
# The run


async def run_ingest(index, label: str) -> tuple[object | None, float, str]:
    from oracle.index.ingest import ingest

    last = [0.0]

    def progress(p) -> None:
        now = time.perf_counter()
        if p.stage != "embed" or now - last[0] > 15 or p.done == p.total:
            last[0] = now
            log_progress(f"  {label}: {p.stage} {p.done}/{p.total}")

    started = time.perf_counter()
    try:
        report = await ingest(index, progress=progress, by="bench/load.py")
        return report, time.perf_counter() - started, ""
    except Exception as exc:
        return None, time.perf_counter() - started, f"{type(exc).__name__}: {exc}"


async def ingest_elsewhere(notes: Path, data: Path, nice: int, label: str) -> tuple[dict | None, float, str]:
    """`oracle ingest` in another process (as a shell or the reingest timer runs it), at CPU priority
    `nice`: (its JSON report, seconds, error)."""
    log_progress(f"  {label}: oracle ingest in another process (nice {nice})")
    command = [sys.executable, "-m", "oracle.cli", "ingest", "--notes", str(notes), "--data", str(data), "--json"]
    if nice:
        command = ["nice", "-n", str(nice), *command]
    env = {**os.environ, "ORACLE_ANNOTATE": "false", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE, env=env, cwd=data.parent)
    out, err = await process.communicate()
    seconds = time.perf_counter() - started
    if process.returncode:
        return None, seconds, f"oracle ingest exited with {process.returncode}: {err.decode()[-300:].strip()}"
    return json.loads(out.decode().strip().splitlines()[-1]), seconds, ""


async def measure(args) -> dict:
    from bench.ingest import EDIT_SENTENCE, PauseProbe, contention, copy_notes, cpu_sample, edit_one_session, machine
    from oracle.index.seam import search_concurrency
    from tests.chroma_server import ChromaServer

    rss = {"start_before_torch": rss_point()}
    questions, questions_from = load_questions(args.questions, args.notes_dir)
    n = args.concurrency

    with tempfile.TemporaryDirectory(prefix="oracle-load-") as tmp:
        tmp_path = Path(tmp)
        probe = LoopProbe(args.slow_ms, None if args.no_dump else args.dump_after_ms)
        await probe.start(args.asyncio_debug)
        machine_probe = PauseProbe(tmp_path)

        fake = fake_ollama(args.ollama_in_thread)
        try:
            import torch

            from oracle.index.index import Index
            from oracle.index.seam import Embeddings
            from oracle.oracle import Oracle
            from oracle.settings import Settings

            notes = tmp_path / "notes"
            copy_notes(args.notes_dir, notes)

            def settings_for(reranker: str) -> Settings:
                return Settings(
                    _env_file=None,
                    notes_dir=notes,
                    data_dir=tmp_path / "data",
                    ollama_host=fake.url,
                    annotate=False,
                    reranker=reranker,
                    llm_concurrency=args.llm_concurrency or n,
                )

            cpu_before = cpu_sample()
            load_start = os.getloadavg()[0]
            index = Index(settings_for("none"))
            try:
                # Start as the bot does: the model, then both stores, before any question.
                t = time.perf_counter()
                embedder = await index.embedder()
                await embedder.encode(["warm-up: the first call pays for lazy initialisation"] * 4)
                model_seconds = time.perf_counter() - t
                vectors = await index.vectors()
                rss["after_model_load"] = rss_point()
                if args.gc_freeze:  # what bot/__main__.py does once it has loaded everything
                    gc.collect()
                    gc.freeze()
                if args.switch_interval_ms:
                    sys.setswitchinterval(args.switch_interval_ms / 1000)
                worker_threads = await asyncio.to_thread(torch.get_num_threads)
                oracle = Oracle(index)
                worker = None
                if args.worker:
                    from oracle.index.worker import EmbedWorker

                    # Started as the bot starts it, before anything is measured: once, the model loaded there.
                    worker = EmbedWorker(settings_for("none").embed_model)
                    worker.start()
                    await worker.ready()
                    await worker.encode(["warm-up: the first call pays for lazy initialisation"] * 4)
                    rss["worker_after_model_load"] = worker_rss(worker)
                llm_index = Index(settings_for("llm"), embedder=embedder)
                llm_oracle = Oracle(llm_index)
                # What may hold the GIL or a core while the loop is late: timed in whatever thread runs it.
                def probe_chroma(vs) -> None:
                    probe.wrap(vs, "upsert", "Chroma upsert")
                    probe.wrap(vs, "query", "Chroma query")
                    probe.wrap(vs, "all_ids", "Chroma all_ids")
                    probe.wrap(vs, "delete", "Chroma delete")

                for vs in (vectors.in_thread, (await llm_index.vectors()).in_thread):
                    probe_chroma(vs)
                probe.wrap(embedder.in_thread, "encode", lambda texts, *a, **k: "encode 1 text" if len(texts) == 1 else "encode batch")
                probe.wrap(embedder, "windows", "tokenize windows")
                import oracle.index.ingest as ingest_mod
                import oracle.oracle as answer_mod

                probe.wrap(answer_mod, "SecretGuard", "SecretGuard build")
                # A question's own CPU steps, off the loop but wanting the interpreter lock.
                probe.wrap(answer_mod, "fit_answer_prompt", "fit prompt")
                probe.wrap(answer_mod, "_checked", "check answer")
                import oracle.retrieve.entity as entity_mod

                probe.wrap(entity_mod, "EntityMatcher", "EntityMatcher build")  # built where it is named
                probe.wrap(ingest_mod, "scan_notes", "scan notes")
                probe.wrap(ingest_mod, "chunk_all", "chunk notes")
                # Its inner step, not `build_compendium` itself: that one is sent to the embedding worker
                # by reference (pickled), which a wrapper defined here cannot be. In the worker it runs
                # unwrapped, off this process, as it should be: it holds none of this process's locks.
                probe.wrap(ingest_mod, "_compendium", "build Compendium")
                asker = Asker(questions)
                await asyncio.sleep(0.5)  # the setup's own steps stay out of the idle phase

                # 1. Idle baseline.
                probe.set_phase(PHASES[0])
                await asyncio.sleep(args.idle)

                async def ingest_while_asking(phase: str, label: str, index_=None):
                    """Ingest (`index_`, else the index asked) with questions to the first index arriving
                    all along: (report, seconds, error, waves)."""
                    probe.set_phase(phase)
                    stop = asyncio.Event()
                    streaming = asyncio.create_task(asker.stream(oracle, n, args.gap, stop, phase))
                    report, seconds, error = await run_ingest(index_ or index, label)
                    stop.set()
                    return report, seconds, error, await streaming

                # 2. Full ingest of a cold index, questions arriving all along.
                full_report, full_seconds, full_error, full_waves = await ingest_while_asking(PHASES[1], "full ingest")
                if full_error:
                    log_progress(f"full ingest failed: {full_error}; ingesting again without questions")
                    full_report, _, retry_error = await run_ingest(index, "full ingest (retry)")
                    if retry_error:
                        raise SystemExit(f"the ingest failed twice: {retry_error}")
                rss["after_full_ingest"] = rss_point()

                # 3. Answering only: latency, 1 at a time and n at once, reranker none and llm.
                probe.set_phase(PHASES[2])
                for _ in range(min(5, len(questions))):
                    await asker.one(oracle, "warm-up")
                    await asker.one(llm_oracle, "warm-up")
                latency_groups = {}
                for name, orc in (("none", oracle), ("llm", llm_oracle)):
                    for _ in range(args.serial):
                        await asker.one(orc, f"{name} x1")
                    t = time.perf_counter()
                    for _ in range(args.waves):
                        await asker.wave(orc, n, f"{name} x{n}")
                    latency_groups[name] = {
                        "x1": f"{name} x1",
                        f"x{n}": f"{name} x{n}",
                        "throughput_qps": round(args.waves * n / (time.perf_counter() - t), 2),
                    }
                rss["after_load_phase"] = rss_point()

                # 4. Answers alone: the idle baseline of every ingest below.
                probe.set_phase(ANSWERS_IDLE)
                stop = asyncio.Event()
                answering = asyncio.create_task(asker.answers(oracle, args.answer_gap, stop, ANSWERS_IDLE))
                await asyncio.sleep(args.answer_idle)
                stop.set()
                await answering
                rss["end"] = rss_point()

                async def while_answering(phase: str, work) -> tuple:
                    """`work()` (an ingest: (report, seconds, error)) while the first campaign answers one
                    question at a time: (report, seconds, error, answers)."""
                    probe.set_phase(phase)
                    stop = asyncio.Event()
                    answering = asyncio.create_task(asker.answers(oracle, args.answer_gap, stop, phase))
                    try:
                        report, seconds, error = await work()
                    finally:
                        stop.set()
                        count = await answering
                        probe.set_phase("between phases")
                    return report, seconds, error, count

                async def reingests(label: str, run) -> tuple:
                    """`--reingests` edits of one session, each reingested by `run()`: the windows summed."""
                    nonlocal edit
                    total, windows, reports = 0.0, 0, []
                    for k in range(args.reingests):
                        edit = await asyncio.to_thread(edit_one_session, notes)
                        report, seconds, error = await run(f"{label} {k + 1}/{args.reingests}")
                        total += seconds
                        if error:
                            return None, total, error
                        reports.append(report)
                        windows += report["windows_embedded"] if isinstance(report, dict) else report.windows_embedded
                    return {"windows_embedded": windows, "runs": len(reports)}, total, ""

                # 5. A session's reingest, in this process, through the worker, by another process.
                edit = None
                side: dict[str, tuple] = {}
                side[REINGESTS[0]] = await while_answering(
                    REINGESTS[0], lambda: reingests("reingest", lambda label: run_ingest(index, label)))
                if worker is not None:
                    embedder.worker = worker
                    try:
                        side[REINGESTS[1]] = await while_answering(
                            REINGESTS[1], lambda: reingests("reingest (worker)", lambda label: run_ingest(index, label)))
                    finally:
                        embedder.worker = None
                fresh = None
                if args.other_process:
                    before = {c.id for c in await (await index.store()).chunk_texts()}
                    side[REINGESTS[2]] = await while_answering(
                        REINGESTS[2], lambda: reingests("reingest (another process)", lambda label: ingest_elsewhere(
                            notes, tmp_path / "data", args.other_nice, label)))
                    # The next question finds what the other process committed through every path.
                    store = await index.store()
                    added = {c.id for c in await store.chunk_texts()} - before
                    retrieval = await oracle.search(EDIT_SENTENCE)
                    fresh = {path: sorted(added & {h.chunk.id for h in hits}) != []
                             for path, hits in retrieval.paths.items() if path in ("keyword", "semantic")}

                # 6. A second campaign built from cold while the first answers.
                runs = [(SECOND[0], None, False)]
                if worker is not None:
                    runs.append((SECOND[1], worker, False))
                    if args.chroma_server:
                        runs.append((SECOND[2], worker, True))
                for phase, via, server in runs:
                    probe.set_phase("between phases")  # the setup's waits are the benchmark's, not a stall
                    folder = tmp_path / ("second-" + phase.rsplit(", ", 1)[-1].replace(" ", "-"))
                    chroma = await asyncio.to_thread(ChromaServer, tmp_path / "chroma-server") if server else None
                    update = {"data_dir": folder} | ({"chroma_url": chroma.url} if chroma else {})
                    second = Index(settings_for("none").model_copy(update=update),
                                   embedder=Embeddings(embedder.in_thread, worker=via))
                    try:
                        probe_chroma((await second.vectors()).in_thread)
                        side[phase] = await while_answering(
                            phase, lambda second=second, phase=phase: run_ingest(second, phase))
                    finally:
                        await second.close()
                        if chroma is not None:
                            await asyncio.to_thread(chroma.stop)
                if args.other_process:
                    side[SECOND[3]] = await while_answering(SECOND[3], lambda: ingest_elsewhere(
                        notes, tmp_path / "second-another-process", args.other_nice, SECOND[3]))
                if worker is not None:
                    rss["worker_end"] = worker_rss(worker)
                rss["end_with_second_campaigns"] = rss_point()
            finally:
                probe.set_phase("done")  # closing is not a phase: its waits are nobody's stall
                await index.close()
                if "llm_index" in locals():
                    await llm_index.close()
                if locals().get("worker") is not None:
                    worker_cpu = worker_cpu_seconds(worker)
                    await worker.close()
        finally:
            await probe.stop()
            fake.stop_thread()
            machine_probe.stop()
        # A late wake-up inside a pause another process saw too was the machine's, not the loop's.
        machine_pauses = machine_probe.pauses()
        probe.intervals += [(MACHINE_PAUSE, start, end) for start, end in machine_pauses]
        after = cpu_sample()
        if args.worker:  # the worker process is ours: its CPU is not another process's
            after = (*after[:3], after[3] + locals().get("worker_cpu", 0.0))
        busy = contention(cpu_before, after)

    def phase_json(name: str) -> dict:
        d = probe.data[name]
        s = summary(d.lateness_ms)
        return {
            "seconds": round(d.seconds, 1),
            "ticks": s["n"],
            "stall_p50_ms": s["p50"],
            "stall_p99_ms": s["p99"],
            "stall_max_ms": s["max"],
            "ticks_50ms_late": sum(1 for x in d.lateness_ms if x >= ATTRIBUTE_MS),
            "select_overshoot_max_ms": _r(max(d.select_overshoot_ms) if d.select_overshoot_ms else 0.0),
            "slow_iterations": len(d.slow_iterations),
            "worst_iterations": [
                {"at_s": round(it.at, 2), "ms": round(it.ms, 1), "cpu_ms": round(it.cpu_ms, 1), "callbacks": it.callbacks,
                 "top": [[round(ms, 1), round(cpu, 1), round(g, 1), describe(raw)] for ms, cpu, g, raw in it.top[:4]]}
                for it in sorted(d.slow_iterations, key=lambda it: -it.ms)[:3]
            ],
            "blockers": summarize_iterations(d.slow_iterations),
            "gc": gc_json(d.gc_pauses),
            "late_ticks": len(d.late_ticks),
            "late_ticks_overlapping": attribute(d.late_ticks, probe.intervals),
            "stack_samples": len(d.samples),
            "stacks": summarize_samples(d.samples),
            "asyncio_debug": probe.asyncio_debug.get(name, [])[:10],
        }

    def ingest_json(report, seconds: float, error: str, asked: int, group: str) -> dict:
        """An ingest phase: the ingest, and the questions answered meanwhile (`group`)."""
        out = {"seconds": round(seconds, 1), "error": error, "asked": asked,
               "questions": latency_json(asker.group(group))}
        if isinstance(report, dict):  # another process's JSON report, or the reingests' sum
            out |= {key: report[key] for key in ("chunks", "windows_embedded", "entities", "runs") if key in report}
        elif report is not None:
            out |= {"chunks": report.chunks, "windows_embedded": report.windows_embedded, "entities": report.entities}
        return out

    idle = latency_json(asker.group(ANSWERS_IDLE))
    ingests = {}
    for phase in INGEST_PHASES:
        if phase in side:
            data = ingest_json(*side[phase], phase)
            p95 = data["questions"]["p95"]
            data["p95_vs_idle"] = _r(p95 / idle["p95"]) if p95 and idle["p95"] else None
            data["pass"] = data["p95_vs_idle"] is not None and data["p95_vs_idle"] <= ANSWER_RATIO_TARGET
            ingests[phase] = data
    all_ticks = [x for name in ALL_PHASES for x in probe.data[name].lateness_ms]
    return {
        "notes_dir": str(args.notes_dir),
        "questions_from": questions_from,
        "questions": len(questions),
        "concurrency": n,
        "llm_concurrency": args.llm_concurrency or n,
        "search_concurrency": search_concurrency(settings_for("none")),
        "asyncio_debug": args.asyncio_debug,
        "gc_freeze": args.gc_freeze,
        "gc_frozen_objects": gc.get_freeze_count(),
        "answer_gap": args.answer_gap,
        "other_nice": args.other_nice,
        "machine": {
            **machine(worker_threads, load_start),
            "switch_interval_ms": sys.getswitchinterval() * 1000,
            **busy,
            **machine_pauses_json(machine_pauses, [t for name in ALL_PHASES for t in probe.data[name].late_ticks]),
        },
        "model_load_seconds": round(model_seconds, 2),
        "suspects": interval_stats(probe.intervals),
        "stall": {name: phase_json(name) for name in ALL_PHASES if name in PHASES or name in side}
        | {"all phases": summary(all_ticks)},
        "full_ingest": ingest_json(full_report, full_seconds, full_error, full_waves, PHASES[1]),
        "edit": {"path": edit.path, "line": edit.line, "session": edit.session} if edit else None,
        "latency": {
            name: {
                "x1": latency_json(asker.group(g["x1"])),
                f"x{n}": latency_json(asker.group(g[f"x{n}"])),
                "throughput_qps": g["throughput_qps"],
            }
            for name, g in latency_groups.items()
        },
        "answers_idle": idle,
        "ingests": ingests,
        "other_process_edit_found": fresh,
        "rss": rss,
    }


# ---------------------------------------------------------------------------------------------
# Several campaigns in one process (--campaigns 1,5,20)


async def build_template(args, root: Path) -> dict:
    """One campaign's notes copy and its index, built once; every campaign of every count reuses them."""
    from bench.ingest import copy_notes
    from oracle.index.index import Index
    from oracle.settings import Settings

    notes, data = root / "notes", root / "template"
    copy_notes(args.notes_dir, notes)
    settings = Settings(_env_file=None, notes_dir=notes, data_dir=data, ollama_host="http://127.0.0.1:9", annotate=False)
    async with Index(settings) as index:
        report, seconds, error = await run_ingest(index, "template ingest")
    if error:
        raise SystemExit(f"the template ingest failed: {error}")
    return {"chunks": report.chunks, "windows": report.windows_embedded, "seconds": round(seconds, 1)}


def fill_from_template(root: Path, embeddings, settings_of: list) -> None:
    """Each campaign's collections on the Chroma server, copied from the template's embedded store:
    the same notes, so the same windows (a copy stands for an ingest, as the SQLite files' copy does)."""
    import numpy as np

    from oracle.index.index import collection_name
    from oracle.index.vectors import VectorStore
    from oracle.settings import Settings

    template = Settings(_env_file=None, notes_dir=root / "notes", data_dir=root / "template")
    source = VectorStore(template.chroma_path, collection_name(embeddings, template))
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
    fake = fake_ollama(args.ollama_in_thread)
    server = None
    try:
        if args.campaigns_store == "server":
            from tests.chroma_server import ChromaServer

            server = await asyncio.to_thread(ChromaServer, root / f"chroma-server-{count}")
        import oracle.index.embed as embed_mod
        from oracle.campaigns import Campaign, Campaigns
        from oracle.index.library import Library
        from oracle.oracle import Oracle
        from oracle.settings import Settings

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
            campaigns.append(Campaign(f"c{i}", root / "notes", data, channels=(1000 + i,)))
        settings = Settings(_env_file=None, notes_dir=root / "notes", data_dir=root / f"base-{count}",
                            ollama_host=fake.url, annotate=False, reranker="none",
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
    from bench.ingest import PauseProbe
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
        report = await ingest(fresh, by="bench/load.py", progress=progress)
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
            log_progress(f"{count} campaign(s) in one process, {store} Chroma")
            out = root / f"result-{count}-{store}.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), str(args.notes_dir), "--campaigns-child", str(count),
                   "--campaigns-store", store,
                   "--campaigns-root", str(root), "--save", str(out), "--concurrency", str(args.concurrency),
                   "--serial", str(args.serial), "--waves", str(args.waves), "--worker" if args.worker else "--no-worker",
                   "--campaigns-ingest" if args.campaigns_ingest else "--no-campaigns-ingest",
                   "--switch-interval-ms", str(args.switch_interval_ms)]
            if args.questions:
                cmd += ["--questions", str(args.questions)]
            proc = await asyncio.create_subprocess_exec(*cmd)
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


def print_campaigns_table(r: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=170)
    n = r["concurrency"]
    tpl = r["template"]
    t = Table(title=f"Campaigns in one process: {r['notes_dir']} each ({tpl['chunks']} chunks, {tpl['windows']} windows)")
    for name in ("campaigns", "Chroma", "models loaded (bot process)", "open s", "peak RSS after open, MiB",
                 "peak RSS at the end, MiB", "RSS at the end, MiB", "embedding worker peak RSS, MiB",
                 "Chroma server RSS now / peak, MiB", "ask p50 / p95 ms, 1 at a time",
                 f"ask p50 / p95 ms, {n} at once"):
        t.add_column(name, justify="right")
    for run in r["runs"]:
        w = run["worker_rss"]
        server = run.get("chroma_server_rss") or {}
        t.add_row(str(run["campaigns"]), run.get("store", "embedded"), str(run["models_loaded_in_process"]),
                  f"{run['open_seconds']:.1f}",
                  f"{run['rss']['after_open']['peak_mib']:,.0f}", f"{run['rss']['end']['peak_mib']:,.0f}",
                  f"{run['rss']['end']['current_mib']:,.0f}",
                  f"{w['peak_mib']:,.0f}" if w and w["peak_mib"] else "—",
                  f"{server['current_mib']:,.0f} / {server['peak_mib']:,.0f}" if server.get("peak_mib") else "—",
                  f"{_f(run['x1']['p50'])} / {_f(run['x1']['p95'])}", f"{_f(run[f'x{n}']['p50'])} / {_f(run[f'x{n}']['p95'])}")
    runs = r["runs"]
    if any(run.get("ingest_beside") for run in runs):
        t2 = Table(title=f"One more campaign built from cold while the others answer {n} questions at once, a second apart")
        for name in ("campaigns answering", "Chroma", "windows", "seconds", "stall p50 / p99 / max, ms", "wake-ups ≥ 50 ms late",
                     "machine pauses (max ms) / late wake-ups in one", "full GCs, longest ms", "questions p50 / p95, ms", "bot RSS before → after, MiB",
                     "worker RSS now / peak, MiB"):
            t2.add_column(name, justify="right")
        for run in runs:
            d = run.get("ingest_beside")
            if not d:
                continue
            st, q, w = d["stall"], d["questions"], d.get("worker_rss") or {}
            t2.add_row(str(run["campaigns"]), run.get("store", "embedded"), f"{d['windows']:,}", f"{d['seconds']:.0f}",
                       f"{_f(st['p50'])} / {_f(st['p99'])} / {_f(st['max'])}", f"{d['late_50ms']} of {st['n']:,}",
                       f"{d.get('machine_pauses', '?')} ({_f(d.get('machine_pause_max_ms'))}) / "
                       f"{d.get('late_ticks_in_machine_pause', '?')}",
                       f"{d.get('full_collections', '?')}, {_f(d.get('full_collection_max_ms', 0))}",
                       f"{_f(q['p50'])} / {_f(q['p95'])}",
                       f"{d['rss_before']['current_mib']:,.0f} → {d['rss_after']['current_mib']:,.0f}",
                       f"{w.get('current_mib') or 0:,.0f} / {w.get('peak_mib') or 0:,.0f}")
        console.print(t2)
    captions = []
    for store in dict.fromkeys(run.get("store", "embedded") for run in runs):
        same = [run for run in runs if run.get("store", "embedded") == store]
        a, b = same[0], same[-1]
        if b["campaigns"] > a["campaigns"]:
            per = (b["rss"]["end"]["current_mib"] - a["rss"]["end"]["current_mib"]) / (b["campaigns"] - a["campaigns"])
            captions.append(f"With {store} Chroma each further campaign adds about {per:,.0f} MiB to the bot process "
                            f"(RSS at the end, {a['campaigns']} → {b['campaigns']} campaigns).")
    if captions:
        t.caption = " ".join(captions) + " The model is loaded once in the bot and once in the embedding worker."
    console.print(t)


# ---------------------------------------------------------------------------------------------
# Output


def _f(x, nd: int = 1) -> str:
    return "" if x is None else f"{x:,.{nd}f}"


def print_table(r: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    from bench.ingest import machine_line

    console = Console() if sys.stdout.isatty() else Console(width=170)
    m = r["machine"]
    console.print(f"{machine_line(m)}; GIL switch interval {m['switch_interval_ms']:g} ms")
    if m.get("other_processes_share") is not None:
        share = m["other_processes_share"]
        note = " [red]- the machine was busy: numbers are unreliable[/]" if share > 0.05 else ""
        console.print(f"During the run other processes used {share:.1%} of all cores, steal {m['steal_share']:.1%}{note}")
    if m.get("machine_pauses") is not None:
        console.print(f"A process of its own saw the machine pause {m['machine_pauses']} times for 30 ms or more "
                      f"(longest {m['machine_pause_max_ms']:g} ms); a late wake-up inside one says so below")
    console.print(
        f"Notes: {r['notes_dir']}; {r['questions']} questions from {r['questions_from']}; "
        f"{r['concurrency']} at once; LLM: fake Ollama answering instantly (llm_concurrency {r['llm_concurrency']}); "
        f"searches at once: {r.get('search_concurrency', '?')}; "
        f"model loaded + warmed in {r['model_load_seconds']:.1f} s"
        + ("; [yellow]asyncio debug mode on: latencies inflated[/]" if r["asyncio_debug"] else "")
        + (f"; [yellow]gc.freeze() after startup ({r['gc_frozen_objects']:,} objects)[/]" if r.get("gc_freeze") else "")
    )

    verdict = lambda ok: "[green]PASS[/]" if ok else "[red]MISS[/]"  # noqa: E731
    t = Table(title="Oracle load benchmark", show_lines=False)
    for name, justify in [("Measure", "left"), ("n", "right"), ("p50", "right"), ("p95", "right"),
                          ("p99", "right"), ("max", "right"), ("Target", "right"), ("Result", "center")]:
        t.add_column(name, justify=justify)
    n = r["concurrency"]

    # 1. The time to answer while notes are indexed, against idle
    t.add_row(f"[bold]1. Time to answer without a model (retrieval + passages), ms: one question at a time, "
              f"{r['answer_gap']:g} s apart[/]", "asks", "", "", "", "", "", "")
    idle = r["answers_idle"]
    t.add_row(f"   {ANSWERS_IDLE} (nothing indexed)", str(idle["n"]), _f(idle["p50"]), _f(idle["p95"]), _f(idle["p99"]),
              _f(idle["max"]), "", "")

    def retrieval_row(q: dict) -> None:
        """The retrieval's share (the trace's total: the three paths to the linked notes), for information."""
        v, base = q["stages_ms"].get("total"), idle["stages_ms"].get("total")
        if v:
            ratio = f"[dim]{v['p95'] / base['p95']:.2f}×[/]" if base and base["p95"] else ""
            t.add_row("     [dim]of which retrieval[/]", f"[dim]{v['n']}[/]", f"[dim]{_f(v['p50'])}[/]",
                      f"[dim]{_f(v['p95'])}[/]", f"[dim]{_f(v['p99'])}[/]", f"[dim]{_f(v['max'])}[/]", "", ratio)

    retrieval_row(idle)
    for name, data in r["ingests"].items():
        q = data["questions"]
        what = f"{data['seconds']:.1f} s, {data.get('windows_embedded', '?')} windows"
        if data.get("runs"):
            what += f", {data['runs']} reingests"
        if name.endswith("another process"):
            what += f", nice {r['other_nice']}"
        ratio = data.get("p95_vs_idle")
        result = f"{ratio:.2f}× {verdict(data['pass'])}" if ratio is not None else verdict(False)
        t.add_row(f"   {name} ({what})", str(q["n"]), _f(q["p50"]), _f(q["p95"]), _f(q["p99"]), _f(q["max"]),
                  f"p95 ≤ {ANSWER_RATIO_TARGET:g}× idle", result)
        retrieval_row(q)
        for err, count in q["errors"].items():
            t.add_row(f"     [red]error ×{count}: {err}[/]", "", "", "", "", "", "", "")
    found = r.get("other_process_edit_found")
    if found is not None:
        ok = bool(found) and all(found.values())
        paths = ", ".join(f"{path} {'yes' if hit else 'no'}" for path, hit in found.items())
        t.add_row(f"   the next question after another process's reingest finds its edit ({paths})", "", "", "", "",
                  "", "every path", verdict(ok))
    for label, error in failed_phases(r):
        t.add_row(f"   [red]{label} failed: {error}[/]", "", "", "", "", "", "", "")

    # 2. Stalls, for information
    t.add_row("[bold]2. Event-loop stall, ms (10 ms sleep, lateness), for information[/]", "ticks", "", "", "", "", "", "")
    for name in ALL_PHASES:
        s = r["stall"].get(name)
        if s is None:
            continue
        extra = ""
        if name == PHASES[1]:
            fi = r["full_ingest"]
            extra = f" ({fi['seconds']:.0f} s, {fi.get('windows_embedded', '?')} windows, {fi['asked']} waves of {n})"
        elif name in (PHASES[0], ANSWERS_IDLE):
            extra = f" ({s['seconds']:.0f} s)"
        t.add_row(f"   {name}{extra}", f"{s['ticks']:,}", _f(s["stall_p50_ms"]), "", _f(s["stall_p99_ms"]),
                  _f(s["stall_max_ms"]), "", "")
        g = s["gc"]
        if g["gen2"]:
            t.add_row(f"     [dim]full (gen 2) garbage collections ×{g['gen2']} ({g['gen2_on_loop']} on the loop thread), "
                      f"pause p50 {g['gen2_p50_ms']:.0f} ms (CPU {g.get('gen2_cpu_p50_ms', 0):.0f}, max "
                      f"{g.get('gen2_cpu_max_ms', 0):.0f}); all GC {g['total_ms']:,.0f} ms in {g['count']:,} runs[/]",
                      "", "", "", "", f"[dim]{g['gen2_max_ms']:.0f}[/]", "", "")
        if s["late_ticks"]:
            what = "; ".join(f"{k} ×{v}" for k, v in list(s["late_ticks_overlapping"].items())[:4])
            t.add_row(f"     [dim]wake-ups ≥ {ATTRIBUTE_MS:.0f} ms late ×{s['late_ticks']}, running meanwhile: {what}[/]",
                      "", "", "", "", "", "", "")
        for b in s["blockers"][:3]:
            gcn = f", GC {b['gc_ms_of_max']:.0f}" if b["gc_ms_of_max"] >= 1 else ""
            t.add_row(f"     [dim]slow step ×{b['count']} (worst: CPU {b['cpu_ms_of_max']:.0f} ms{gcn}): {b['where']}[/]",
                      "", "", "", "", f"[dim]{b['max_ms']:.0f}[/]", "", "")
        for st in s["stacks"][:1]:
            t.add_row(f"     [dim]stack sampled ×{st['samples']}: {st['where']}[/]", "", "", "", "",
                      f"[dim]{st['max_late_ms']:.0f}[/]", "", "")
        if s["select_overshoot_max_ms"] and s["select_overshoot_max_ms"] >= 20:
            t.add_row(f"     [dim]idle poll woke late by up to {s['select_overshoot_max_ms']:.0f} ms (GIL/CPU wait)[/]",
                      "", "", "", "", "", "", "")
    a = r["stall"]["all phases"]
    t.add_row("   all phases", f"{a['n']:,}", _f(a["p50"]), _f(a["p95"]), _f(a["p99"]), _f(a["max"]), "", "")

    # 3. Latency
    t.add_row("[bold]3. Oracle.ask wall time, ms (LLM instant)[/]", "asks", "", "", "", "", "", "")
    for name, groups in r["latency"].items():
        for key in ("x1", f"x{n}"):
            g = groups[key]
            modes = ", ".join(f"{k} {v}" for k, v in sorted(g["modes"].items()))
            tp = f", {groups['throughput_qps']:.1f} q/s" if key != "x1" else ""
            t.add_row(f"   reranker={name}, {key[1:]} at a time ({modes}{tp})", str(g["n"]), _f(g["p50"]), _f(g["p95"]),
                      _f(g["p99"]), _f(g["max"]), "", "")
        reasons = groups["x1"]["rerank_reasons"]
        if name == "llm" and reasons:
            t.add_row(f"     [dim]rerank: {next(iter(reasons))}[/]", "", "", "", "", "", "", "")
    g = r["full_ingest"]["questions"]
    modes = ", ".join(f"{k} {v}" for k, v in sorted(g["modes"].items()))
    t.add_row(f"   reranker=none, {n} at a time during the full ingest ({modes})", str(g["n"]), _f(g["p50"]), _f(g["p95"]),
              _f(g["p99"]), _f(g["max"]), "", "")
    for err, count in g["errors"].items():
        t.add_row(f"     [red]error ×{count}: {err}[/]", "", "", "", "", "", "", "")
    order = ["expand", "keyword", "semantic", "entity", "fusion", "load", "rerank", "answer", "total"]
    for key in ("x1", f"x{n}"):
        stages = r["latency"]["none"][key]["stages_ms"]
        t.add_row(f"   [dim]stages (trace timings_ms), reranker=none, {key[1:]} at a time:[/]", "", "", "", "", "", "", "")
        for st in sorted(stages, key=lambda s: order.index(s) if s in order else 99):
            v = stages[st]
            t.add_row(f"     [dim]{st}[/]", f"[dim]{v['n']}[/]", f"[dim]{_f(v['p50'], 2)}[/]", f"[dim]{_f(v['p95'], 2)}[/]",
                      f"[dim]{_f(v['p99'], 2)}[/]", f"[dim]{_f(v['max'], 2)}[/]", "", "")

    # 4. Memory
    t.add_row("[bold]4. Peak RSS, MiB (ru_maxrss; current RSS in brackets)[/]", "", "", "", "", "", "", "")
    names = {"start_before_torch": "at start, before torch", "after_model_load": "after the bundled model loads",
             "after_full_ingest": "after the full ingest", "after_load_phase": "after the answering phase",
             "end": "after the answers alone", "end_with_second_campaigns": "at the end (after the reingests and the second campaigns)",
             "worker_after_model_load": "embedding worker process, after its model loads",
             "worker_end": "embedding worker process, at the end"}
    for key, label in names.items():
        p = r["rss"].get(key)
        if p:
            t.add_row(f"   {label} [dim](current {p['current_mib']:,.0f})[/]", "", "", "", "", f"{p['peak_mib']:,.0f}", "", "")

    e = r.get("edit")
    edited = f" Edit: {e['path']} line {e['line']} ({e['session']})." if e else ""
    t.caption = (
        f"Time to answer = `answer_without_model`: the three paths, fusion, linked notes, selection (reranker none) "
        f"and the passages a reply shows, in one snapshot. Stall = how late a 10 ms sleep wakes. 'slow step' = a task "
        f"step or callback inside a loop iteration whose callbacks took ≥ the slow threshold (file:line "
        f"resumed→stopped, max ms). 'stack' = the main thread's stack (sampled by a watchdog thread) while the loop "
        f"was overdue, max = how late.{edited}"
    )
    console.print(t)


def failed_phases(r: dict) -> list[tuple[str, str]]:
    """(phase, error) for each ingest of the run that failed: what ran beside it is not a measurement."""
    phases = [("full ingest", r["full_ingest"]), *r.get("ingests", {}).items()]
    return [(label, data["error"]) for label, data in phases if data["error"]]


def missed_targets(r: dict) -> list[str]:
    """The ingest phases whose p95 time to answer was over the target against idle, and a next
    question after another process's reingest that did not find its edit by every path."""
    missed = [f"{name}: p95 {data['p95_vs_idle']}× idle" for name, data in r.get("ingests", {}).items()
              if not data["error"] and not data["pass"]]
    found = r.get("other_process_edit_found")
    if found is not None and not (found and all(found.values())):
        missed.append(f"the next question after another process's reingest did not find its edit: {found}")
    return missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notes_dir", nargs="?", type=Path, default=None,
                        help=f"the notes folder (default: {DEFAULT_NOTES})")
    parser.add_argument("--quick", action="store_true", help=f"smoke run on the bundled sample {QUICK_NOTES}")
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
                             "(oracle.index.seam.SWITCH_INTERVAL); 5 is Python's default")
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
        args.notes_dir = QUICK_NOTES if args.quick else DEFAULT_NOTES
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
        print(f"bench/load.py: the {label} failed: {error}", file=sys.stderr)
    missed = missed_targets(result) if printer is print_table else []
    for what in missed:
        print(f"bench/load.py: target missed: {what}", file=sys.stderr)
    return 1 if failed or missed else 0


if __name__ == "__main__":
    sys.exit(main())

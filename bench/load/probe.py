"""The loop probe: a 10 ms monitor, per-iteration callback timing, a stack-sampling watchdog; and what
its records say once the run is over."""
from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import sys
import threading
import time
from array import array
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from bench.common import log
from bench.load.frames import SlowIteration, coro_frames, idle_thread, thread_stack
from bench.load.measures import pct, rounded
from bench.load.phases import ATTRIBUTE_MS, MACHINE_PAUSE, TICK

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
        log(f"phase: {name}")

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
                "others": [s for s in others if not idle_thread(s)],
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
    return {k: {"calls": len(v), "p50_ms": rounded(pct(v, 50)), "max_ms": rounded(max(v)), "total_s": round(sum(v) / 1000, 2)}
            for k, v in sorted(by.items())}


def gc_json(pauses: list[tuple[int, float, bool, float, int]]) -> dict:
    full = [p for p in pauses if p[0] == 2]
    return {
        "count": len(pauses),
        "total_ms": round(sum(p[1] for p in pauses), 1),
        "max_ms": rounded(max((p[1] for p in pauses), default=0.0)),
        "gen2": len(full),
        "gen2_on_loop": sum(1 for p in full if p[2]),
        "gen2_p50_ms": rounded(pct([p[1] for p in full], 50) or 0.0),
        "gen2_max_ms": rounded(max((p[1] for p in full), default=0.0)),
        "gen2_cpu_p50_ms": rounded(pct([p[3] for p in full], 50) or 0.0),  # the rest of the wall time: off its core
        "gen2_cpu_max_ms": rounded(max((p[3] for p in full), default=0.0)),
        "gen2_collected_max": max((p[4] for p in full), default=0),
    }

"""Where code ran, told from frames: a task step's (taken around every step the loop runs) and a thread's
stack (sampled by the watchdog). Described only after the run: describing costs file-system calls."""
from __future__ import annotations

import functools
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from bench.common import REPO


@dataclass
class SlowIteration:
    at: float  # seconds since the probe started
    ms: float  # callbacks' wall time in this loop iteration
    cpu_ms: float  # the loop thread's CPU time in them: far below `ms` means it waited for the GIL/CPU
    callbacks: int
    top: list[tuple[float, float, float, object]]  # (wall, CPU, GC ms, raw description) of its callbacks over 1 ms


IDLE_THREAD_FRAMES = (  # a thread whose top frame is one of these is waiting, not working
    ("threading.py", "wait"),
    ("queue.py", "get"),
    ("thread.py", "_worker"),  # concurrent.futures: blocked in its work queue
    ("selectors.py", "select"),
    ("threading.py", "_wait_for_tstate_lock"),
)

Frame = tuple[int, str, int, str]  # (id of the frame, file, line, function)


@functools.cache
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


@functools.cache
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


def idle_thread(stack: list[Frame]) -> bool:
    if not stack:
        return True
    _, file, _, func = stack[0]
    return any(file.endswith(f) and func.split(".")[-1] == fn for f, fn in IDLE_THREAD_FRAMES)


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

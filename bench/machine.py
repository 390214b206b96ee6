"""The machine a benchmark ran on, and how busy other processes kept it while it ran."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path


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

"""Memory (this process's and another's, from /proc) and the statistics every phase reports."""
from __future__ import annotations

import os
import resource
from pathlib import Path


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


def process_cpu_seconds(pid: int | None) -> float:
    """Another process's CPU seconds so far (user + system), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, TypeError):
        return 0.0


def pct(values, q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(q / 100 * len(s) + 0.5)) - 1))
    return s[k]


def rounded(x: float | None, nd: int = 2) -> float | None:
    return None if x is None else round(x, nd)


def summary(values) -> dict:
    return {
        "n": len(values),
        "p50": rounded(pct(values, 50)),
        "p95": rounded(pct(values, 95)),
        "p99": rounded(pct(values, 99)),
        "max": rounded(max(values) if values else None),
    }

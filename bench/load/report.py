"""What a load run reports: one JSON object (every phase's stalls and blockers, the time to answer per
phase against idle, latency, memory), and the failures and missed targets its exit status says."""
from __future__ import annotations

import gc
import sys

from bench.load.asking import latency_json
from bench.load.frames import describe, summarize_iterations, summarize_samples
from bench.load.measures import rounded, summary
from bench.load.phases import ALL_PHASES, ANSWER_RATIO_TARGET, ANSWERS_IDLE, ATTRIBUTE_MS, INGEST_PHASES, PHASES
from bench.load.probe import attribute, gc_json, interval_stats, machine_pauses_json


def phase_json(probe, name: str) -> dict:
    """A phase's stalls: the monitor's lateness, the slow loop iterations and what ran in them, the
    garbage collections, the watchdog's stack samples."""
    d = probe.data[name]
    s = summary(d.lateness_ms)
    return {
        "seconds": round(d.seconds, 1),
        "ticks": s["n"],
        "stall_p50_ms": s["p50"],
        "stall_p99_ms": s["p99"],
        "stall_max_ms": s["max"],
        "ticks_50ms_late": sum(1 for x in d.lateness_ms if x >= ATTRIBUTE_MS),
        "select_overshoot_max_ms": rounded(max(d.select_overshoot_ms) if d.select_overshoot_ms else 0.0),
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


def ingest_json(asker, report, seconds: float, error: str, asked: int, group: str) -> dict:
    """An ingest phase: the ingest, and the questions answered meanwhile (`group`)."""
    out = {"seconds": round(seconds, 1), "error": error, "asked": asked, "questions": latency_json(asker.group(group))}
    if isinstance(report, dict):  # another process's JSON report, or the reingests' sum
        out |= {key: report[key] for key in ("chunks", "windows_embedded", "entities", "runs") if key in report}
    elif report is not None:
        out |= {"chunks": report.chunks, "windows_embedded": report.windows_embedded, "entities": report.entities}
    return out


def result(b, questions_from: str, machine: dict, busy: dict, machine_pauses: list[tuple[float, float]]) -> dict:
    """The run's JSON object. `b` is the run's `bench.load.startup.Bench`; `machine` its
    `bench.common.machine`, `busy` the other processes' share, `machine_pauses` the pause probe's."""
    from oracle.index.seam import search_concurrency

    args, probe, asker, n = b.args, b.probe, b.asker, b.args.concurrency
    idle = latency_json(asker.group(ANSWERS_IDLE))
    ingests = {}
    for phase in INGEST_PHASES:
        if phase in b.side:
            data = ingest_json(asker, *b.side[phase], phase)
            p95 = data["questions"]["p95"]
            data["p95_vs_idle"] = rounded(p95 / idle["p95"]) if p95 and idle["p95"] else None
            data["pass"] = data["p95_vs_idle"] is not None and data["p95_vs_idle"] <= ANSWER_RATIO_TARGET
            ingests[phase] = data
    all_ticks = [x for name in ALL_PHASES for x in probe.data[name].lateness_ms]
    edit = b.edit
    return {
        "notes_dir": str(args.notes_dir),
        "questions_from": questions_from,
        "questions": len(asker.questions),
        "concurrency": n,
        "llm_concurrency": args.llm_concurrency or n,
        "search_concurrency": search_concurrency(b.settings()),
        "asyncio_debug": args.asyncio_debug,
        "gc_freeze": args.gc_freeze,
        "gc_frozen_objects": gc.get_freeze_count(),
        "answer_gap": args.answer_gap,
        "other_nice": args.other_nice,
        "machine": {
            **machine,
            "switch_interval_ms": sys.getswitchinterval() * 1000,
            **busy,
            **machine_pauses_json(machine_pauses, [t for name in ALL_PHASES for t in probe.data[name].late_ticks]),
        },
        "model_load_seconds": round(b.model_seconds, 2),
        "suspects": interval_stats(probe.intervals),
        "stall": {name: phase_json(probe, name) for name in ALL_PHASES if name in PHASES or name in b.side}
        | {"all phases": summary(all_ticks)},
        "full_ingest": ingest_json(asker, *b.full, PHASES[1]),
        "edit": {"path": edit.path, "line": edit.line, "session": edit.session} if edit else None,
        "latency": {
            name: {
                "x1": latency_json(asker.group(g["x1"])),
                f"x{n}": latency_json(asker.group(g[f"x{n}"])),
                "throughput_qps": g["throughput_qps"],
            }
            for name, g in b.latency_groups.items()
        },
        "answers_idle": idle,
        "ingests": ingests,
        "other_process_edit_found": b.fresh,
        "rss": b.rss,
    }


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

"""One (version, bank part) at a time: ingest, then eval, each a process of its own; the run over every
bank, saved after each."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.banks.plan import Bank, Part, count_questions
from bench.banks.versions import Version, child_env, probe, tree_state
from bench.common import closed_port, log
from bench.machine import contention, cpu_model, cpu_sample

# The fused stage's measures in `oracle eval --json` ("overall"), with the names its table gives them.
MEASURES = (
    ("fused_recall_at_k", "recall@{k}"),
    ("fused_hit_at_5", "hit@5"),
    ("fused_hit_at_10", "hit@10"),
    ("fused_mrr", "MRR"),
    ("fused_ndcg_at_10", "nDCG@10"),
    ("fused_all_gold_at_10", "all gold@10"),
)


def run_child(args: list[str], env: dict[str, str], work: Path, log_file: Path) -> tuple[float, dict | None, str | None]:
    """(wall seconds, the JSON it printed, an error)."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "oracle.cli", *args], env=env, cwd=work,
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    log_file.write_text(done.stderr, encoding="utf-8")
    if done.returncode:
        tail = done.stderr.strip().splitlines()[-1:] or ["(nothing on stderr)"]
        return seconds, None, f"exit {done.returncode}: {tail[0][:300]} (see {log_file})"
    for text in (done.stdout, *reversed(done.stdout.splitlines())):
        try:
            return seconds, json.loads(text), None
        except ValueError:
            continue
    return seconds, None, f"printed no JSON (see {log_file})"


def run_part(version: Version, part: Part, env: dict[str, str], work: Path, k: int | None) -> dict:
    data = work / "data" / version.key / part.name
    logs = work / "logs" / version.key
    logs.mkdir(parents=True, exist_ok=True)
    data.parent.mkdir(parents=True, exist_ok=True)
    where = ["--notes", str(part.notes), "--data", str(data)]
    run: dict = {"data": str(data)}
    if version.role == "current":
        run["tree_state"] = tree_state(version.tree)  # others may be editing it while we run
    log(f"{version.role} · {part.name}: ingest into {data}")
    seconds, report, error = run_child(["ingest", *where, "--json"], env, work, logs / f"{part.name}.ingest.log")
    run["ingest"] = {"wall_seconds": round(seconds, 2), "report": report, "error": error}
    if error:
        log(f"{version.role} · {part.name}: ingest failed, {error}")
    else:
        assert report is not None
        log(f"{version.role} · {part.name}: ingested in {report.get('seconds', 0):.1f} s "
            f"({report.get('windows_embedded', 0):,} windows embedded, {report.get('chunks', 0):,} chunks; "
            f"{seconds:.1f} s with the process)")
    log(f"{version.role} · {part.name}: eval {part.bank.name}")
    extra = ["--k", str(k)] if k else []
    seconds, result, error = run_child(["eval", str(part.bank), *where, "--json", *extra], env, work,
                                       logs / f"{part.name}.eval.log")
    run["eval"] = {"wall_seconds": round(seconds, 2), "result": result, "error": error}
    if error:
        log(f"{version.role} · {part.name}: eval failed, {error}")
    else:
        assert result is not None
        overall = result.get("overall", {})
        log(f"{version.role} · {part.name}: evaluated {result.get('questions')} questions in {seconds:.1f} s; "
            + ", ".join(f"{key} {overall[key]:.3f}" for key, _ in MEASURES if overall.get(key) is not None))
    return run


def failed(run: dict | None) -> bool:
    return run is None or bool(run["ingest"]["error"] or run["eval"]["error"])


def combined(runs: list[dict]) -> dict | None:
    """The parts' eval results as one: each overall measure weighted by the part's answerable questions
    (by kind, misses and per question stay in each part's run)."""
    if not runs or any(failed(r) for r in runs):
        return None
    results = [r["eval"]["result"] for r in runs]
    if len(results) == 1:  # the whole result stays in the part's run: not twice in --json
        return {key: v for key, v in results[0].items() if key not in ("per_question", "misses")}
    keys = {key for res in results for key, v in res.get("overall", {}).items() if isinstance(v, int | float)}
    overall: dict[str, float | int | None] = {}
    for key in sorted(keys):
        pairs = [(res["overall"][key], res["overall"].get("questions", 0)) for res in results
                 if res["overall"].get(key) is not None]
        weight = sum(w for _, w in pairs)
        overall[key] = round(sum(v * w for v, w in pairs) / weight, 4) if weight else None
    overall["questions"] = sum(res["overall"].get("questions", 0) for res in results)
    return {
        "questions": sum(res.get("questions", 0) for res in results),
        "answerable": sum(res.get("answerable", 0) for res in results),
        "unanswerable": sum(res.get("unanswerable", 0) for res in results),
        "reranked": sum(res.get("reranked", 0) for res in results),
        "fusion": results[0].get("fusion"),
        "overall": overall,
        "weighted_by": "answerable questions of each part",
    }


def cpu_with_children() -> tuple[float, float, float, float]:
    """`cpu_sample`, this process's CPU counting its finished children's: they do the work here."""
    wall, busy, steal, _ = cpu_sample()
    return wall, busy, steal, sum(os.times()[:4])


def measure(banks: list[Bank], versions: list[Version], work: Path, k: int | None, save: Path) -> dict:
    port = closed_port()
    envs = {v.role: child_env(v, port) for v in versions}
    cpu_before = cpu_with_children()
    result: dict = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "work": str(work),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                    "load_average_at_start": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None},
        "settings_passed_through": {key: v for key, v in os.environ.items() if key.startswith("ORACLE_")
                                    and key not in {"ORACLE_ANNOTATE", "ORACLE_EMBED_WORKER", "ORACLE_CAMPAIGNS"}},
        "k": k,
        "versions": {},
        "banks": [],
    }
    for v in versions:
        info = {"ref": v.ref, "commit": v.commit, "tree": str(v.tree), "data_key": v.key,
                "child": probe(v, envs[v.role], work)}
        if v.role == "current":
            info["tree_state_at_start"] = tree_state(v.tree)
        result["versions"][v.role] = info
    for bank in banks:
        missing = [str(p) for part in bank.parts for p in (part.notes, part.bank) if not p.exists()]
        entry: dict = {"name": bank.name, "parts": [], "versions": {}}
        if missing:
            log(f"{bank.name}: skipped, missing {', '.join(missing)}")
            entry["skipped"] = f"missing {', '.join(missing)}"
            result["banks"].append(entry)
            continue
        started = time.perf_counter()
        for part in bank.parts:
            by_role = {}
            for v in versions:  # the versions one after the other, per part: the same minutes of the machine
                by_role[v.role] = run_part(v, part, envs[v.role], work, k)
            entry["parts"].append({"name": part.name, "notes": str(part.notes), "bank": str(part.bank),
                                   "questions": count_questions(part.bank), "runs": by_role})
        entry["questions"] = sum(p["questions"] for p in entry["parts"])
        for v in versions:
            runs = [p["runs"][v.role] for p in entry["parts"]]
            entry["versions"][v.role] = {
                "failed": any(failed(r) for r in runs),
                "eval": combined(runs),
                "ingest_seconds": round(sum((r["ingest"]["report"] or {}).get("seconds", 0) for r in runs), 2),
                "ingest_wall_seconds": round(sum(r["ingest"]["wall_seconds"] for r in runs), 2),
                "windows_embedded": sum((r["ingest"]["report"] or {}).get("windows_embedded", 0) for r in runs),
                "eval_wall_seconds": round(sum(r["eval"]["wall_seconds"] for r in runs), 2),
            }
        log(f"{bank.name}: done in {time.perf_counter() - started:.0f} s")
        result["banks"].append(entry)
        result["machine"].update(contention(cpu_before, cpu_with_children()))
        save.parent.mkdir(parents=True, exist_ok=True)
        save.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    save.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    return result

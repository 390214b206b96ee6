"""Retrieval quality on every question bank: the working tree next to a baseline commit, in one table.

    python -m bench.banks [--banks sample,crd3,...] [--quick] [--baseline REF | --no-baseline]
                          [--work DIR] [--k N] [--diff BANK] [--json] [--save FILE] [--show FILE]

Why
    A change to parsing, chunking, the paths or the fusion moves every bank at once, and not all the
    same way: what helps the conversations of LoCoMo can cost the sample campaign. `oracle eval` runs
    one bank on one version of the code; this runs all of them on two versions, the working tree
    and a baseline commit (`--baseline`, default HEAD), in one run, so a change is judged by every
    bank in one table rather than by the one its author was looking at.

What runs
    For each code version and bank, the real command line in a process of its own:
    `python -m oracle.cli ingest --notes NOTES --data DATA --json`, then
    `python -m oracle.cli eval BANK --notes NOTES --data DATA --json` (the eval would ingest by itself;
    the ingest runs first so its time is measured apart). Each process gets ORACLE_ANNOTATE=false,
    ORACLE_EMBED_WORKER=false, OLLAMA_HOST at a closed local port (nothing waits on a model, and no
    reranker: the final list is the fused one), ORACLE_CAMPAIGNS removed, and PYTHONPATH set to that
    version's tree, so that version's `oracle` package is imported, not the editable install's (each
    version's `oracle.__file__` is checked once, in a child). The processes run in the work folder,
    where there is no `.env`. Other ORACLE_* settings of this shell pass through to both versions.

    The baseline is a `git worktree add --detach` of REF in the work folder (`WORK/trees/<commit>`,
    reused while it is at the same commit and clean); the checkout at the repository root is never
    touched. Both versions read the same notes and the same bank files, the working tree's: only the
    code differs. Each (version, bank) keeps its own index in `WORK/data/<commit or "worktree">/<bank>`,
    so a second run reuses them (the ingest is incremental: it re-reads only what changed). Each
    child's stderr is kept in `WORK/logs/`.

The banks (one row each; `--banks a,b` picks rows, `vaults` every vault row; `--quick` = sample and
the vault banks)
    sample: the bundled campaign, notes/ and notes/questions.jsonl.
    crd3: EVAL_DIR/crd3/notes with bench/data/crd3_dev.jsonl.
    locomo: the five dev conversations (conv-26, 30, 41, 42, 43), each its own notes folder and index,
      one row of their means weighted by answerable questions (each conversation's numbers in --json).
    scifact: EVAL_DIR/scifact/notes (5,183 abstracts) with questions.train.jsonl.
    <vault>: one row per bench/data/vaults/<vault>.dev.jsonl, with EVAL_DIR/vaults/<vault>/notes.

The table
    One row per bank; a column per measure `oracle eval` reports at the final k for the fused stage
    (its `fused_*` keys: recall@k, any gold in the top 5 and 10, MRR, nDCG@10, all gold in the top 10;
    means over the answerable questions), each cell "baseline → current" with the difference under
    it; then the seconds each bank took to ingest and evaluate per version. `--diff BANK` then lists
    that bank's questions whose first gold changed rank in the fused order between the versions (from
    each question's `fused` places in the eval JSON, collapsed by label as `oracle eval` counts units;
    "—": not in the fused list), with what stood first. `--json` prints everything instead (both
    versions' full eval and ingest JSON per bank and per conversation); `--save FILE` writes it too
    (after every bank, so a run cut short keeps its banks; without it, `WORK/last-run.json`);
    `--show FILE` prints a saved run's table and runs nothing.

    These are quality numbers: the same code over the same notes gives the same table, save for the
    few questions where Chroma's approximate search returns another set of windows from another
    build of the index. The seconds are only there to say what a run costs. It exits 1 when a child
    process failed (its cells read "failed"; the log names the file).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import (
    DATA_DIR,
    EVAL_DIR,
    REPO,
    closed_port,
    console,
    contention,
    cpu_model,
    cpu_sample,
    log,
    new_table,
)

LOCOMO_DEV = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
DEFAULT_WORK = Path("/tmp/oracle-banks")

# The fused stage's measures in `oracle eval --json` ("overall"), with the names its table gives them.
MEASURES = (
    ("fused_recall_at_k", "recall@{k}"),
    ("fused_hit_at_5", "hit@5"),
    ("fused_hit_at_10", "hit@10"),
    ("fused_mrr", "MRR"),
    ("fused_ndcg_at_10", "nDCG@10"),
    ("fused_all_gold_at_10", "all gold@10"),
)


# ---------------------------------------------------------------------------------------------
# The banks


@dataclass(frozen=True)
class Part:
    """One notes folder with its bank: one index per version."""

    name: str
    notes: Path
    bank: Path


@dataclass(frozen=True)
class Bank:
    """One row of the table: one part, or several reported as one (LoCoMo)."""

    name: str
    parts: tuple[Part, ...]
    vault: bool = False


def all_banks() -> list[Bank]:
    locomo = EVAL_DIR / "locomo"
    banks = [
        Bank("sample", (Part("sample", REPO / "notes", REPO / "notes" / "questions.jsonl"),)),
        Bank("crd3", (Part("crd3", EVAL_DIR / "crd3" / "notes", DATA_DIR / "crd3_dev.jsonl"),)),
        Bank("locomo", tuple(Part(f"locomo-{c}", locomo / c / "notes", locomo / c / "questions.jsonl")
                             for c in LOCOMO_DEV)),
        Bank("scifact", (Part("scifact", EVAL_DIR / "scifact" / "notes",
                              EVAL_DIR / "scifact" / "questions.train.jsonl"),)),
    ]
    for bank in sorted((DATA_DIR / "vaults").glob("*.dev.jsonl")):  # new banks appear here
        name = bank.name.removesuffix(".dev.jsonl")
        banks.append(Bank(name, (Part(f"vault-{name}", EVAL_DIR / "vaults" / name / "notes", bank),), vault=True))
    return banks


def pick_banks(spec: str | None, quick: bool) -> list[Bank]:
    banks = all_banks()
    if spec is None:
        return [b for b in banks if b.vault or b.name == "sample"] if quick else banks
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    known = {b.name for b in banks} | {"vaults"}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise SystemExit(f"unknown bank {', '.join(unknown)}; the banks: {', '.join(sorted(known))}")
    return [b for b in banks if b.name in wanted or (b.vault and "vaults" in wanted)]


def count_questions(bank: Path) -> int:
    return sum(1 for line in bank.read_text(encoding="utf-8").splitlines() if line.strip())


# ---------------------------------------------------------------------------------------------
# The two versions of the code


@dataclass
class Version:
    role: str  # "baseline" or "current"
    tree: Path  # its checkout: PYTHONPATH of its processes
    key: str  # its data folders' key: the commit, or "worktree"
    commit: str  # the commit (for the working tree: HEAD, plus what is changed)
    ref: str


def git(*args: str, cwd: Path = REPO) -> str:
    """A git command that only reads (no optional locks: `status` does not refresh the index)."""
    done = subprocess.run(["git", "--no-optional-locks", "-C", str(cwd), *args],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"git {' '.join(args)} in {cwd} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def tree_state(tree: Path) -> dict:
    """What the working tree changes from HEAD in the code (`oracle/`): files, and a hash of the diff."""
    changed = [line for line in git("status", "--porcelain", "--", "oracle", cwd=tree).splitlines() if line]
    diff = git("diff", "HEAD", "--", "oracle", cwd=tree)
    return {"head": git("rev-parse", "HEAD", cwd=tree), "changed": changed,
            "diff_sha1": hashlib.sha1(diff.encode()).hexdigest()[:12] if diff else None}


def baseline_tree(ref: str, work: Path) -> Version:
    """A detached worktree of REF under WORK/trees, added once and reused while it is at that commit."""
    commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    path = work / "trees" / commit[:12]
    if path.exists():
        at = git("rev-parse", "HEAD", cwd=path)
        if at != commit:
            raise SystemExit(f"{path} is at {at[:12]}, not {commit[:12]} ({ref}): remove it (git worktree remove)")
        if git("status", "--porcelain", cwd=path):
            raise SystemExit(f"{path} has changes of its own: remove it (git worktree remove --force) and run again")
        log(f"baseline {ref}: reusing the worktree {path}")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        add = ["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), commit]
        done = subprocess.run(add, capture_output=True, text=True, check=False)
        if done.returncode and "already registered" in done.stderr:  # the folder was deleted by hand
            done = subprocess.run([*add[:4], "add", "-f", *add[5:]], capture_output=True, text=True, check=False)
        if done.returncode:
            raise SystemExit(f"git worktree add failed: {done.stderr.strip()}")
        log(f"baseline {ref}: worktree of {commit[:12]} added at {path}")
    return Version("baseline", path, commit[:12], commit, ref)


def child_env(version: Version, ollama_port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ORACLE_CAMPAIGNS"}
    return env | {
        "PYTHONPATH": str(version.tree),  # first on sys.path: ahead of the editable install's finder
        "ORACLE_ANNOTATE": "false",
        "ORACLE_EMBED_WORKER": "false",
        "OLLAMA_HOST": f"http://127.0.0.1:{ollama_port}",
        "PYTHONUNBUFFERED": "1",
    }


_PROBE = (
    "import json, oracle\n"
    "from oracle.settings import Settings\n"
    "s = Settings()\n"
    "print(json.dumps({'oracle': oracle.__file__, 'k': s.k, 'fusion': s.fusion, 'annotate': s.annotate,"
    " 'embed_worker': s.embed_worker, 'ollama_host': s.ollama_host}))\n"
)


def probe(version: Version, env: dict[str, str], work: Path) -> dict:
    """Which `oracle` a child of this version imports, and its settings: the run stops if it is not
    the version's own."""
    done = subprocess.run([sys.executable, "-c", _PROBE], env=env, cwd=work, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{version.role}: cannot import oracle from {version.tree}:\n{done.stderr[-2000:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(found["oracle"]).resolve().is_relative_to(version.tree.resolve()):
        raise SystemExit(f"{version.role}: a child imported {found['oracle']}, not the package in {version.tree}")
    log(f"{version.role}: children import {found['oracle']} (k={found['k']}, fusion {found['fusion']})")
    return found


# ---------------------------------------------------------------------------------------------
# One (version, bank part): ingest, then eval, each a process of its own


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


# ---------------------------------------------------------------------------------------------
# The run


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


# ---------------------------------------------------------------------------------------------
# Output


def value(version: dict | None, key: str) -> float | str | None:
    """A measure of one version's eval of a bank: a number, None when it has none, "failed"."""
    if version is None:
        return None
    if version["failed"] or version["eval"] is None:
        return "failed"
    return version["eval"].get("overall", {}).get(key)


def cell(before: float | str | None, after: float | str | None, both: bool) -> str:
    def show(v: float | str | None) -> str:
        return "—" if v is None else "[red]failed[/]" if isinstance(v, str) else f"{v:.3f}"

    if not both:
        return show(after)
    if not isinstance(before, float | int) or not isinstance(after, float | int):
        return f"{show(before)} → {show(after)}"
    delta = round(round(after, 3) - round(before, 3), 3) + 0.0  # the difference of what is shown; never -0.000
    colour = "green" if delta > 0 else "red" if delta < 0 else "dim"
    return f"{before:.3f} → {after:.3f}\n[{colour}]{delta:+.3f}[/]"


def version_line(role: str, info: dict) -> str:
    if role == "baseline":
        return f"baseline: {info['ref']} = {info['commit'][:12]} (worktree {info['tree']})"
    state = info.get("tree_state_at_start") or {}
    changed = state.get("changed") or []
    what = f"{len(changed)} files of oracle/ changed from HEAD" if changed else "no change to oracle/ from HEAD"
    return f"current: the working tree {info['tree']} at {info['commit'][:12]}, {what} at the start"


def print_table(r: dict) -> None:
    out = console(170)
    versions = r["versions"]
    both = "baseline" in versions
    m = r["machine"]
    busy = m.get("other_processes_share")
    out.print(f"Machine: {m['cpu']}, {m['cores']} cores; load {m['load_average_at_start']} at start"
              + (f"; other processes used {busy:.1%} of all cores meanwhile" if busy is not None else ""))
    for role in ("baseline", "current"):
        if role in versions:
            out.print(version_line(role, versions[role]))
    if r.get("settings_passed_through"):
        out.print("settings passed through: " + ", ".join(f"{k}={v}" for k, v in r["settings_passed_through"].items()))
    k = r.get("k") or versions["current"]["child"]["k"]
    fusion = versions["current"]["child"]["fusion"]

    table = new_table(f"Retrieval per bank, fused stage ({fusion}), final k = {k}"
                      + (": baseline → current" if both else ": the working tree"),
                      [("bank", "left"), ("questions", "right"), *((name.format(k=k), "right") for _, name in MEASURES)])
    roles = [role for role in ("baseline", "current") if role in versions]
    times = new_table("Seconds per bank: ingest (windows embedded) and eval", [
        ("bank", "left"), *((f"{role} {step}", "right") for role in roles for step in ("ingest", "eval"))])
    reranked = 0
    for bank in r["banks"]:
        if bank.get("skipped"):
            table.add_row(bank["name"], "—", *(["skipped"] + [""] * (len(MEASURES) - 1)))
            continue
        got = bank["versions"]
        shown = got["current"]["eval"] or (got.get("baseline") or {}).get("eval")
        counts = f"{shown['answerable']} ({shown['questions']})" if shown else f"({bank.get('questions', '—')})"
        cells = [cell(value(got.get("baseline"), key), value(got.get("current"), key), both) for key, _ in MEASURES]
        name = bank["name"] + (f"\n[dim]{len(bank['parts'])} conversations[/]" if len(bank["parts"]) > 1 else "")
        table.add_row(name, counts, *cells)
        reranked += sum((v["eval"] or {}).get("reranked", 0) for v in got.values())
        row = [bank["name"]]
        for role in ("baseline", "current"):
            if role in got:
                v = got[role]
                runs = [part["runs"][role] for part in bank["parts"]]
                ingest_failed = any(run["ingest"]["error"] for run in runs)
                eval_failed = any(run["eval"]["error"] for run in runs)
                row += [f"{v['ingest_seconds']:.1f} ({v['windows_embedded']:,})" + (" [red]failed[/]" if ingest_failed else ""),
                        f"{v['eval_wall_seconds']:.1f}" + (" [red]failed[/]" if eval_failed else "")]
        times.add_row(*row)
    table.caption = (
        "Means over the answerable questions (all questions in brackets) of `oracle eval --json`'s fused_* "
        "measures; locomo: the 5 dev conversations weighted by answerable questions. "
        + ("Each cell: baseline → current, the difference below. " if both else "")
        + ("" if not reranked else f"The reranker reordered {reranked} questions: it was meant to be off. ")
    )
    out.print(table)
    times.caption = ("ingest: the ingest report's seconds (the model's load included, not the process's start); "
                     "eval: the whole `oracle eval` process, its incremental ingest check included")
    out.print(times)


_SESSION_ENTRY = re.compile(r"session\s+0*(\d+)")


def matches_place(entry: str, label: str, path: str, sessions: list[int] | tuple[int, ...] = ()) -> bool:
    """A gold entry names a place: `oracle.eval_bank.matches_place`, repeated here so that a half-edited working
    tree (whose `oracle` may not import) cannot stop a diff, and a saved run reads the same anywhere."""
    entry = " ".join(entry.split()).lower()
    path = path.lower()
    if entry in {label.lower(), path, path.removesuffix(".md")}:
        return True
    m = _SESSION_ENTRY.fullmatch(entry)
    return m is not None and int(m[1]) in sessions


def first_gold(relevant: list[str], fused: list[dict]) -> tuple[int | None, str | None]:
    """The 1-based rank of the first gold unit in a question's fused places (units: places of one label,
    as `oracle eval` counts them), and the label that stood first."""
    units: dict[str, list[dict]] = {}
    for place in fused:
        units.setdefault(place["label"].lower(), []).append(place)
    first = next(iter(units.values()), [{}])[0].get("label")
    for rank, unit in enumerate(units.values(), 1):
        if any(matches_place(e, p["label"], p["path"], p.get("sessions") or ()) for e in relevant for p in unit):
            return rank, first
    return None, first


def print_diff(r: dict, name: str) -> None:
    out = console(170)
    bank = next((b for b in r["banks"] if b["name"] == name), None)
    if bank is None or bank.get("skipped") or "baseline" not in r["versions"]:
        out.print(f"--diff {name}: no such bank in this run, or no baseline to compare with")
        return
    rows, compared = [], 0
    for part in bank["parts"]:
        results = {role: (run["eval"]["result"] or {}) for role, run in part["runs"].items()}
        before = {q["id"]: q for q in results["baseline"].get("per_question", [])}
        after = results["current"].get("per_question", [])
        if not before or not after:
            out.print(f"--diff {name}: {part['name']} has no per-question output in both versions' eval JSON")
            continue
        for q in after:
            old = before.get(q["id"])
            if old is None or not q.get("relevant"):
                continue
            rank_b, first_b = first_gold(q["relevant"], old.get("fused", []))
            rank_a, first_a = first_gold(q["relevant"], q.get("fused", []))
            if rank_b != rank_a:
                rows.append((q, rank_b, rank_a, first_b, first_a))
        compared += 1
    if not compared:
        return

    def key(row):  # the worst losses first, then the largest gains
        _, b, a, _, _ = row
        b, a = b or 99, a or 99
        return (a <= b, -(abs(a - b)))

    rows.sort(key=key)
    if not rows:
        out.print(f"{name}: no question's first gold moved between the versions")
        return
    worse = sum(1 for _, b, a, _, _ in rows if (a or 99) > (b or 99))
    table = new_table(f"{name}: {len(rows)} questions whose first gold moved ({worse} down, {len(rows) - worse} up)", [
        ("id", "left"), ("kind", "left"), ("question", "left"), ("rank", "center"), ("first place: before → after", "left")])
    from rich.markup import escape

    for q, b, a, fb, fa in rows:
        colour = "red" if (a or 99) > (b or 99) else "green"
        first = escape(fa or "—") if fb == fa else f"{escape(fb or '—')} → {escape(fa or '—')}"
        table.add_row(escape(q["id"]), q.get("kind", ""), escape(q["question"]),
                      f"[{colour}]{b or '—'} → {a or '—'}[/]", first)
    table.caption = "rank: of the first gold unit in the fused order (—: not in the fused list)"
    out.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.banks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--banks", help="rows to run, comma-separated (default: all; `vaults`: every vault bank)")
    parser.add_argument("--quick", action="store_true", help="the sample and the vault banks only")
    parser.add_argument("--baseline", default="HEAD", help="the commit to compare with (default HEAD)")
    parser.add_argument("--no-baseline", action="store_true", help="run the working tree alone")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK,
                        help=f"the baseline's worktree, the indexes and the logs (default {DEFAULT_WORK})")
    parser.add_argument("--k", type=int, help="the final k passed to oracle eval (default: its own, ORACLE_K)")
    parser.add_argument("--diff", metavar="BANK", help="after the table, the questions of BANK whose first gold moved")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    parser.add_argument("--save", type=Path, help="also write the JSON object here (default WORK/last-run.json)")
    parser.add_argument("--show", type=Path, help="print the tables of a saved --json/--save run; run nothing")
    args = parser.parse_args(argv)
    if args.show:
        saved = json.loads(args.show.read_text(encoding="utf-8"))
        print_table(saved)
        if args.diff:
            print_diff(saved, args.diff)
        return 0
    banks = pick_banks(args.banks, args.quick)
    if not banks:
        parser.error("no bank selected")
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    versions = [] if args.no_baseline else [baseline_tree(args.baseline, work)]
    versions.append(Version("current", REPO, "worktree", git("rev-parse", "HEAD"), "working tree"))
    log(f"{len(banks)} banks ({', '.join(b.name for b in banks)}), versions: {', '.join(v.role for v in versions)}")
    result = measure(banks, versions, work, args.k, args.save or work / "last-run.json")
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print_table(result)
        if args.diff:
            print_diff(result, args.diff)
    return 1 if any(v["failed"] for b in result["banks"] for v in b.get("versions", {}).values()) else 0


if __name__ == "__main__":
    sys.exit(main())

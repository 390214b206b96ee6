"""The tables of a run (baseline → current per bank, the seconds), and `--diff`: the questions whose first
gold moved."""
from __future__ import annotations

import re

from bench.banks.runs import MEASURES
from bench.printing import console, new_table


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

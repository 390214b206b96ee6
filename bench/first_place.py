"""Why the first gold note lands where it lands: what stands above it, and which path put it there.

    python -m bench.first_place RUN.json [--banks a,b] [--questions]

Why
    Recall@8 says the right note is among the eight a player reads; MRR says whether it is the first.
    When it is not, the note above it came from somewhere: a path that ranked it high, several that
    each ranked it a little, the entity path's mention of a name. This reads a saved `bench.banks` run
    (`--save`, its current version) and says, per bank, counted per note path as the vault banks'
    gold is: the fused order's MRR beside each path's own (the order that path alone would give the
    same places), and, for every question whose first gold is not first, the note that took its place
    (its kind, the paths that found it and their ranks) and the gold's ranks in the same paths.

What it reads
    Each question's `fused` places from `oracle eval --json` (label, path, fused score, rank in each
    path that found it). A path's own order is its ranks of the places the fused list holds: a place
    a path found but fusion left out of the pool (ORACLE_FUSED_POOL) is not seen, so a path's MRR here
    is what it would give over the fused pool, a close upper bound of its own. Places of one note
    count once, at their best rank.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from bench.banks.report import matches_place
from bench.printing import console, markdown_table, new_table

PATHS = ("keyword", "semantic", "entity")


def notes(fused: list[dict]) -> list[dict]:
    """The fused places by note path, best first: label (the best place's), fused rank, path ranks."""
    out: dict[str, dict] = {}
    for place in fused:
        note = out.setdefault(place["path"], {"path": place["path"], "label": place["label"], "paths": {},
                                              "sessions": [], "score": place.get("score")})
        note["sessions"] = sorted(set(note["sessions"]) | set(place.get("sessions") or ()))
        for name, rank in (place.get("paths") or {}).items():
            note["paths"][name] = min(rank, note["paths"].get(name, rank))
    return list(out.values())


def is_gold(note: dict, relevant: list[str]) -> bool:
    return any(matches_place(e, note["label"], note["path"], note["sessions"]) for e in relevant)


def kind(label: str) -> str:
    head = label.split(":", 1)[0]
    return head if head in ("Sheet", "World", "Note") else "session or log"


def path_order(ranked: list[dict], name: str) -> list[dict]:
    found = [n for n in ranked if name in n["paths"]]
    return sorted(found, key=lambda n: n["paths"][name])


def reciprocal(order: list[dict], relevant: list[str]) -> float:
    return next((1.0 / i for i, n in enumerate(order, 1) if is_gold(n, relevant)), 0.0)


def found_by(note: dict) -> str:
    return " + ".join(name for name in PATHS if name in note["paths"]) or "linked only"


def analyse(questions: list[dict]) -> dict:
    answerable = [q for q in questions if q.get("relevant") and q.get("fused") is not None]
    mrr = Counter[str]()
    above_kind, above_paths, misses = Counter[str](), Counter[str](), []
    for q in answerable:
        ranked = notes(q["fused"])
        mrr["fused"] += reciprocal(ranked, q["relevant"])
        for name in PATHS:
            mrr[name] += reciprocal(path_order(ranked, name), q["relevant"])
        first = next((i for i, n in enumerate(ranked, 1) if is_gold(n, q["relevant"])), None)
        if first == 1:
            continue
        top = ranked[0] if ranked else None
        gold = ranked[first - 1] if first else None
        if top is not None:
            above_kind[kind(top["label"])] += 1
            above_paths[found_by(top)] += 1
        misses.append({"id": q["id"], "question": q["question"], "first_gold": first, "top": top, "gold": gold})
    n = len(answerable) or 1
    return {"questions": len(answerable), "mrr": {k: v / n for k, v in mrr.items()},
            "first_right": len(answerable) - len(misses), "above_kind": above_kind, "above_paths": above_paths,
            "misses": misses}


def current_questions(bank: dict) -> list[dict]:
    out = []
    for part in bank.get("parts", []):
        run = part["runs"].get("current") or {}
        out += ((run.get("eval") or {}).get("result") or {}).get("per_question", [])
    return out


def ranks_text(note: dict | None) -> str:
    if note is None:
        return "—"
    return ", ".join(f"{name} {note['paths'][name]}" for name in PATHS if name in note["paths"]) or "linked"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.first_place", description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a bench.banks --save file")
    parser.add_argument("--banks", help="banks to read, comma-separated (default: every vault bank)")
    parser.add_argument("--questions", action="store_true", help="list every question whose first gold is not first")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args(argv)
    run = json.loads(args.run.read_text(encoding="utf-8"))
    wanted = set(args.banks.split(",")) if args.banks else None
    others = ("sample", "crd3", "locomo", "scifact")
    banks = [b for b in run["banks"] if (b["name"] in wanted if wanted else b["name"] not in others)]
    columns = ["bank", "questions", "first right", "MRR fused", "MRR keyword", "MRR semantic", "MRR entity",
               "above the gold: kind", "above the gold: found by"]
    rows, details = [], []
    for bank in banks:
        a = analyse(current_questions(bank))
        if not a["questions"]:
            continue
        m = a["mrr"]
        rows.append([bank["name"], str(a["questions"]), str(a["first_right"]),
                     *(f"{m[k]:.3f}" for k in ("fused", *PATHS)),
                     ", ".join(f"{k} {v}" for k, v in a["above_kind"].most_common()),
                     ", ".join(f"{k} {v}" for k, v in a["above_paths"].most_common())])
        details.append((bank["name"], a["misses"]))
    if args.markdown:
        print(markdown_table(columns, rows, left=1))
    else:
        out = console(200)
        table = new_table("Where the first gold note lands, per note path", [(c, "left") for c in columns])
        for row in rows:
            table.add_row(*row)
        out.print(table)
    if args.questions:
        for name, misses in details:
            print(f"\n{name}")
            for miss in misses:
                top = miss["top"]
                print(f"  {miss['id']} gold at {miss['first_gold'] or '—'}: {miss['question'][:90]}")
                print(f"      first: {top['path'] if top else '—'} ({ranks_text(top)}; score {top and top['score']})")
                gold = miss["gold"]
                print(f"      gold:  {gold['path'] if gold else '—'} ({ranks_text(gold)}; score {gold and gold['score']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

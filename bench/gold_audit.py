"""Notes placed above a question's first gold that hold its answer: gold the bank may have missed.

    python -m bench.gold_audit RUN.json [--banks a,b] [--depth 10]

Why
    A vault bank counts a fact as gold in every note that holds it (bench/data/vaults/README.md), but
    its questions were written from the notes by hand, and a note the writer did not think of can
    hold the answer too. Then the Oracle is counted wrong for putting it first. This reads a saved
    `bench.banks` run and each question's `answer`, and prints every note ranked above the first gold
    (within `--depth`) whose text holds the answer as `oracle eval` judges an answer shown
    (`oracle.eval.answer_shown`: each of its key terms, case and accents folded, stemmed), for a
    person to read and judge. It decides nothing by itself.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.common import DATA_DIR, EVAL_DIR
from bench.first_place import current_questions, is_gold, notes
from oracle.eval import answer_shown


def audit(root: Path, questions: list[dict], answers: dict[str, str], depth: int) -> list[tuple[str, int, str]]:
    """(question id, fused place, note path) for each note of `root` above a first gold that holds the answer."""
    found = []
    for q in questions:
        answer = answers.get(q["id"], "")
        if not q.get("relevant") or not answer:
            continue
        for place, note in enumerate(notes(q["fused"])[:depth], 1):
            if is_gold(note, q["relevant"]):
                break
            if answer_shown(answer, (root / note["path"]).read_text(encoding="utf-8", errors="replace")):
                found.append((q["id"], place, note["path"]))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gold_audit", description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a bench.banks --save file")
    parser.add_argument("--banks", help="vault banks to read, comma-separated (default: every one)")
    parser.add_argument("--depth", type=int, default=10, help="fused places to read above the first gold")
    args = parser.parse_args(argv)
    run = json.loads(args.run.read_text(encoding="utf-8"))
    wanted = set(args.banks.split(",")) if args.banks else None
    for bank in run["banks"]:
        path = DATA_DIR / "vaults" / f"{bank['name']}.dev.jsonl"
        if not path.exists() or (wanted and bank["name"] not in wanted):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        answers = {q["id"]: q.get("answer", "") for q in map(json.loads, filter(None, lines))}
        for qid, place, note in audit(EVAL_DIR / "vaults" / bank["name"] / "notes", current_questions(bank), answers, args.depth):
            print(f"{bank['name']}\t{qid}\tplace {place}\t{note}\tholds: {answers[qid]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

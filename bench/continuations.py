"""Where "and then what?" puts the passage that tells what came next, beside a baseline commit.

    python -m bench.continuations [--baseline REV] [--bank FILE] [--data DIR] [--told-event]

Each thread of the bank (`bench/data/vaults/continuations.jsonl`; `continuations-reworded`, `-named`
and `-before` beside it: the follow-up worded otherwise, of someone named, or asking what came
before) asks about one event of a real vault, then what came next. Its gold is a line of a note: the
passage holding it is what the player needs. Per vault and per place of the gold (`where`: the same
section as the event, the next section, the next session…): that passage first, within the first
two, within the first eight (the passages the model reads in full), the mean reciprocal rank; and
how often the opening question's first passage holds the event it asked about. Each version searches
its own indexes (DIR/<version>/<vault>), built from the shared vaults on the first run; the baseline
runs in a worktree of REV, in a process of its own, importing its own `oracle`. Retrieval only: no
Ollama. `--told-event` adds a row of this version given, as a thread carries it, the passage the
answer before told: the one holding the event. That is what the thread gets when the model's answer
cited the event, whichever passage the search put first.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BANK = REPO / "bench" / "data" / "vaults" / "continuations.jsonl"
VAULTS = Path(os.environ.get("ORACLE_EVAL_DIR", REPO.parent / "shared" / "eval")) / "vaults"
MODEL_READS = 8  # the passages the model reads in full


def holds(hit: dict[str, Any], place: dict[str, Any]) -> bool:
    return hit["path"] == place["path"] and hit["lines"][0] <= place["line"] <= hit["lines"][1]


def rank_of(fused: list[dict[str, Any]], place: dict[str, Any]) -> int | None:
    return next((i for i, hit in enumerate(fused, 1) if holds(hit, place)), None)


async def _measure(bank: list[dict[str, Any]], data: Path, told_event: bool = False) -> list[dict[str, Any]]:
    """Each thread searched with the `oracle` this process imports: the gold's rank, the event's.
    `told_event`: the follow-up is given the passage holding the event as the one told."""
    from oracle.index.index import Index
    from oracle.index.ingest import ingest
    from oracle.oracle import Oracle
    from oracle.settings import Settings

    rows = []
    for vault in sorted({q["vault"] for q in bank}):
        settings = Settings(_env_file=None, notes_dir=VAULTS / vault / "notes", data_dir=data / vault, annotate=False,
                            ollama_host="http://127.0.0.1:9")
        index = Index(settings)
        try:
            await ingest(index)
            oracle = Oracle(index)
            for q in (q for q in bank if q["vault"] == vault):
                asked = (await oracle.search(q["history"][-1], history=q["history"][:-1])).to_json()["fused"]
                # The baseline's search may take no `told`: it is passed only when asked for.
                told = {"told": await _event_passage(index, q["anchor"])} if told_event else {}
                went_on = (await oracle.search(q["question"], history=q["history"], **told)).to_json()["fused"]
                rows.append({"id": q["id"], "vault": vault, "where": q["where"],
                             "event": rank_of(asked[:1], q["anchor"]), "gold": rank_of(went_on, q["gold"])})
        finally:
            await index.close()
    return rows


async def _event_passage(index: Any, place: dict[str, Any]) -> str | None:
    """The id of the passage a player may read holding the line `place`."""
    from oracle.types import Clearance

    async with index.snapshot() as store:
        found = await store.chunks_at(place["path"], place["line"], place["line"], Clearance.PLAYER)
    return found[0].id if found else None


def _summary(rows: list[dict[str, Any]]) -> dict[str, str]:
    ranks = [r["gold"] for r in rows]
    share = lambda n: sum(1 for r in ranks if r is not None and r <= n) / len(ranks)  # noqa: E731
    mrr = sum(1 / r for r in ranks if r) / len(ranks)
    event = sum(1 for r in rows if r["event"]) / len(rows)
    return {"n": str(len(rows)), "first": f"{share(1):.2f}", "within 2": f"{share(2):.2f}",
            f"within {MODEL_READS}": f"{share(MODEL_READS):.2f}", "MRR": f"{mrr:.3f}", "event first": f"{event:.2f}"}


def _table(results: dict[str, list[dict[str, Any]]]) -> str:
    groups: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for version, rows in results.items():
        for r in rows:
            for key in (r["vault"], f"gold in the {r['where']}", "all"):
                groups[key][version].append(r)
    columns = list(_summary(next(iter(results.values()))).keys())
    lines = ["| threads | version | " + " | ".join(columns) + " |", "|---|---|" + "---|" * len(columns)]
    for key, by_version in groups.items():
        for version, rows in by_version.items():
            lines.append(f"| {key} | {version} | " + " | ".join(_summary(rows).values()) + " |")
    return "\n".join(lines)


def _baseline_rows(ref: str, bank_path: Path, data: Path) -> list[dict[str, Any]]:
    """The same measure in a worktree of `ref`, run by this file in a process importing that `oracle`."""
    sys.path.insert(0, str(REPO))
    from bench.banks.versions import baseline_tree

    tree = baseline_tree(ref, data).tree
    env = os.environ | {"PYTHONPATH": str(tree), "ORACLE_EMBED_WORKER": "false"}
    command = [sys.executable, __file__, "--only", "--bank", str(bank_path), "--data", str(data / tree.name)]
    done = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the baseline {ref} failed:\n{done.stderr[-3000:]}")
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def _absolute(path: str) -> Path:
    return Path(path).resolve()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # The baseline runs in its worktree, so paths are made absolute before it is started.
    parser.add_argument("--bank", type=_absolute, default=BANK)
    parser.add_argument("--data", type=_absolute, default=Path("/tmp/oracle-continuations"), help="the indexes' root")
    parser.add_argument("--baseline", metavar="REV", help="a commit to compare with, searched in a worktree")
    parser.add_argument("--only", action="store_true", help="print this version's rows as JSON and stop")
    parser.add_argument("--told-event", action="store_true",
                        help="add this version given the passage holding the event as the one told")
    args = parser.parse_args(argv)
    bank = [json.loads(line) for line in args.bank.read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.only:
        print(json.dumps(asyncio.run(_measure(bank, args.data))))
        return
    results = {}
    if args.baseline:
        results[f"baseline {args.baseline}"] = _baseline_rows(args.baseline, args.bank, args.data)
    results["current"] = asyncio.run(_measure(bank, args.data / "current"))
    if args.told_event:
        results["current, told the event"] = asyncio.run(_measure(bank, args.data / "current", told_event=True))
    print(_table(results))
    for row in results["current"]:
        print(row["id"], row["where"], "event first" if row["event"] else "event not first", "gold at", row["gold"])


if __name__ == "__main__":
    main()

"""python -m bench.banks: see the package's docstring."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import bench.banks
from bench.banks.plan import pick_banks
from bench.banks.report import print_diff, print_table
from bench.banks.runs import measure
from bench.banks.versions import Version, baseline_tree, git
from bench.common import REPO, log

DEFAULT_WORK = Path("/tmp/oracle-banks")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.banks", description=(bench.banks.__doc__ or "").split("\n\n")[0])
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

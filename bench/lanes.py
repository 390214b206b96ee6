"""The event loop's wait for the interpreter lock while questions' CPU steps run off it.

    python -m bench.lanes [NOTES_FILE] [--questions 20] [--rounds 3]

A question's CPU steps (fitting its prompt to the model's window, checking its answer) are pure
Python. Off the event loop they still need the interpreter lock, and every thread that wants it
makes the loop wait its turn. Side by side, in one run: `--questions` prompt fittings' worth of
token counting (`oracle.tokens.estimate_tokens` over 8 campaign passages each) sent at once
through asyncio's thread pool (the baseline: how they ran before, on as many threads as the pool
has) and through the question lane (`oracle.offload.QUESTION_LANE`, one thread). Meanwhile the
loop sleeps 10 ms at a time; how late it wakes is what a Discord heartbeat or the next question
would wait. Rounds alternate, so a busy machine hurts both alike. The lock is handed over every
1 ms, as the bot sets it.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import CRD3_NOTES
from bench.printing import markdown_table
from oracle.offload import QUESTION_LANE, SWITCH_INTERVAL
from oracle.tokens import estimate_tokens

DEFAULT_NOTES = CRD3_NOTES / "campaign-log.md"
PASSAGE_WORDS = 700
PASSAGES = 8


def fit(passages: list[str]) -> int:
    """What fitting one prompt costs: counting its passages' tokens."""
    return sum(estimate_tokens(p) for p in passages)


async def measure(run_step, prompts: list[list[str]]) -> tuple[float, list[float]]:
    """(seconds until every prompt is counted, the loop's lateness of each 10 ms sleep in ms)."""
    late: list[float] = []
    done = False

    async def ticker() -> None:
        while not done:
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            late.append((time.perf_counter() - t - 0.01) * 1000)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    await asyncio.gather(*(run_step(fit, p) for p in prompts))
    took = time.perf_counter() - started
    done = True
    await tick
    return took, late


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lanes", description=__doc__.split("\n\n")[0])
    parser.add_argument("notes", nargs="?", type=Path, default=DEFAULT_NOTES, help="a long note to take passages from")
    parser.add_argument("--questions", type=int, default=20, help="prompts fitted at once (default 20)")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of each, alternating (default 10)")
    args = parser.parse_args(argv)
    sys.setswitchinterval(SWITCH_INTERVAL)

    words = args.notes.read_text(encoding="utf-8").split()
    passages = [" ".join(words[i:i + PASSAGE_WORDS]) for i in range(0, len(words) - PASSAGE_WORDS, PASSAGE_WORDS)]
    prompts = [[passages[(q * PASSAGES + j) % len(passages)] for j in range(PASSAGES)] for q in range(args.questions)]

    pool = ThreadPoolExecutor()  # what asyncio.to_thread uses: min(32, CPUs + 4) threads
    workers = pool._max_workers

    async def in_pool(fn, *a):
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *a)

    ways = {f"asyncio's pool ({workers} threads)": in_pool, "question lane (1 thread)": QUESTION_LANE.run}
    results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in ways}
    for _ in range(args.rounds):
        for name, run_step in ways.items():
            took, late = asyncio.run(measure(run_step, prompts))
            results[name][0].append(took)
            results[name][1].extend(late)
    pool.shutdown()

    print(f"{args.questions} prompts of {PASSAGES} × {PASSAGE_WORDS} words at once, {args.rounds} rounds each; "
          f"lock handed over every {SWITCH_INTERVAL * 1000:g} ms")
    rows = []
    for name, (took, late) in results.items():
        late.sort()
        p99 = late[min(len(late) - 1, int(len(late) * 0.99))]
        rows.append([name, f"{statistics.median(took):.2f}", f"{statistics.median(late):.1f}", f"{p99:.1f}",
                     f"{late[-1]:.1f}"])
    print(markdown_table(["how", "all counted, s (median)", "loop late p50, ms", "p99, ms", "max, ms"], rows, left=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

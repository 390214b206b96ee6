"""The secret check of a player's answer while the model writes it: its cost on the event loop.

    python -m bench.stream_guard [NOTES_FILE] [--tokens 200,500,1000] [--repeat 5]

A player sees the answer as it is written only while it repeats no game-master-only run of words
(`oracle/answer/leaks.py`). The model's reply arrives a token at a time and each piece is checked
on the event loop, so the check must cost microseconds, not the milliseconds of reading the whole
text again. Side by side, in one run: reading the whole text so far at every piece (the baseline)
and `StreamCheck`, which reads only what is new and the last run's words.

The guard is built from a campaign-sized log (default: the 113-session CRD3 log) with every other
session game-master-only, many more secret runs than a campaign holds. The answers are public
sessions' own words (the longest ones), so no run matches and every piece is read to the end (the worst case: a leak
stops the reading). Per answer length, of the costliest of `--repeat` answers: the loop time of
all its pieces, and the slowest piece.
"""
from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from bench.common import CRD3_NOTES
from bench.printing import markdown_table
from oracle.answer.leaks import SecretGuard, StreamCheck
from oracle.types import GM, PUBLIC, ChunkText

DEFAULT_NOTES = CRD3_NOTES / "campaign-log.md"


def sessions(path: Path) -> list[str]:
    return [s for s in re.split(r"^## ", path.read_text(encoding="utf-8"), flags=re.MULTILINE)[1:] if s.strip()]


def pieces(text: str, tokens: int) -> list[str]:
    """The first `tokens` words of `text` as a model streams them: " word" after " word"."""
    words = text.split()[:tokens]
    return [(" " if i else "") + w for i, w in enumerate(words)]


def run(check, parts: list[str]) -> tuple[float, float]:
    """(ms for all pieces, µs for the slowest) of checking the text so far after every piece."""
    text, worst, total = "", 0.0, 0.0
    for part in parts:
        text += part
        started = time.perf_counter()
        check(text)
        took = time.perf_counter() - started
        total += took
        worst = max(worst, took)
    return total * 1000, worst * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.stream_guard", description=__doc__.split("\n\n")[0])
    parser.add_argument("notes", nargs="?", type=Path, default=DEFAULT_NOTES, help="one Markdown log of '## ' sessions")
    parser.add_argument("--tokens", default="200,500,1000", help="answer lengths, in streamed pieces")
    parser.add_argument("--repeat", type=int, default=5, help="answers per length (the costliest is shown)")
    args = parser.parse_args()

    logs = sessions(args.notes)
    chunks = [ChunkText(str(i), f"Session {i}", text, GM if i % 2 else PUBLIC) for i, text in enumerate(logs)]
    started = time.perf_counter()
    guard = SecretGuard(chunks)
    built = time.perf_counter() - started
    public = sorted((c.text for c in chunks if c.visibility == PUBLIC), key=len, reverse=True)[: args.repeat]
    print(f"{len(logs)} sessions, {len(guard.secret_runs):,} secret runs; guard built in {built:.1f} s "
          "(once per ingest, off the loop)\n")
    rows = []
    for tokens in (int(t) for t in args.tokens.split(",")):
        whole, stream = [], []
        for answer in public:
            parts = pieces(answer, tokens)
            whole.append(run(guard.leaks, parts))
            stream.append(run(StreamCheck(guard).leaks, parts))
        (w_total, w_worst), (s_total, s_worst) = max(whole), max(stream)
        rows.append([str(tokens), f"{w_total:.1f}", f"{w_worst:.0f}", f"{s_total:.1f}", f"{s_worst:.0f}"])
    print(markdown_table(["pieces", "whole text: total ms", "slowest µs", "StreamCheck: total ms", "slowest µs"], rows))


if __name__ == "__main__":
    main()

"""A question bank (format: the shared eval README) and how a ranked list is scored against its gold.

A gold entry matches a chunk by its citation label or its note's path, with or without `.md`,
case-insensitively; `Session 12` matches what records session 12. Ranked lists are collapsed to
distinct units (a citation label: a session's parts count once, at their best rank) before any
measure. Read by `oracle eval`, `oracle eval --answers` and the fusion's training.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import OracleError
from .types import Chunk


class BankError(OracleError, ValueError):
    pass


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    relevant: tuple[str, ...]
    kind: str = ""
    history: tuple[str, ...] = ()
    answer: str = ""  # a short gold answer, a few words (optional): what a reply must show


def load_bank(path: Path) -> list[Question]:
    questions = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if not isinstance(item, dict):
                raise TypeError("a line is one JSON object")
            relevant, history = item.get("relevant", []), item.get("history") or []
            if not isinstance(relevant, list) or not isinstance(history, list):
                raise TypeError('"relevant" and "history" are lists')
            if not isinstance(item.get("answer", ""), str):
                raise TypeError('"answer" is a string')
            questions.append(
                Question(
                    str(item.get("id", f"q{n}")),
                    str(item["question"]),
                    tuple(str(r) for r in relevant),
                    str(item.get("kind", "")),
                    tuple(str(h) for h in history),
                    item.get("answer", "").strip(),
                )
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise BankError(f"{path}:{n}: not a bank line ({exc})") from exc
    if not questions:
        raise BankError(f"{path} holds no questions")
    return questions


def matches(entry: str, chunk: Chunk) -> bool:
    return matches_place(entry, chunk.label, chunk.path, chunk.sessions)


_SESSION_ENTRY = re.compile(r"session\s+0*(\d+)")


def matches_place(entry: str, label: str, path: str, sessions: Sequence[int] = ()) -> bool:
    """A gold entry names a chunk's citation label, or its note's path with or without `.md`; an
    entry `Session 12` also names whatever records session 12 (a file `Session 12 - The Fall`, a
    hub's section `Log › Session 12`)."""
    entry = " ".join(entry.split()).lower()
    path = path.lower()
    if entry in {label.lower(), path, path.removesuffix(".md")}:
        return True
    m = _SESSION_ENTRY.fullmatch(entry)
    return m is not None and int(m[1]) in sessions


def collapse(chunks: Iterable[Chunk]) -> list[list[Chunk]]:
    """Distinct units in order of their best-ranked chunk."""
    units: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        units.setdefault(chunk.label.lower(), []).append(chunk)
    return list(units.values())


def entry_ranks(relevant: Sequence[str], chunks: Sequence[Chunk]) -> dict[str, int | None]:
    """The 1-based unit rank at which each gold entry is first found (None: not found)."""
    units = collapse(chunks)
    ranks: dict[str, int | None] = {}
    for entry in relevant:
        ranks[entry] = next(
            (i for i, unit in enumerate(units, 1) if any(matches(entry, c) for c in unit)), None
        )
    return ranks


def recall(relevant: Sequence[str], chunks: Sequence[Chunk], k: int | None = None) -> float:
    if not relevant:
        return 0.0
    ranks = entry_ranks(relevant, chunks)
    return sum(1 for r in ranks.values() if r is not None and (k is None or r <= k)) / len(relevant)


def hit(relevant: Sequence[str], chunks: Sequence[Chunk], k: int) -> float:
    """1.0 when any gold entry is in the top k units: the "recall@k" of the published LoCoMo numbers."""
    return float(any(r is not None and r <= k for r in entry_ranks(relevant, chunks).values()))


def mrr(relevant: Sequence[str], chunks: Sequence[Chunk]) -> float:
    found = [r for r in entry_ranks(relevant, chunks).values() if r is not None]
    return 1.0 / min(found) if found else 0.0


def ndcg(relevant: Sequence[str], chunks: Sequence[Chunk], k: int = 10) -> float:
    units = collapse(chunks)[:k]
    dcg = sum(
        1.0 / math.log2(i + 1)
        for i, unit in enumerate(units, 1)
        if any(matches(e, c) for e in relevant for c in unit)
    )
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(relevant), k) + 1))
    return dcg / ideal if ideal else 0.0

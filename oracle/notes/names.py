"""A note's name as Obsidian shows it, unique in the vault, and the sessions the note records.

Obsidian names a note by its file name and, where two files share one, by the shortest folder path
that tells them apart (`Session Prep/Session 12`). That name is the note's citation label, so a
citation always points at one file. A session number (from frontmatter, the file name, or a date in a
sessions folder) is metadata: it orders and groups notes, it never merges two.
"""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

SESSION_WORD = r"(?:session|sesi[oó]n|sess[aã]o|sessione|s[eé]ance|sitzung|sessie)"
_SESSION_FOLDER = re.compile(rf"{SESSION_WORD}|\bsessions?\b", re.I)
_LONGEST_RANGE = 20  # "Session 8-9" is two sessions; "Session 1-400" is no list of them
_FILENAME_NUMBER = re.compile(
    rf"^(?:{SESSION_WORD}[\s_\-]*#?\s*0*(?P<a>\d{{1,4}})(?:\s*[-–&+]\s*0*(?P<to>\d{{1,4}}))?(?!\d)"
    r"|0*(?P<b>\d{1,4})\s*[-–—_.]+\s*\S)",
    re.I,
)
_DATE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")
_FRONTMATTER_KEYS = ("session", "session_number", "session-number", "sessionNumber")


def sessions_from_filename(stem: str) -> tuple[int, ...]:
    """`Session 12` → (12,), `Session 8-9` → (8, 9), `012 - The Fall` → (12,); a date or a bare
    number names no session."""
    if _DATE.match(stem):
        return ()
    m = _FILENAME_NUMBER.match(stem.strip())
    if not m:
        return ()
    first = int(m["a"] or m["b"])
    last = int(m["to"]) if m["to"] else first
    return tuple(range(first, last + 1)) if first < last <= first + _LONGEST_RANGE else (first,)


def sessions_from_frontmatter(frontmatter: Mapping) -> tuple[int, ...]:
    """`session: 12`, `session: "8-9"`, `session: [8, 9]`."""
    for key in _FRONTMATTER_KEYS:
        value = frontmatter.get(key)
        if value is None or isinstance(value, bool):
            continue
        values = value if isinstance(value, list) else [value]
        numbers = [int(n) for v in values for n in re.findall(r"\d{1,4}", str(v))]
        if len(numbers) == 2 and not isinstance(value, list) and numbers[0] < numbers[1] <= numbers[0] + _LONGEST_RANGE:
            return tuple(range(numbers[0], numbers[1] + 1))
        if numbers:
            return tuple(dict.fromkeys(numbers))
    return ()


def number_ranges(numbers: Iterable[int]) -> str:
    """`1–12, 14, 16–40`: session numbers as a game master reads a list of them."""
    ranges: list[list[int]] = []
    for n in sorted(set(numbers)):
        if ranges and n == ranges[-1][1] + 1:
            ranges[-1][1] = n
        else:
            ranges.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in ranges)


def _in_sessions_folder(path: PurePosixPath) -> bool:
    return any(_SESSION_FOLDER.search(folder) for folder in path.parts[:-1])


@dataclass(frozen=True)
class Names:
    """Every note's unique name, and the session number of each dated note in a sessions folder (its
    place among that folder's dated notes: the first session played is 1)."""

    names: Mapping[str, str]
    dated: Mapping[str, int]

    @classmethod
    def of(cls, paths: Iterable[str]) -> Names:
        by_stem: dict[str, list[PurePosixPath]] = defaultdict(list)
        dated: dict[str, list[tuple[tuple[int, int, int], str]]] = defaultdict(list)
        for rel in paths:
            path = PurePosixPath(rel)
            by_stem[path.stem.casefold()].append(path)
            if (m := _DATE.match(path.stem)) and _in_sessions_folder(path):
                dated[str(path.parent)].append(((int(m[1]), int(m[2]), int(m[3])), rel))
        names = {}
        for paths_ in by_stem.values():
            for path in paths_:
                names[path.as_posix()] = _shortest_unique(path, paths_)
        numbers = {rel: n for notes in dated.values() for n, (_, rel) in enumerate(sorted(notes), 1)}
        return cls(names, numbers)

    def name(self, rel: str) -> str:
        return self.names.get(rel) or PurePosixPath(rel).stem

    def key(self, rel: str) -> str:
        """What of the vault's other notes this note's name and number depend on: part of its identity."""
        return f"{self.name(rel)}\0{self.dated.get(rel, '')}"


def _shortest_unique(path: PurePosixPath, same_stem: list[PurePosixPath]) -> str:
    """The file name, with as many of its folders as it takes to tell it from the others."""
    if len(same_stem) == 1:
        return path.stem
    parts = path.with_suffix("").parts
    for n in range(2, len(parts) + 1):
        tail = [p.casefold() for p in parts[-n:]]
        if all([p.casefold() for p in other.with_suffix("").parts[-n:]] != tail for other in same_stem if other != path):
            return "/".join(parts[-n:])
    return path.with_suffix("").as_posix()

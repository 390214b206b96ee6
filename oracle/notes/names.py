"""A note's name as Obsidian shows it, unique in the vault; links resolved as Obsidian resolves them;
the session numbers a name or frontmatter gives.

Obsidian names a note by its file name and, where two files share one, by the shortest folder path
that tells them apart (`Session Prep/Session 12`). That name is the note's citation label, so a
citation always points at one file. A link names a note by its path, or by any tail of its path down
to its file name (`[[01 - Projects/tempus/04 - items/Summer's Edge]]`, written in a larger vault of
which the notes folder is one part, still reaches `04 - items/Summer's Edge.md`). A session number
is metadata: it orders and groups notes, it never merges two (which notes are sessions is decided
for the vault as a whole, `conventions.py`).
"""
from __future__ import annotations

import posixpath
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote

from ..lexicon import fold, lexicon, session_spellings


def _alternatives(words: frozenset[str]) -> str:
    return "(?:" + "|".join(sorted(map(re.escape, words), key=len, reverse=True)) + ")"


# Every language's session word and its plurals (`oracle/lexicon/*.toml`), as a note's text writes them
# in a header or a mention; the short forms (`Ep. 3`, `S05`) only in a note's name.
SINGULARS = frozenset(w for w in session_spellings() if len(w) >= 4)
PLURALS = frozenset(w for w in session_spellings(plural=True) if len(w) >= 4)
SESSION_WORD = _alternatives(SINGULARS)
SESSION_WORDS = _alternatives(PLURALS)
_LONGEST_RANGE = 20  # "Session 8-9" is two sessions; "Session 1-400" is no list of them
_LEADING_NUMBER = re.compile(r"^0*(?P<num>\d{1,4})(?:[.,](?P<part>\d{1,2}))?(?:\s*[-–—_.:]+\s*\S|\s*$)")
DATE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")
_FRONTMATTER_KEYS = ("session", "session_number", "session-number", "sessionNumber")


def _numbers(first: int, last: int | None) -> tuple[int, ...]:
    last = first if last is None else last
    return tuple(range(first, last + 1)) if first < last <= first + _LONGEST_RANGE else (first,)


def sessions_in_name(stem: str) -> tuple[int, ...]:
    """The session numbers a name gives with a session word, wherever it stands: `Tempus Session 05
    (2023-04-05)` → (5,), `S05`, `Ep. 12`, `Session 8-9` → (8, 9), `Sessão 02.1` → (2,) (a part)."""
    m = lexicon().session_name.search(fold(stem))
    return _numbers(int(m["num"]), int(m["to"]) if m["to"] else None) if m else ()


_LEADING_WORD = re.compile(r"^0*(?P<num>\d{1,4})(?:[.,](?P<part>\d{1,2}))?\s+[^\W\d]")


def leading_number(stem: str) -> int | None:
    """A number a name starts with (`05 - The Fall`, `06 The Ford`, `012`, `02.2`), which is a
    session's where the folder is one of sessions; a date is no such number."""
    if DATE.match(stem):
        return None
    m = _LEADING_NUMBER.match(stem.strip()) or _LEADING_WORD.match(stem.strip())
    return int(m["num"]) if m else None


def sessions_from_filename(stem: str) -> tuple[int, ...]:
    """`Session 12` → (12,), `Session 8-9` → (8, 9), `012 - The Fall` → (12,); a date or a bare
    number names no session. The reading of a link's target, where the vault is not at hand."""
    found = sessions_in_name(stem)
    if found:
        return found
    m = _LEADING_NUMBER.match(stem.strip())
    return (int(m["num"]),) if m and not DATE.match(stem) and not m.group(0).strip().isdigit() else ()


def sessions_from_frontmatter(frontmatter: Mapping[str, Any]) -> tuple[int, ...]:
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


@dataclass(frozen=True)
class Names:
    """Every note's unique name, and where a link or an embed leads."""

    names: Mapping[str, str]
    _by_path: Mapping[str, str] = field(default_factory=dict, repr=False)
    _by_file: Mapping[str, tuple[str, ...]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, paths: Iterable[str]) -> Names:
        by_stem: dict[str, list[PurePosixPath]] = defaultdict(list)
        by_file: dict[str, list[str]] = defaultdict(list)
        by_path: dict[str, str] = {}
        for rel in paths:
            path = PurePosixPath(rel)
            by_stem[_key(path.stem)].append(path)
            by_file[_key(path.name)].append(rel)
            by_path[_key(rel)] = rel
        names = {}
        for paths_ in by_stem.values():
            for path in paths_:
                names[path.as_posix()] = _shortest_unique(path, paths_)
        return cls(names, by_path, {k: tuple(v) for k, v in by_file.items()})

    def name(self, rel: str) -> str:
        return self.names.get(rel) or PurePosixPath(rel).stem

    def resolve(self, target: str, from_path: str) -> str | None:
        """The note a link or embed names, as Obsidian finds it: a path relative to the linking note
        or to the vault, else the note whose path ends with the longest tail of the target that one
        note ends with (`a/b/Note`, then `b/Note`, then `Note`), the shortest path among equals."""
        t = unquote(target).strip().replace("\\", "/")
        if not t:
            return from_path
        with_md = t if t.casefold().endswith(".md") else t + ".md"
        for path in (posixpath.normpath(posixpath.join(posixpath.dirname(from_path), with_md)), with_md.lstrip("/")):
            found = self._by_path.get(_key(path))
            if found is not None:
                return found
        parts = [p for p in with_md.split("/") if p not in ("", ".", "..")]
        candidates = self._by_file.get(_key(parts[-1]), ()) if parts else ()
        for n in range(len(parts), 0, -1):
            tail = "/" + _key("/".join(parts[-n:]))
            matches = [r for r in candidates if ("/" + _key(r)).endswith(tail)]
            if matches:
                return min(matches, key=lambda r: (r.count("/"), r))
        return None


def _key(text: str) -> str:
    """Paths compared as the file systems vaults sync to compare them: case-insensitive, and in composed
    form (macOS and some sync tools store `é` decomposed)."""
    return unicodedata.normalize("NFC", text).casefold()


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

"""References between notes: what a chunk points at, and the names it can be pointed at by.

Game masters tie their notes together: "as the ransom note from session 14 said", a loot table with
a Session column, an Obsidian `[[Idris_Vantowe]]`. Retrieval follows those references one hop from the
best results (`paths.linked_path`), so a multi-session arc or a character's sheet can reach the
reranker even when it shares no words with the question.

A reference and a name are both keys: `session:14` for a session, `note:idris_vantowe` for a note,
by its file name (folded as the Compendium folds names), as Obsidian resolves a link.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath

from ..text import normalize
from .names import PLURALS, SESSION_WORD, SESSION_WORDS, SINGULARS, sessions_from_filename
from .sessions import match_header

_MENTION = re.compile(
    rf"\b(?:(?P<plural>{SESSION_WORDS})|{SESSION_WORD})\s*(?:#|n[o°º]\.?)?\s*(?P<first>\d{{1,4}})(?!\d)"
    r"(?P<more>(?:\s*(?:,|&|and|y|e|et|und|en|or|o|to|-|–|—)\s*#?\d{1,4}(?!\d))*)",
    re.I,
)
_WORD_STEMS = tuple(sorted({w[:4] for w in SINGULARS | PLURALS}))  # a substring of every session word
_NUMBER = re.compile(r"\d{1,4}")
_RANGE = re.compile(r"(\d{1,4})\s*(?:-|–|—|to)\s*(\d{1,4})")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_SESSION_COLUMN = re.compile(rf"^{SESSION_WORD}\s*(?:#|n[o°º]\.?)?$", re.I)
_LONGEST_RANGE = 20  # "sessions 3-9" names each; "sessions 1-400" is a span of time, not a list


def session_key(number: int) -> str:
    return f"session:{number}"


def note_key(name: str) -> str:
    return f"note:{normalize(PurePosixPath(name).stem if name.endswith('.md') else name)}"


def own_keys(sessions: Iterable[int], path: str) -> set[str]:
    """The keys by which other notes refer to this chunk."""
    return {note_key(PurePosixPath(path).stem)} | {session_key(n) for n in sessions}


def references(text: str, wikilinks: Iterable[str] = ()) -> set[str]:
    """The keys a chunk's text refers to: session mentions, session columns of tables, wikilinks."""
    keys = {session_key(n) for n in _mentioned_sessions(text)}
    keys |= {session_key(n) for n in _table_sessions(text)}
    for link in wikilinks:
        target, _, heading = link.partition("#")
        header = match_header(f"# {heading}") if heading else None
        numbers = (header.number,) if header else sessions_from_filename(PurePosixPath(target).name)
        keys |= {session_key(n) for n in numbers} if numbers else {note_key(target)}
    return keys


def _mentioned_sessions(text: str) -> set[int]:
    """"session 14", "(sesión 3)", "sessions 25 and 27", "sessions 12–14". Only a plural starts a
    list: in "session 3, 4 goblins" the 4 is not a session."""
    numbers: set[int] = set()
    lowered = text.lower()
    if not any(stem in lowered for stem in _WORD_STEMS):  # the regex costs ~9x this scan
        return numbers
    for m in _MENTION.finditer(text):
        listed = m["first"] + (m["more"] if m["plural"] else "")
        for low, high in _RANGE.findall(listed):
            a, b = int(low), int(high)
            if a < b <= a + _LONGEST_RANGE:
                numbers.update(range(a, b + 1))
        numbers.update(int(n) for n in _NUMBER.findall(listed))
    return numbers


def _table_sessions(text: str) -> set[int]:
    """Numbers in the Session column of a Markdown table (a loot ledger, a timeline)."""
    numbers: set[int] = set()
    lines = text.splitlines()
    for i in range(1, len(lines)):
        if not _TABLE_SEPARATOR.match(lines[i]) or "|" not in lines[i - 1]:
            continue
        header = _cells(lines[i - 1])
        columns = [c for c, cell in enumerate(header) if _SESSION_COLUMN.match(cell)]
        if not columns:
            continue
        for row in lines[i + 1 :]:
            if "|" not in row:
                break
            cells = _cells(row)
            for c in columns:
                if c < len(cells) and re.fullmatch(r"#?\d{1,4}", cells[c]):
                    numbers.add(int(cells[c].lstrip("#")))
    return numbers


def _cells(line: str) -> list[str]:
    line = line.strip().removeprefix("|").removesuffix("|")
    return [cell.strip().strip("*_").strip() for cell in line.split("|")]


def chunk_refs(
    chunks: Iterable[tuple[str, Sequence[int], str, str, Sequence[str]]],
) -> list[tuple[str, str, str]]:
    """(chunk id, 'name' | 'to', key) rows for (id, sessions, path, text, wikilinks) of each chunk. A
    chunk does not refer to itself: a session's own header or a sheet's link to its own note is no hop."""
    rows: list[tuple[str, str, str]] = []
    for chunk_id, sessions, path, text, wikilinks in chunks:
        names = own_keys(sessions, path)
        rows += [(chunk_id, "name", key) for key in sorted(names)]
        rows += [(chunk_id, "to", key) for key in sorted(references(text, wikilinks) - names)]
    return rows

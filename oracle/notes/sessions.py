"""The session header detector: split a note into labelled spans before anything else.

A header is a line of its own that starts with a session word and a number: a Markdown heading of
any level (`## Session 12 — The Fall`, `# Sesión 3`), a bold-only line (`**Session 7**`) or a
short plain line (`Session 4:`). A passing mention ("…back in session 5…") never starts a line with
that shape, so it is never a header.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..types import Note

# Session words in the languages game masters write in, accented and not.
SESSION_WORD = r"(?:session|sesi[oó]n|sess[aã]o|sessione|s[eé]ance|sitzung|sessie)"
_NUM = r"(?:#|n[o°º]\.?)?\s*(?P<num>\d{1,4})"
_SEP = r"[:.\-–—|,(]"

_HEADING = re.compile(rf"^(?P<hashes>#{{1,6}})\s+(?:\*\*|__)?\s*{SESSION_WORD}\s*{_NUM}(?!\d)(?P<rest>.*)$", re.I)
_BOLD = re.compile(
    rf"^(?P<mark>\*\*|__)\s*{SESSION_WORD}\s*{_NUM}(?!\d)(?P<rest>[^*_]*?)\s*(?P=mark)\s*:?\s*$", re.I
)
_PLAIN = re.compile(rf"^{SESSION_WORD}\s*{_NUM}(?!\d)\s*(?:(?P<sep>{_SEP})\s*(?P<rest>.{{0,80}}))?$", re.I)
_ANY_HEADING = re.compile(r"^#{1,6}\s+\S")
_FILENAME_NUMBER = re.compile(
    rf"^(?:{SESSION_WORD}[\s_\-]*#?\s*0*(?P<a>\d{{1,4}})(?!\d)|0*(?P<b>\d{{1,4}})\s*[-–—_.]+\s*\S)", re.I
)
_DATE_PREFIX = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}")


@dataclass(frozen=True)
class Header:
    number: int
    title: str  # the header line as read, without Markdown marks
    level: int  # heading level, 0 for bold or plain lines


@dataclass(frozen=True)
class Span:
    """Lines of a note that share one citation label (1-based, inclusive)."""

    label: str
    heading: str
    start_line: int
    end_line: int


def _strip_marks(text: str) -> str:
    return re.sub(r"^[#\s]+|[*_]{2}", "", text).strip().rstrip(":").strip()


def match_header(line: str) -> Header | None:
    """The session header on this line, if the line is one."""
    line = line.strip()
    if not line or len(line) > 160:
        return None
    if m := _HEADING.match(line):
        return Header(int(m["num"]), _strip_marks(line), len(m["hashes"]))
    if m := _BOLD.match(line):
        rest = m["rest"].strip()
        if rest and not re.match(_SEP, rest):
            return None
        return Header(int(m["num"]), _strip_marks(line), 0)
    if m := _PLAIN.match(line):
        return Header(int(m["num"]), _strip_marks(line), 0)
    return None


def session_number_from_filename(stem: str) -> int | None:
    """`Session 12` → 12, `012 - The Fall` → 12; a date or a bare number is not a session name."""
    if _DATE_PREFIX.match(stem):
        return None
    m = _FILENAME_NUMBER.match(stem.strip())
    if not m:
        return None
    return int(m["a"] or m["b"])


def base_label(note: Note) -> str:
    """The label of a note that is not split into sessions."""
    prefix = {"sheet": "Sheet", "world": "World"}.get(note.kind, "Note")
    return f"{prefix}: {note.stem}"


def split_sessions(note: Note) -> list[Span]:
    """Spans covering every line of the note, each with its citation label."""
    lines = note.text.split("\n")
    last = len(lines)
    if note.kind in {"sheet", "world"}:
        return [Span(base_label(note), note.title, 1, last)]
    headers = [(i + 1, h) for i, line in enumerate(lines) if (h := match_header(line))]
    if not headers:
        number = session_number_from_filename(note.stem)
        if number is not None:
            return [Span(f"Session {number}", note.title, 1, last)]
        if note.kind == "session":
            return [Span(f"Session {note.stem}", note.title, 1, last)]
        return [Span(base_label(note), note.title, 1, last)]
    spans = []
    if headers[0][0] > 1:
        spans.append(Span(base_label(note), note.title, 1, headers[0][0] - 1))
    for (line_no, header), following in zip(headers, headers[1:] + [(last + 1, None)]):
        spans.append(Span(f"Session {header.number}", header.title, line_no, following[0] - 1))
    return spans


def is_subheading(line: str) -> bool:
    return bool(_ANY_HEADING.match(line.strip()))

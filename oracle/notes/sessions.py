"""The session header detector: split a note into labelled spans before anything else.

A header is a line of its own that starts with a session word and a number: a Markdown heading of
any level (`## Session 12 — The Fall`, `# Sesión 3`), a bold-only line (`**Session 7**`) or a
short plain line (`Session 4:`). A passing mention ("…back in session 5…") never starts a line with
that shape, so it is never a header.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..lexicon import fold, lexicon
from ..types import Note
from .names import SESSION_WORD

_NUM = r"(?:#|n[o°º]\.?)?\s*(?P<num>\d{1,4})"
_SEP = r"[:.\-–—|,(]"

_HEADING = re.compile(rf"^(?P<hashes>#{{1,6}})\s+(?:\*\*|__)?\s*{SESSION_WORD}\s*{_NUM}(?!\d)(?P<rest>.*)$", re.I)
_BOLD = re.compile(
    rf"^(?P<mark>\*\*|__)\s*{SESSION_WORD}\s*{_NUM}(?!\d)(?P<rest>[^*_]*?)\s*(?P=mark)\s*:?\s*$", re.I
)
_PLAIN = re.compile(rf"^{SESSION_WORD}\s*{_NUM}(?!\d)\s*(?:(?P<sep>{_SEP})\s*(?P<rest>.{{0,80}}))?$", re.I)
_ANY_HEADING = re.compile(r"^#{1,6}\s+\S")


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
    kind: str = "note"
    sessions: tuple[int, ...] = ()


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


def note_label(note: Note) -> str:
    """The label of the note as a whole: its name, after its kind unless it records a session."""
    name = note.name or note.stem
    if note.kind in {"sheet", "world"}:
        return f"{note.kind.capitalize()}: {name}"
    if note.sessions or note.kind == "session":
        return name
    return f"Note: {name}"


def split_sessions(note: Note) -> list[Span]:
    """Spans covering every line of the note, each with its citation label.

    A note is one source. Only a hub (a note that is not one session but holds several under session
    headers, such as a campaign log) is cut at its headers, each section labelled as the note's
    own section (`Campaign Log › Session 12`)."""
    lines = note.text.split("\n")
    last = len(lines)
    label = note_label(note)
    whole = Span(label, note.title, 1, last, "session" if note.sessions or note.kind == "session" else note.kind,
                 note.sessions)
    if note.kind in {"sheet", "world"}:
        return [whole]
    headers = [(i + 1, h) for i, line in enumerate(lines) if (h := match_header(line))]
    numbers = tuple(dict.fromkeys(h.number for _, h in headers))
    titled = bool(headers) and len(numbers) == 1 and not "".join(lines[: headers[0][0] - 1]).strip()
    if not headers or note.sessions:
        # A note its game master numbered is that session, whatever headers it holds; one header of its
        # own at its top titles it ("## Session 19 — The Widow's Price").
        return [replace(whole, heading=headers[0][1].title) if titled else whole]
    if titled:
        # A session note titled by its header.
        return [Span(note_label(replace(note, sessions=numbers)), headers[0][1].title, 1, last, "session", numbers)]
    spans = []
    if headers[0][0] > 1:
        spans.append(Span(label, note.title, 1, headers[0][0] - 1, "note" if note.kind == "session" else note.kind))
    name = note.name or note.stem
    for (line_no, header), following in zip(headers, headers[1:] + [(last + 1, None)], strict=True):
        spans.append(Span(f"{name} › Session {header.number}", header.title, line_no, following[0] - 1, "session",
                          (header.number,)))
    return spans


def _heading_words(heading: str) -> tuple[str, ...]:
    return tuple(re.findall(r"[^\W_]+", fold(heading.strip().strip("*_"))))


def _heads(heading: str, entries: frozenset[tuple[str, ...]]) -> bool:
    """The heading is an entry, or starts with an entry of two words or more (`Previously on Critical Role`)."""
    words = _heading_words(heading)
    return words in entries or any(words[:n] in entries for n in range(2, len(words)))


def is_recap(heading: str) -> bool:
    """A heading under which a session retells the one before: `Recap`, `Previously on…`, `Last time`,
    `Resumen`, `Rückblick` (`oracle/lexicon/*.toml`, `[recap] previous`, every language)."""
    return _heads(heading, lexicon().recap_previous)


def tells_what_happened(heading: str) -> bool:
    """A heading of what happened in the session (`What happened`, `Notes`, `Sucesos`, `Acontecimentos`):
    what a recap retells first (`[recap] happened`, every language)."""
    return _heads(heading, lexicon().recap_happened)


def is_subheading(line: str) -> bool:
    return bool(_ANY_HEADING.match(line.strip()))

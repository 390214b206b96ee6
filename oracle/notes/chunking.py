"""Chunk a parsed note by session.

A session is one chunk. Only a session over the word cap is split: consecutive sub-heading sections
are packed up to the cap without splitting one; only a section that alone exceeds the cap is cut
into word windows with overlap. A session's recap of the session before is a part of its own.
Every part keeps its note's (or its hub section's) label. Secret passages become
GM-only chunks of their own under the same label, so the public chunk never holds secret text.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace

from ..types import GM, Chunk, Note, Visibility
from .sessions import Span, is_recap, is_subheading, match_header, split_sessions

_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class _Piece:
    start: int  # character offsets into the span's text
    end: int
    heading: str


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def chunk_id(path: str, label: str, part: int, visibility: str, digest: str, head: str = "") -> str:
    """Covers all that is embedded, the head too: a chunk whose head changes (a session number written
    into it, or no more) gets new windows; windows of the very same text are stored again, not
    embedded (`index/ingest.py`)."""
    key = "\x00".join([path, label, str(part), visibility, digest] + ([head] if head else []))
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:20]


def count_words(text: str) -> int:
    return len(text.split())


def window_words(text: str, max_words: int, overlap: int) -> list[tuple[int, int]]:
    """Character ranges of word windows of at most `max_words`, consecutive ones sharing `overlap`."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    if not words:
        return []
    step = max(1, max_words - min(overlap, max_words - 1))
    ranges = []
    for first in range(0, len(words), step):
        last = min(first + max_words, len(words)) - 1
        ranges.append((words[first][0], words[last][1]))
        if last == len(words) - 1:
            break
    return ranges


def _sections(text: str) -> list[tuple[int, int, str]]:
    """Sections of a span's text, cut before each sub-heading line: (start, end, heading)."""
    cuts = [0]
    headings = [""]
    offset = 0
    for i, line in enumerate(text.split("\n")):
        if i > 0 and is_subheading(line):
            cuts.append(offset)
            headings.append(line.strip().lstrip("#").strip())
        offset += len(line) + 1
    ends = cuts[1:] + [len(text)]
    return list(zip(cuts, ends, headings, strict=True))


def pack(text: str, max_words: int, overlap: int, *, recaps: bool = False) -> list[_Piece]:
    """Split a span's text into pieces of at most `max_words` (see the module docstring). With
    `recaps`, a recap section is a piece of its own: it retells another session (`retrieve/copies.py`)."""
    sections = _sections(text)
    if recaps and sections and not sections[0][2]:  # a span that opens with its first sub-heading
        first = text[sections[0][0] : sections[0][1]].lstrip().split("\n", 1)[0]
        if is_subheading(first) and is_recap(first.strip().lstrip("#")):
            sections[0] = (sections[0][0], sections[0][1], first.strip().lstrip("#").strip())
    recap = [recaps and is_recap(heading) for _, _, heading in sections]
    if count_words(text) <= max_words and not any(recap):
        return [_Piece(0, len(text), "")]
    pieces: list[_Piece] = []
    current: list[tuple[int, int, str]] = []
    current_words = 0

    def flush() -> None:
        nonlocal current, current_words
        if current:
            pieces.append(_Piece(current[0][0], current[-1][1], current[0][2]))
        current, current_words = [], 0

    for (start, end, heading), alone in zip(sections, recap, strict=True):
        words = count_words(text[start:end])
        if alone and words <= max_words:
            flush()
            pieces.append(_Piece(start, end, heading))
        elif words > max_words:
            flush()
            for a, b in window_words(text[start:end], max_words, overlap):
                pieces.append(_Piece(start + a, start + b, heading))
        elif current_words + words > max_words:
            flush()
            current, current_words = [(start, end, heading)], words
        else:
            current.append((start, end, heading))
            current_words += words
    flush()
    return pieces


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink a range to drop surrounding whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _span_chunks(
    note: Note, span: Span, text: str, first_line: int, visibility: Visibility, max_words: int, overlap: int
) -> list[Chunk]:
    drafts = []
    for piece in pack(text, max_words, overlap, recaps=bool(span.sessions)):
        start, end = _trim(text, piece.start, piece.end)
        if start == end:
            continue
        heading = span.heading if not piece.heading else f"{span.heading} > {piece.heading}"
        drafts.append((start, end, heading))
    chunks = []
    for part, (start, end, heading) in enumerate(drafts, 1):
        body = text[start:end]
        digest = text_hash(body)
        start_line = first_line + text.count("\n", 0, start)
        end_line = first_line + text.count("\n", 0, end)
        links = tuple(dict.fromkeys(link.target for link in note.links if start_line <= link.line <= end_line))
        drafted = Chunk(
            id="",
            path=note.path,
            label=span.label,
            kind=span.kind,
            part=part,
            parts=len(drafts),
            heading=heading,
            start_line=start_line,
            end_line=end_line,
            text=body,
            text_hash=digest,
            visibility=visibility,
            links=links,
            sessions=span.sessions,
        )
        chunks.append(replace(drafted, id=chunk_id(note.path, span.label, part, visibility, digest, drafted.head)))
    return chunks


def chunk_note(note: Note, *, max_words: int = 1200, overlap: int = 120) -> list[Chunk]:
    """All chunks of a note: public ones from its text, GM-only ones from its secrets."""
    lines = note.text.split("\n")
    chunks: list[Chunk] = []
    for span in split_sessions(note):
        text = "\n".join(lines[span.start_line - 1 : span.end_line])
        first, _, rest = text.strip().partition("\n")
        if match_header(first) and not rest.strip():
            text = ""  # a header with nothing under it is not a session worth citing
        chunks += _span_chunks(note, span, text, span.start_line, note.visibility, max_words, overlap)
        secrets = [s for s in note.secrets if span.start_line <= s.start_line <= span.end_line]
        if secrets:
            gm_span = replace(span, heading=f"{span.heading} (GM)", start_line=secrets[0].start_line,
                              end_line=secrets[-1].end_line)
            gm_text = "\n\n".join(s.text for s in secrets)
            # Secrets are joined, so offsets no longer map to file lines: cite the secrets' range.
            chunks += [
                replace(c, start_line=gm_span.start_line, end_line=gm_span.end_line)
                for c in _span_chunks(note, gm_span, gm_text, gm_span.start_line, GM, max_words, overlap)
            ]
    seen: set[str] = set()
    unique = []
    for chunk in chunks:
        if chunk.id not in seen:  # identical text repeated under one label: index it once
            seen.add(chunk.id)
            unique.append(chunk)
    return unique

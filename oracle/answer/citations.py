"""Verify an answer's citations against the context it was given, and read a citation's lines again.

A bracket whose content is a label of the context is a citation (several labels may share one
bracket, separated by `;` or `,`). A label-shaped citation the context did not contain is removed
from what is shown and counted. Brackets that are not label-shaped (`[sic]`) are left alone.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..types import Chunk
from .context import Context

_BRACKET = re.compile(r"([ \t]*)\[([^\[\]\n]{1,160})\](?!\()")
_TRAILING_CITATIONS = re.compile(r"([.!?])(\s*)((?:\[[^\[\]\n]+\][ \t]*)+)")
_LABEL_SHAPE = re.compile(r"^(session\b|sesi[oó]n\b|sheet:|world:|note:|[^\]]+ › )", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_INNER = re.compile(r"\[([^\[\]\n]+)\]")


@dataclass(frozen=True)
class Citation:
    label: str
    path: str
    start_line: int
    end_line: int
    sessions: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "path": self.path, "lines": [self.start_line, self.end_line]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Citation:
        """A citation as `to_json` wrote it (its sessions are not written, so not read)."""
        start, end = data["lines"]
        return cls(data["label"], data["path"], start, end)


@dataclass(frozen=True)
class Verified:
    text: str  # the answer with unknown citations removed
    citations: tuple[Citation, ...]
    unknown: tuple[str, ...]  # labels cited that the context did not hold
    uncited_sentences: int


def _key(label: str) -> str:
    return " ".join(label.split()).casefold()


def verify(answer: str, context: Context) -> Verified:
    known = {_key(label): label for label in context.labels}
    cited: list[str] = []
    unknown: list[str] = []

    def split(inner: str) -> list[str]:
        """Labels in one bracket: `;`-separated, or `,`-separated unless the comma is inside a label."""
        parts: list[str] = []
        for piece in re.split(r"\s*;\s*", inner.strip()):
            if _key(piece) in known:
                parts.append(piece)
                continue
            words = piece.split(",")
            i = 0
            while i < len(words):
                j = next((j for j in range(len(words), i, -1) if _key(",".join(words[i:j])) in known), i + 1)
                parts.append(",".join(words[i:j]).strip())
                i = j
        return [p for p in parts if p]

    def check(match: re.Match[str]) -> str:
        space, inner = match.group(1), match.group(2).strip()
        parts = split(inner)
        if not any(_key(p) in known or _LABEL_SHAPE.match(p) for p in parts):
            return match.group(0)  # not a citation
        kept = []
        for part in parts:
            if _key(part) in known:
                label = known[_key(part)]
                kept.append(label)
                if label not in cited:
                    cited.append(label)
            else:
                unknown.append(part)
        return f"{space}[{'; '.join(kept)}]" if kept else ""  # a removed bracket takes its space along

    text = _BRACKET.sub(check, answer).strip()
    citations = []
    for label in cited:
        chunk = context.chunk_for(label)
        if chunk is not None:
            citations.append(Citation(label, chunk.path, chunk.start_line, chunk.end_line, chunk.sessions))
    uncited = sum(1 for _, labels in cited_sentences(text, cited) if not labels)
    return Verified(text, tuple(citations), tuple(unknown), uncited)


def without_citations(text: str) -> str:
    """`text` with each citation-shaped bracket (`[Session 3]`, `[Sheet: Kat; Session 2]`) made a
    space: what checking citations may remove or keep, so the words around one read the same either way."""

    def drop(match: re.Match[str]) -> str:
        parts = re.split(r"\s*[;,]\s*", match.group(2).strip())
        return " " if any(_LABEL_SHAPE.match(p) for p in parts) else match.group(0)

    return _BRACKET.sub(drop, text)


def cited_sentences(text: str, labels: Iterable[str]) -> list[tuple[str, tuple[str, ...]]]:
    """The answer's sentences of four words or more, each with the labels it cites (of `labels`).
    "… at noon. [Session 2]" cites the sentence before the bracket."""
    labels = list(labels)
    counting = _TRAILING_CITATIONS.sub(lambda m: f" {m.group(3).strip()}{m.group(1)}{m.group(2)}", text)
    out = []
    for sentence in _SENTENCE.split(counting):
        if len(sentence.split()) >= 4:
            named = {part.strip() for inner in _INNER.findall(sentence) for part in inner.split(";")}
            out.append((sentence, tuple(c for c in labels if c in named)))
    return out


@dataclass(frozen=True)
class CitedText:
    citation: Citation
    text: str  # empty: nothing there the reader may read


def cited_lines(chunks: Sequence[Chunk], start: int, end: int) -> str:
    """The lines `start`–`end` of the file, from the chunks that hold them. A public chunk's text is
    its file lines; a secret's chunk (joined secrets, lines no longer the file's) is shown whole."""
    pieces: list[str] = []
    seen: set[int] = set()
    for chunk in chunks:
        lines = chunk.text.splitlines()
        if chunk.end_line - chunk.start_line + 1 != len(lines):
            pieces.append(chunk.text.strip())
            continue
        for number in range(max(start, chunk.start_line), min(end, chunk.end_line) + 1):
            if number not in seen:
                seen.add(number)
                pieces.append(lines[number - chunk.start_line])
    return "\n".join(pieces).strip()

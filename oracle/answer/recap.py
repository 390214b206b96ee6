""""Previously on…": which session a recap retells, and its passages when the model writes nothing."""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..types import Chunk
from .citations import Citation

OPENING_WORDS = 60
_SESSION_NUMBER = re.compile(r"(\d+)")


def recap_prompt(label: str) -> str:
    return (f"Previously on… Retell {label} for the players: what happened, in order, in a few "
            "short paragraphs, citing the session after every claim.")


def opening_lines(lines: Sequence[str], words: int = OPENING_WORDS) -> tuple[int, list[str]]:
    """Where a passage's opening starts (0-based line) and its lines: the heading and blank lines
    before the text left out, then whole lines until `words` words are shown."""
    first = 0
    while first < len(lines) - 1 and (not lines[first].strip() or lines[first].lstrip().startswith("#")):
        first += 1
    shown: list[str] = []
    count = 0
    for line in lines[first:]:
        if count >= words:
            break
        shown.append(line)
        count += len(line.split())
    while shown and not shown[-1].strip():
        shown.pop()
    return first, shown


def pick_session(chunks: Sequence[Chunk], wanted: str | None) -> list[Chunk]:
    """The parts of one session note (or hub section): the highest-numbered one, or the one `wanted`
    names by number ("12", "Session 12") or by a word of its label or heading."""
    sessions: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        sessions.setdefault(chunk.label, []).append(chunk)

    def number(label: str) -> tuple[int, str]:
        return max((n for c in sessions[label] for n in c.sessions), default=-1), label

    if not sessions:
        return []
    if wanted and wanted.strip():
        text = " ".join(wanted.split()).casefold()
        digits = _SESSION_NUMBER.search(text)
        if exact := [label for label in sessions if label.casefold() == text]:
            matches = exact
        elif digits:
            matches = [label for label, parts in sessions.items()
                       if any(int(digits.group(1)) in c.sessions for c in parts)]
        else:
            matches = [label for label, parts in sessions.items()
                       if text in label.casefold() or any(text in p.heading.casefold() for p in parts)]
        if not matches:
            return []
        label = max(matches, key=number)
    else:
        label = max(sessions, key=number)
    return sorted(sessions[label], key=lambda c: (c.path, c.start_line, c.part))


def session_passages(reason: str, parts: Sequence[Chunk], annotations: Mapping[str, str]) -> tuple[str, Citation]:
    """The recap without the model's text: the session's annotation and its opening lines, cited."""
    first = parts[0]
    offset, opening = opening_lines(first.text.splitlines())
    start = first.start_line + offset
    end = start + max(len(opening), 1) - 1
    annotation = annotations.get(first.id)
    blocks = [f"The Oracle could not write the recap ({reason}). {first.label} in the notes:"]
    if annotation:
        blocks.append(f"*{annotation}*")
    blocks.append(f"[{first.label}] ({first.path}, lines {start}–{end})\n> " + "\n> ".join(opening))
    return "\n\n".join(blocks), Citation(first.label, first.path, start, end, first.sessions)

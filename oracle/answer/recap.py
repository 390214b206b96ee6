""""Previously on…": which session a recap retells, and its passages when the model writes nothing."""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..notes.sessions import tells_what_happened
from ..texts import Texts, texts
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


# A session note with fewer words of its own than this is a template not yet filled in, not the
# last session played ("sesion 25.md": its headings and a checklist of quests).
TOLD = 10
_MARKUP_ONLY = re.compile(r"^[\s>*_\-+|=#`~<>\[\]():.,;!?0-9]*$")
_TASK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\[.\]")


def told(parts: Sequence[Chunk]) -> int:
    """The words a session tells: its lines but headings, bare markup and checklist items."""
    words = 0
    for chunk in parts:
        for line in chunk.text.splitlines():
            stripped = line.strip()
            if stripped.startswith("#") or _MARKUP_ONLY.match(stripped) or _TASK.match(line):
                continue
            words += len(stripped.split())
    return words


def pick_session(chunks: Sequence[Chunk], wanted: str | None) -> list[Chunk]:
    """The parts of one session note (or hub section): the highest-numbered one that tells something
    (`told`), or the one `wanted` names by number ("12", "Session 12") or by a word of its label or
    heading."""
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
        filled = [label for label, parts in sessions.items() if told(parts) >= TOLD] or list(sessions)
        label = max(filled, key=number)
    return sorted(sessions[label], key=lambda c: (c.path, c.start_line, c.part))


def story_start(parts: Sequence[Chunk]) -> tuple[Chunk, int]:
    """Where a session tells what happened: the part and line (0-based) of the first heading of what
    happened (`What happened`, `Notes`, `Sucesos`, `Acontecimentos`), else the opening of its first
    part (the game master's notes before it are no story)."""
    for chunk in parts:
        for i, line in enumerate(chunk.text.splitlines()):
            if line.lstrip().startswith("#") and tells_what_happened(line.strip().lstrip("#")):
                return chunk, i
    return parts[0], 0


def session_passages(reason: str, parts: Sequence[Chunk], annotations: Mapping[str, str],
                     words: Texts | None = None) -> tuple[str, Citation]:
    """The recap without the model's text: the session's annotation and the opening of what it tells
    happened, cited."""
    first, at = story_start(parts)
    offset, opening = opening_lines(first.text.splitlines()[at:])
    offset += at
    start = first.start_line + offset
    end = start + max(len(opening), 1) - 1
    annotation = annotations.get(first.id)
    blocks = [(words or texts()).could_not_recap.format(reason=reason, label=first.label)]
    if annotation:
        blocks.append(f"*{annotation}*")
    blocks.append(f"[{first.label}] ({first.path}, lines {start}–{end})\n> " + "\n> ".join(opening))
    return "\n\n".join(blocks), Citation(first.label, first.path, start, end, first.sessions)

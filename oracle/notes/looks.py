"""What looks like the game master's but players read: worth the game master's look.

A heading such as `## Secrets of the Deep` or a callout titled `DM's Note` inside an `[!info]` box
carries a mark's word without being a mark (`oracle.marks`), so players read it. When the Oracle
cannot tell, the ingest report lists it, and the game master decides (a heading in
ORACLE_GM_HEADINGS, a note in ORACLE_GM_NOTES).
"""
from __future__ import annotations

import re

from ..marks import Marks
from .secrets import callout_type

_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.+?)[ \t#]*$")
_CALLOUT_TITLE = re.compile(r"^[ \t]*>[ \t]*\[![^\]\n]*\][-+]?[ \t]*(.*)$")


def public_marks(text: str, marks: Marks) -> tuple[tuple[int, str], ...]:
    """(line, what) of each heading and callout title in players' `text` that carries a mark's word."""
    out: list[tuple[int, str]] = []
    for number, line in enumerate(text.split("\n"), 1):
        if (heading := _HEADING.match(line)) is not None:
            word = marks.story_title(heading.group(1))
            if word:
                out.append((number, f"the heading {heading.group(1).strip()!r} has {word!r} in a title"))
        elif (title := _CALLOUT_TITLE.match(line)) is not None and title.group(1).strip():
            word = marks.words(title.group(1)) or marks.story_title(title.group(1))
            if word:
                kind = callout_type(line.lstrip(" \t>")) or ""
                out.append((number, f"a [!{kind}] callout titled {title.group(1).strip()!r} is shown to players"))
    return tuple(out)

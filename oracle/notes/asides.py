"""What the table says to itself, out of the game: readable, never searched for what happened.

Game masters and players open or close a session with notes about the table, not the story —
`## Feedback`, `# Notas importantes de la sesión`, `## Session zero`, scheduling, safety tools — with
the players named. Retrieved for a story question they crowd out what happened ("¿Quién es Xanath?"
found two feedback-only chunks) and a model cites them as events. Such a section (a heading of the
vault's language's `[table]` list, `oracle/lexicon/*.toml`, down to the next heading of its level or
higher) is cut from the text that is indexed, lines kept, and named in the ingest report. It is no
secret: players read it in their notes as before.
"""
from __future__ import annotations

from ..marks import Marks
from ..types import Aside
from .secrets import headings


def cut_asides(text: str, marks: Marks) -> tuple[str, tuple[Aside, ...]]:
    """`text` with every out-of-game section blanked (the line count kept), and the sections cut."""
    if not marks.lexicon.table_talk or "#" not in text and "\n-" not in text and "\n=" not in text:
        return text, ()
    lines = text.split("\n")
    heads = headings(text)
    asides: list[Aside] = []
    for n, (level, first, content) in enumerate(heads):
        if not marks.table_talk(content.split("\n")[-1]):
            continue
        if asides and first < asides[-1].end_line:  # inside a section already cut
            continue
        end = next((at for lv, at, _ in heads[n + 1 :] if lv <= level), len(lines))
        asides.append(Aside(first + 1, end, content.split("\n")[-1].strip()))
    if not asides:
        return text, ()
    for aside in asides:
        for i in range(aside.start_line - 1, aside.end_line):
            lines[i] = ""
    return "\n".join(lines), tuple(asides)

"""Copies do not crowd out their sources.

Game masters open a session's notes with a recap of the session before (`## Recap`, `## Previously
on…`): the same events, told again. Chunking gives such a section a chunk of its own, so the rest of
the session is not found through it. After fusion, a recap whose source session is also in the list
follows it: right after the source when the recap matched better (it says the asked thing in brief,
and a player or a bank looking for every note that holds it finds both), at the end of the list when
it matched worse (it adds nothing the source does not say, and would take one of the first k).
"""
from __future__ import annotations

from dataclasses import replace

from ..notes.sessions import is_recap
from ..types import Chunk
from .retrieval import Hit


def is_copy(chunk: Chunk) -> bool:
    """A session's recap section: the heading its part starts under names one."""
    return bool(chunk.sessions) and is_recap(chunk.heading.rsplit(" > ", 1)[-1])


def sources_first(hits: list[Hit]) -> list[Hit]:
    """`hits` with each recap whose previous session is also listed moved after that session: just after
    its first telling when the recap ranked above it, to the end when below. Ranks renumbered."""
    first: dict[int, int] = {}  # session number -> index of its first telling that is not a copy
    for i, h in enumerate(hits):
        if not is_copy(h.chunk):
            for n in h.chunk.sessions:
                first.setdefault(n, i)
    ordered: list[Hit] = []
    after: dict[int, list[Hit]] = {}  # index of a source -> the recaps that ranked above it
    last: list[Hit] = []
    for i, h in enumerate(hits):
        source = first.get(min(h.chunk.sessions) - 1) if is_copy(h.chunk) else None
        if source is None:
            ordered.append(h)
            ordered.extend(after.pop(i, []))
        elif source > i:
            after.setdefault(source, []).append(h)
        else:
            last.append(h)
    reordered = ordered + last
    if all(a is b for a, b in zip(reordered, hits, strict=True)):
        return hits
    return [replace(h, rank=rank) for rank, h in enumerate(reordered, 1)]

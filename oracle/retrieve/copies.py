"""Copies do not crowd out their sources.

Game masters open a session's notes with a recap of the session before (`## Recap`, `## Previously
on…`): the same events, told again. Chunking gives such a section a chunk of its own, so the rest of
the session is not found through it; after fusion, a recap whose source session is also in the list
moves to the end, so the source keeps its place and the copy does not take one of the first k.
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
    """`hits` with each recap whose previous session is also listed moved to the end, ranks renumbered."""
    told = {n for h in hits if not is_copy(h.chunk) for n in h.chunk.sessions}
    copies = [h for h in hits if is_copy(h.chunk) and min(h.chunk.sessions) - 1 in told]
    if not copies:
        return hits
    moved = {id(h) for h in copies}
    ordered = [h for h in hits if id(h) not in moved] + copies
    return [replace(h, rank=rank) for rank, h in enumerate(ordered, 1)]

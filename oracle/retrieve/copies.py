"""Copies do not crowd out their sources.

Game masters open a session's notes with a recap of the session before (`## Recap`, `## Previously
on…`): the same events, told again. Chunking gives such a section a chunk of its own, so the rest of
the session is not found through it. After fusion, a recap whose source session is also in the list
is told after it: a recap that matched better brings its source up to just before it (it says the
asked thing in brief, and when the source lies far below, the recap may be the only record of what
happened: the source was the plan), one that matched worse goes to the end of the list (it adds
nothing the source does not say, and would take one of the first k), unless it is one of the
keyword path's two best, which the pipeline then brings back among the first five.
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
    """`hits` with each recap whose previous session is also listed told after that session: a recap that
    ranked above its source brings the source up to just before it, one that ranked below goes to the
    end. Ranks renumbered."""
    first: dict[int, int] = {}  # session number -> index of its first telling that is not a copy
    for i, h in enumerate(hits):
        if not is_copy(h.chunk):
            for n in h.chunk.sessions:
                first.setdefault(n, i)
    ordered: list[Hit] = []
    raised: set[int] = set()  # indexes of sources already brought up to a recap
    last: list[Hit] = []
    for i, h in enumerate(hits):
        if i in raised:
            continue
        source = first.get(min(h.chunk.sessions) - 1) if is_copy(h.chunk) else None
        if source is not None and source > i:
            if source not in raised:
                raised.add(source)
                ordered.append(hits[source])
            ordered.append(h)
        elif source is not None:
            last.append(h)
        else:
            ordered.append(h)
    reordered = ordered + last
    if all(a is b for a, b in zip(reordered, hits, strict=True)):
        return hits
    return [replace(h, rank=rank) for rank, h in enumerate(reordered, 1)]

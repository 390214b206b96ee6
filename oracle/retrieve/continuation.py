"""What came next: "and then what?" goes on from the passage told last.

Searched by its words, "and then what?" finds what the question before it found, and the model is
given the same passages again: the story goes on in none of them when it goes on past the passage
told last. A question that asks only what came next (`asks_what_next`) keeps the passage told last
first (a passage holds up to 1,200 words of a session: what came next is often further down it) and
puts right after it the passage that follows it in the notes: the next part of its note or, when
that passage ends its note, the opening of the next session, a recap of the session before skipped.
The rest of the search follows. The passage told last is the one the thread's answers told last
(`Answer.told`, kept by the bot with each answer); a thread that kept none (an older bot, a reingest
since, a passage the reader may not read) takes the first passage of the latest question that asked
something, searched again, carried one passage on by each "and then?" after it (one back by each
"and before that?"): `SearchPipeline._told_last`. A question that says next of someone ("what did
Kleb do after that?") goes on from there too, but only through those of the two passages that hold
a word it names something by: otherwise what it names is told elsewhere, and its own search decides.
"Before that" goes back alike: the passage told last, then the one before it (the last of the session
before, across a session's start).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..index.store import Store
from ..lexicon import words
from ..stems import Stemming
from ..types import Chunk, Clearance
from .copies import is_copy
from .followup import Went
from .retrieval import Hit


async def beside(store: Store, told: Chunk, clearance: Clearance, went: Went = "on") -> Chunk | None:
    """The passage after `told` in the notes the reader may read (`went` "on"), or before it ("back");
    None: nothing comes after, or before, it. Across a session's start, before means the last
    passage of the session before."""
    after = went == "on"
    near = await store.chunk_beside(told, clearance, after=after)
    while near is not None and is_copy(near):
        near = await store.chunk_beside(near, clearance, after=after)
    if near is not None or not told.sessions:
        return near
    number = max(told.sessions) + 1 if after else min(told.sessions) - 1
    session = [c for c in await store.chunks_of_session(number, clearance) if not is_copy(c)]
    return (session[0] if after else session[-1]) if session else None


async def carried(store: Store, told: Chunk, steps: int, clearance: Clearance) -> Chunk:
    """`told`, carried `steps` passages on (back, when fewer than none), as far as the notes go."""
    for _ in range(abs(steps)):
        near = await beside(store, told, clearance, "on" if steps > 0 else "back")
        if near is None:
            break
        told = near
    return told


def naming(chunks: Sequence[Chunk], named: Sequence[str], stemming: Stemming) -> list[Chunk]:
    """Those of `chunks` whose label or text holds one of the words `named`, stems compared. Only
    the words that begin as a named word does are stemmed (a stem begins as its word does): a
    passage has hundreds of words, and stemming them all costs tens of milliseconds."""
    wanted = set(stemming.own(named))
    starts = {w[:3] for w in named}

    def holds(chunk: Chunk) -> bool:
        alike = sorted({w for w in words(f"{chunk.label} {chunk.text}") if w[:3] in starts})
        return bool(wanted.intersection(stemming.own(alike)))

    return [c for c in chunks if holds(c)]


def told_first(hits: Sequence[Hit], first: Sequence[Chunk]) -> list[Hit]:
    """`first` at the head of `hits` (each once, scored as the best hit), then the other hits; ranks renumbered."""
    best = hits[0].score if hits else 0.0
    ids = {c.id for c in first}
    order = [Hit(c, 0, best) for c in dict((c.id, c) for c in first).values()]
    order += [h for h in hits if h.chunk.id not in ids]
    return [replace(h, rank=rank) for rank, h in enumerate(order, 1)]

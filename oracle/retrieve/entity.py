"""The entity path: names in the question matched against the Compendium (case-, accent-,
possessive-insensitive, longest names first, small typos tolerated); every chunk mentioning a
matched entity is a candidate, weighted by the entity's rarity so an everywhere-character cannot
crowd out the one session that matters.

Returns (chunk id, score) pairs, best first, for visible chunks only."""

from __future__ import annotations

import difflib
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ..index.index import Index
from ..index.store import MentionWeight, Store, VisibleAlias
from ..offload import question_step
from ..text import STOPWORDS, normalize_text
from ..types import Clearance, Scored


@dataclass(frozen=True)
class EntityMatch:
    entity_id: int
    name: str
    matched: str  # the words of the question that named it
    note_path: str | None


class EntityMatcher:
    """The Compendium names one reader may see, compiled for matching questions."""

    def __init__(self, aliases: Sequence[VisibleAlias]) -> None:
        self.by_norm: dict[str, list[tuple[int, str, str | None]]] = defaultdict(list)
        for a in aliases:
            if len(a.norm) >= 2 and a.norm not in STOPWORDS:
                self.by_norm[a.norm].append((a.entity_id, a.name, a.note_path))
        self.single_words = [n for n in self.by_norm if " " not in n and len(n) >= 4]
        # The last word of a noted entity's name alone, when no other entity's name ends in or is
        # that word: players say "the archduke" for "the Lost Archduke", "the monk" for "the Candle
        # Monk". Only entities with a note of their own: names found in running text ("Darrington
        # Name") are too often not names. Matched exactly, never as a typo.
        heads: dict[str, dict[int, tuple[int, str, str | None]]] = defaultdict(dict)
        for norm, owners in self.by_norm.items():
            head = norm.rsplit(" ", 1)[-1]
            if head != norm and len(head) >= 4 and head not in STOPWORDS:
                for owner in owners:
                    heads[head][owner[0]] = owner
        for head, by_entity in heads.items():
            (entity_id, name, note_path), *others = by_entity.values()
            if not others and note_path and head not in self.by_norm:
                self.by_norm[head] = [(entity_id, name, note_path)]
        names = sorted(self.by_norm, key=len, reverse=True)  # multi-word names first
        self.pattern = (
            re.compile(r"(?<!\w)(?:" + "|".join(re.escape(n) for n in names) + r")(?!\w)") if names else None
        )

    def find(self, question: str) -> list[EntityMatch]:
        text = re.sub(r"(?<=\w)'s\b", "", normalize_text(question))
        found: dict[int, EntityMatch] = {}
        covered: list[tuple[int, int]] = []
        if self.pattern is not None:
            for m in self.pattern.finditer(text):
                covered.append(m.span())
                for entity_id, name, note_path in self.by_norm[m.group()]:
                    found.setdefault(entity_id, EntityMatch(entity_id, name, m.group(), note_path))
        # A typo a player might make: "Aldus" for "Aldous". Only longer words, never stopwords.
        for m in re.finditer(r"[^\W\d_][\w'-]{3,}", text):
            if any(a <= m.start() < b for a, b in covered) or m.group() in STOPWORDS:
                continue
            close = difflib.get_close_matches(m.group(), self.single_words, n=1, cutoff=0.84)
            if close:
                for entity_id, name, note_path in self.by_norm[close[0]]:
                    found.setdefault(entity_id, EntityMatch(entity_id, name, m.group(), note_path))
        return list(found.values())


class MentionStats:
    """How many chunks one reader may see, and how many of them mention each entity, in one index
    generation: they change only when an ingest commits. On a 25k-chunk index, reading them for
    every question was over a third of the entity path. Filled as entities are first named. Only
    ever one reader's (the first clearance asked with; another's are refused): a player's counts
    must hold no GM-only chunk."""

    def __init__(self) -> None:
        self.total: int | None = None
        self.df: dict[int, int] = {}
        self.clearance: Clearance | None = None

    async def indexed(self, store: Store, clearance: Clearance) -> int:
        """The chunks the reader may see: the N of the entity path's rarity, of the keyword path's
        common terms and of the learned fusion's term IDF (the term counts they divide count the
        same chunks: `Store.term_docs`). Counting them took 1 ms a question at 25k chunks."""
        if self.clearance is None:
            self.clearance = clearance
        elif clearance is not self.clearance:
            raise ValueError(f"mention counts of {self.clearance} asked for a reader of {clearance}")
        if self.total is None:
            self.total = await store.count_chunks(clearance)
        return self.total

    async def read(
        self, store: Store, entity_ids: Sequence[int], clearance: Clearance
    ) -> tuple[int, dict[int, int]]:
        """(visible chunks, {entity id: chunks mentioning it}) for the named entities mentioned anywhere."""
        total = await self.indexed(store, clearance)
        missing = [i for i in entity_ids if i not in self.df]
        if missing:
            counts = await store.mention_counts(missing, clearance)
            self.df.update({i: counts.get(i, 0) for i in missing})
        return total, {i: self.df[i] for i in sorted(set(entity_ids)) if self.df[i]}


def mention_weight(entity_id: int, idf: float, own_note: str | None, own_only: bool) -> MentionWeight:
    """A mention made `count` times adds idf · (1 + ln count); a mention in the entity's own note
    (its sheet) another 2 · idf + 1, so the sheet comes first among equals."""
    return MentionWeight(entity_id, idf, own_note, 2 * idf + 1, own_only)


async def entity_path(
    store: Store,
    matches: Sequence[EntityMatch],
    clearance: Clearance,
    depth: int,
    ubiquity: float = 0.5,
    stats: MentionStats | None = None,
) -> Scored:
    """Chunks mentioning the matched entities, scored Σ over the entities they mention of
    idf(entity) · (1 + ln count), plus 2 · idf + 1 in the entity's own note (`mention_weight`).

    idf = ln((N + 1) / df): an entity mentioned in every chunk adds almost nothing, a rare one a lot.
    An entity named in more than `ubiquity` of the chunks (the player characters) contributes only
    its own note: listing every session it appears in would put an arbitrary order into fusion.
    The sum is taken in SQL (`Store.mention_scores`) with the weights set here.
    `stats` are the counts of the store's generation and this clearance, kept between questions.
    """
    if not matches:
        return []
    total, df = await (stats or MentionStats()).read(store, [m.entity_id for m in matches], clearance)
    own_note = {m.entity_id: m.note_path for m in matches}
    weights = [
        mention_weight(entity_id, math.log((total + 1) / count), own_note.get(entity_id), count > ubiquity * total)
        for entity_id, count in df.items()
        if count <= ubiquity * total or own_note.get(entity_id)  # an everywhere-entity brings its own note only
    ]
    return [(r.chunk_id, r.score) for r in await store.mention_scores(weights, clearance, depth)]


class Matchers:
    """Each reader's matcher and the entity path's counts, built once per committed ingest (off the
    event loop) and kept for both clearances of the index being served."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self._built: dict[tuple[str, Clearance], tuple[EntityMatcher, MentionStats]] = {}

    async def lookup(self, clearance: Clearance, store: Store | None = None) -> tuple[EntityMatcher, MentionStats]:
        """Those of `store`'s index (a question's snapshot), or of the index served now."""
        store = store or await self.index.store()
        key = (await store.generation(), clearance)
        if key not in self._built:
            matcher = await question_step(EntityMatcher, await store.visible_aliases(clearance))
            # Keep the other clearance's entry for the same index; forget older indexes.
            self._built = {k: v for k, v in self._built.items() if k[0] == key[0]} | {key: (matcher, MentionStats())}
        return self._built[key]

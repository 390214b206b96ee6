"""The three retrieval paths, and the hop from their fused results along the notes' references. Each
returns (chunk id, score) pairs, best first, for visible chunks only.

- keyword: SQLite FTS5 bm25 over label, heading and text, diacritics removed and words stemmed
  (Porter) alike in the index and the question; every user term is quoted, so no question can
  break MATCH, and literal terms (names, odd tokens) are kept.
- semantic: the query embedded once, Chroma cosine over the dense windows, collapsed to chunks by
  their best window; a window whose chunk SQLite does not hold (a half-finished ingest) is dropped.
- entity: names in the question matched against the Compendium (case-, accent-, possessive-
  insensitive, longest names first, small typos tolerated); every chunk mentioning a matched entity
  is a candidate, weighted by the entity's rarity so an everywhere-character cannot crowd out the
  one session that matters.
- linked (after fusion): sessions and notes that the fused top k refer to, or that refer to them,
  for the reranker to weigh; a multi-session arc is often tied together only by such references.
"""
from __future__ import annotations

import asyncio
import difflib
import math
import re
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from .compendium import normalize, normalize_text
from .embed import Embedder
from .store import Store
from .vectors import VectorStore

Scored = list[tuple[str, float]]
PATHS = ("keyword", "semantic", "entity")

STOPWORDS = frozenset(
    """a about after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her
    here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
    now of off on once only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too under until up very was
    we were what when where which while who whom why will with would you your yours yourself yourselves
    did does tell happened happen know anything something ever
    el la los las un una unos unas de del y o que en por para con se su sus lo al es qué quién cómo""".split()
)
_TERM = re.compile(r"[^\s]+")


# ---------------------------------------------------------------------------------------------
# keyword


def fts_terms(text: str) -> list[str]:
    """The user's literal terms, each a quoted FTS5 string; stopwords dropped unless nothing else is left."""
    terms: list[str] = []
    text = re.sub(r"[\x00-\x1f\x7f]", " ", text)  # SQLite reads a string only up to a NUL
    for raw in _TERM.findall(text):
        term = re.sub(r"^[\W_]+|[\W_]+$", "", raw)  # trailing "?", leading quotes
        term = re.sub(r"['’]s$", "", term)  # possessive: "Vex's" is "Vex"
        if term and re.search(r"\w", term) and term not in terms:
            terms.append(term)
    kept = [t for t in terms if normalize(t) not in STOPWORDS] or terms
    return ['"' + t.replace('"', '""') + '"' for t in kept]


def fts_query(text: str) -> str:
    return " OR ".join(fts_terms(text))


async def keyword_path(
    store: Store, text: str, visibilities: Sequence[str], depth: int, weights: tuple[float, float] = (2.0, 1.0)
) -> Scored:
    """bm25 over the question's terms. Terms in over half the chunks score next to nothing but
    cost the most (half the keyword time on a 2,500-chunk index), so the rarer terms are asked
    first; only when they match fewer than `depth` chunks is the full question asked, so the
    tail is ranked, as always, by the common terms (a small campaign, mostly)."""
    terms = fts_terms(text)
    folded = {t: normalize(t[1:-1].replace('""', '"')) for t in terms}
    common = await store.common_terms(sorted({f for f in folded.values() if " " not in f}))
    rare = [t for t in terms if folded[t] not in common]
    if rare and len(rare) < len(terms):
        found = await store.keyword_search(" OR ".join(rare), visibilities, depth, weights)
        if len(found) >= depth:
            return found
    return await store.keyword_search(" OR ".join(terms), visibilities, depth, weights)


# ---------------------------------------------------------------------------------------------
# semantic


async def semantic_path(
    store: Store,
    vectors: VectorStore,
    embedder: Embedder,
    text: str,
    visibilities: Sequence[str],
    depth: int,
    vector: np.ndarray | None = None,
) -> Scored:
    """`vector`: the question already embedded (by the caller, who keeps it for the excerpts)."""
    if vector is None:
        vector = await asyncio.to_thread(embedder.encode_query, text)
    visibility = visibilities[0] if len(visibilities) == 1 else None
    # Several windows per chunk: ask for enough windows to fill `depth` distinct chunks, and ask again
    # for more when they do not: the best windows of a few long sessions can fill the first answer,
    # and windows of chunks SQLite does not hold (an ingest in progress or killed) are dropped, so the
    # list is the one the committed index alone would give.
    n = depth * 8
    for _ in range(4):
        hits = await asyncio.to_thread(vectors.query, vector, n, visibility=visibility)
        best: dict[str, float] = {}
        for hit in hits:  # sorted by distance: the first window of a chunk is its best
            best.setdefault(hit.chunk_id, 1.0 - hit.distance)
        present = await store.visible_chunk_ids(list(best), visibilities)
        found = [(cid, score) for cid, score in best.items() if cid in present]
        if len(found) >= depth or len(hits) < n:
            return found[:depth]
        n *= 4
    return found[:depth]


# ---------------------------------------------------------------------------------------------
# entity


@dataclass(frozen=True)
class EntityMatch:
    entity_id: int
    name: str
    matched: str  # the words of the question that named it
    note_path: str | None


class EntityMatcher:
    """The Compendium names one reader may see, compiled for matching questions."""

    def __init__(self, aliases: Sequence[tuple[int, str, str, str | None]]) -> None:
        self.by_norm: dict[str, list[tuple[int, str, str | None]]] = defaultdict(list)
        for entity_id, norm, name, note_path in aliases:
            if len(norm) >= 2 and norm not in STOPWORDS:
                self.by_norm[norm].append((entity_id, name, note_path))
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
        for head, owners in heads.items():
            (entity_id, name, note_path), *others = owners.values()
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
    """How many chunks a reader may see, and how many of them mention each entity, in one index
    generation: they change only when an ingest commits. On a 25k-chunk index, reading them for
    every question was over a third of the entity path. Filled as entities are first named."""

    def __init__(self) -> None:
        self.total: int | None = None
        self.df: dict[int, int] = {}

    async def read(
        self, store: Store, entity_ids: Sequence[int], visibilities: Sequence[str]
    ) -> tuple[int, dict[int, int]]:
        """(visible chunks, {entity id: chunks mentioning it}) for the named entities mentioned anywhere."""
        if self.total is None:
            self.total = await store.count_chunks(visibilities)
        missing = [i for i in entity_ids if i not in self.df]
        if missing:
            counts = await store.mention_counts(missing, visibilities)
            self.df.update({i: counts.get(i, 0) for i in missing})
        return self.total, {i: self.df[i] for i in sorted(set(entity_ids)) if self.df[i]}


async def entity_path(
    store: Store,
    matches: Sequence[EntityMatch],
    visibilities: Sequence[str],
    depth: int,
    ubiquity: float = 0.5,
    stats: MentionStats | None = None,
) -> Scored:
    """Chunks mentioning the matched entities, scored Σ idf(entity) · (1 + ln count).

    idf = ln((N + 1) / df): an entity mentioned in every chunk adds almost nothing, a rare one a lot.
    An entity named in more than `ubiquity` of the chunks (the player characters) contributes only
    its own note: listing every session it appears in would put an arbitrary order into fusion. An
    entity's own note (its sheet) comes first among equals. Scored in SQL (`Store.entity_scores`).
    `stats` are the counts of the store's generation and these visibilities, kept between questions.
    """
    if not matches:
        return []
    total, df = await (stats or MentionStats()).read(store, [m.entity_id for m in matches], visibilities)
    own_note = {m.entity_id: m.note_path for m in matches}
    weights = [
        (entity_id, math.log((total + 1) / count), own_note.get(entity_id), count > ubiquity * total)
        for entity_id, count in df.items()
        if count <= ubiquity * total or own_note.get(entity_id)  # an everywhere-entity brings its own note only
    ]
    return await store.entity_scores(weights, visibilities, depth)


# ---------------------------------------------------------------------------------------------
# linked: one hop along the notes' own references from the best fused results


async def linked_path(
    store: Store,
    seeds: Sequence[str],
    visibilities: Sequence[str],
    limit: int,
    candidates: Collection[str] = (),
) -> Scored:
    """Chunks that the seeds (the fused top k, best first) refer to, or that refer to them: "the
    ransom note from session 14", a loot table's Session column, an Obsidian link (`links.py`).

    A link from or to the seed at rank r scores 1/r, divided by √(references its referrer makes), so
    an index note that names every session is a weak tie. Labels already among the `candidates` are
    skipped; at most `limit` other labels (sessions, notes) are returned, each with every part that
    was reached. Best first; ties in index order.
    """
    if limit <= 0 or not seeds:
        return []
    rank = {cid: r for r, cid in enumerate(seeds, 1)}
    ties: dict[tuple[str, str], float] = {}
    for seed, other, degree in await store.references(seeds, visibilities):
        if other in rank:
            continue
        weight = 1.0 / rank[seed] / math.sqrt(max(degree, 1))
        ties[(seed, other)] = max(ties.get((seed, other), 0.0), weight)  # one tie per pair, by any key
    scores: dict[str, float] = defaultdict(float)
    for (_, other), weight in ties.items():
        scores[other] += weight
    places = await store.chunk_places(list(scores))  # id -> (label, n)
    known = set(candidates)
    ranked = sorted((c for c in scores if places[c][0] not in known), key=lambda c: (-scores[c], places[c][1]))
    labels: list[str] = []
    out: Scored = []
    for cid in ranked:
        label = places[cid][0]
        if label not in labels:
            if len(labels) == limit:
                continue
            labels.append(label)
        out.append((cid, scores[cid]))
    return out

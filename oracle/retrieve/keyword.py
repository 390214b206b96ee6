"""The keyword path: SQLite FTS5 bm25 over label, heading and text, diacritics removed and words
stemmed alike in the index and the question (Porter in English; in another language, the index
searches its text as that language stems it and the question is stemmed the same way:
`oracle/stems.py`); every user term is quoted, so no question can break MATCH, and literal terms
(names, odd tokens) are kept.

Every statistic is the reader's: bm25 over the reader's FTS5 table, term counts and the number of
chunks over what the reader's `Clearance` may read (`store.fts_tables`), so a player's scores and order owe nothing
to GM-only text.

Returns (chunk id, score) pairs, best first, for visible chunks only."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..index.store import Store
from ..lexicon import lexicon
from ..stems import Stemming
from ..text import normalize
from ..types import Clearance, Scored

_TERM = re.compile(r"[^\s]+")
ENGLISH = Stemming()


def stem(words: Sequence[str], stemming: Stemming = ENGLISH) -> list[str]:
    """Each word as the keyword index holds it after FTS5's own Porter: the key of its term counts."""
    return stemming.stems(words)


def fts_terms(text: str, stemming: Stemming = ENGLISH) -> list[str]:
    """The user's literal terms, each a quoted FTS5 string in the index's language; stopwords (of that
    language and English) dropped unless nothing else is left."""
    terms: list[str] = []
    text = re.sub(r"[\x00-\x1f\x7f]", " ", text)  # SQLite reads a string only up to a NUL
    for raw in _TERM.findall(text):
        term = re.sub(r"^[\W_]+|[\W_]+$", "", raw)  # trailing "?", leading quotes
        term = re.sub(r"['’]s$", "", term)  # possessive: "Vex's" is "Vex"
        if term and re.search(r"\w", term) and term not in terms:
            terms.append(term)
    stopwords = lexicon(stemming.code).stopwords
    kept = [t for t in terms if normalize(t) not in stopwords] or terms
    written = dict.fromkeys(stemming.term(t) for t in kept)
    return ['"' + t.replace('"', '""') + '"' for t in written if t]


class TermCounts:
    """How many chunks one reader may read hold each index term (stemmed as FTS_TOKENIZE stems), read
    once per question: the keyword path leaves the common terms out by them, the learned fusion weighs
    coverage by them. A player's counts are of public chunks alone (`Store.term_docs`). FTS5 counts a term's
    chunks by reading its whole posting list (milliseconds a question on a large index: `bench.retrieval`),
    so the second reader reuses the first one's counts. `also`: the
    terms a later reader will ask for, read with the first."""

    def __init__(self, store: Store, clearance: Clearance = Clearance.PLAYER, also: Iterable[str] = ()) -> None:
        self.store = store
        self.clearance = clearance
        self.docs: dict[str, int] = {}
        self._also = set(also)

    async def of(self, terms: Iterable[str]) -> dict[str, int]:
        """{term: chunks holding it} for the terms any of the reader's chunks holds."""
        wanted = {t for t in terms if t}  # Porter stems a lone "s" (of "Vex's") to nothing
        missing = sorted((wanted | self._also) - self.docs.keys() - {""})
        self._also.clear()
        if missing:
            found = await self.store.term_docs(missing, self.clearance)
            self.docs.update({t: found.get(t, 0) for t in missing})
        return {t: self.docs[t] for t in wanted if self.docs[t]}


def reader_counts(store: Store, clearance: Clearance, counts: TermCounts | None) -> TermCounts:
    """`counts` if given (a question's, kept by its caller), else new ones; counts of another reader
    are refused: a player's statistics must never be the game master's."""
    if counts is None:
        return TermCounts(store, clearance)
    if counts.clearance is not clearance:
        raise ValueError(f"term counts of {counts.clearance} used for a reader of {clearance}")
    return counts


async def common_words(
    store: Store,
    words: Sequence[str],
    share: float = 0.5,
    *,
    clearance: Clearance = Clearance.PLAYER,
    counts: TermCounts | None = None,
    total: int | None = None,
    stemming: Stemming = ENGLISH,
) -> set[str]:
    """The words (lower-cased, one token each) found in more than `share` of the chunks the reader
    may read (`total`, counted if not given). FTS5's bm25 gives such a term an idf of 1e-6, so it
    cannot change a ranking; it only makes SQLite read its long posting list and score every chunk
    that holds it. A word whose stem differs from the index's merely stays in the query."""
    if not words:
        return set()
    stems = dict(zip(words, stem(words, stemming), strict=True))
    docs = await reader_counts(store, clearance, counts).of(stems.values())
    if total is None:
        total = await store.count_chunks(clearance)
    return {w for w, s in stems.items() if docs.get(s, 0) > share * total}


async def keyword_path(
    store: Store,
    text: str,
    clearance: Clearance,
    depth: int,
    weights: tuple[float, float] = (2.0, 1.0),
    *,
    counts: TermCounts | None = None,
    total: int | None = None,
    stemming: Stemming = ENGLISH,
) -> Scored:
    """bm25 over the question's terms. Terms in over half the chunks score next to nothing but
    cost the most (half the keyword time on a 2,500-chunk index), so the rarer terms are asked
    first; only when they match fewer than `depth` chunks is the full question asked, so the
    tail is ranked, as always, by the common terms (a small campaign, mostly). `counts` and `total`:
    the question's term counts and the number of chunks the reader reads, when the caller keeps them
    (both of this `clearance`)."""
    terms = fts_terms(text, stemming)
    folded = {t: normalize(t[1:-1].replace('""', '"')) for t in terms}
    common = await common_words(
        store, sorted({f for f in folded.values() if " " not in f}), clearance=clearance, counts=counts,
        # The terms are written in the index's language already: only FTS5's own Porter is left to apply.
        total=total, stemming=ENGLISH,
    )
    rare = [t for t in terms if folded[t] not in common]
    if rare and len(rare) < len(terms):
        found = await store.keyword_search(" OR ".join(rare), clearance, depth, weights)
        if len(found) >= depth:
            return [(r.chunk_id, r.score) for r in found]
    found = await store.keyword_search(" OR ".join(terms), clearance, depth, weights)
    return [(r.chunk_id, r.score) for r in found]


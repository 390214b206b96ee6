"""The keyword path: SQLite FTS5 bm25 over label, heading and text, diacritics removed and words
stemmed (Porter) alike in the index and the question; every user term is quoted, so no question
can break MATCH, and literal terms (names, odd tokens) are kept.

Returns (chunk id, score) pairs, best first, for visible chunks only."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..index.store import Store
from ..text import STOPWORDS, normalize
from ..types import Scored

_TERM = re.compile(r"[^\s]+")

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


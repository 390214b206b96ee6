"""The evidence for the learned fusion: a row of features per candidate, from what the paths already
computed and a few cheap reads.

Every chunk any path found is a candidate. Its features, in `FEATURES` order:

- per path (keyword, semantic, entity): whether it found the chunk, the reciprocal of its rank and
  its log rank, its score normalised as DBSF normalises it (clipped to [0, 1] by the path's
  mean ± 3σ) and its score over the path's best score. A path that did not find the chunk gives zeros.
- semantic: the best and second-best window similarities (cosine; a long session that matches in
  two places, not one passing line), the best one's distance to the question's best, and how many
  of the chunk's windows came back (ln(1 + n)).
- keyword: the question's coverage — the share of its terms the chunk holds, weighted by IDF
  (ln(1 + (N − df + 0.5)/(df + 0.5)), the BM25 idf) and unweighted — and proximity: whether its two
  rarest terms stand within ten words of each other (FTS5 `NEAR`). Terms are the question's words
  without stopwords, as FTS5 stems them; terms in more than half the chunks are left out, as the
  keyword path leaves them out. N and df count the chunks the reader may read, no other: a player's
  features owe nothing to GM-only text. Coverage is also given as its distance to the question's best.
- entity: whether a named entity is in the chunk's label or heading, or the chunk is its own note.
- whether the chunk refers to, or is referred to by, the current fusion's top k (the notes'
  references, `linked.py`): an arc is often tied together only by them.
- the chunk's kind (session, sheet, world, note), its length (ln of characters), how many paths
  found it, and the current fusion's own verdict (its score and reciprocal rank), so the model
  starts from the order it replaces.

Everything is per question: two reads of the index (term counts; which candidates hold each term,
by reading a rare term's posting list or looking a common one up candidate by candidate, whichever
reads less) and one of the references, then arithmetic on a few dozen rows.
"""
from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..index.store import Store
from ..stems import Stemming
from ..text import STOPWORDS, normalize, normalize_text
from ..types import Chunk, Clearance, Scored
from . import PATHS
from .entity import EntityMatch, MentionStats
from .fusion import Fused, dbsf_scale
from .keyword import ENGLISH, TermCounts, reader_counts, stem

KINDS = ("session", "sheet", "world", "note")
FEATURES: tuple[str, ...] = (
    *(f"{path}_{what}" for path in PATHS for what in ("found", "rr", "lr", "norm", "rel")),
    "semantic_best",
    "semantic_second",
    "semantic_gap",
    "semantic_windows",
    "coverage_idf",
    "coverage",
    "coverage_gap",
    "proximity",
    "entity_in_head",
    "linked",
    *(f"kind_{kind}" for kind in KINDS),
    "log_chars",
    "paths_agree",
    "fused_score",
    "fused_rr",
)
MAX_TERMS = 8  # the rarest terms of a long question are enough to tell coverage
NEAR = 10
# Reading one posting entry costs about a four-hundredth of one lookup by rowid (0.05 µs against
# 17-29 µs, measured on the CRD3 log at 10× and 100×; on a slower day at 100×, 0.25 µs against
# 90-140 µs): a term held by fewer than 400 chunks per candidate is read whole, and the keyword
# path's common terms (in over half the chunks) are not asked at all.
SCAN_PER_CANDIDATE = 400
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Evidence:
    """The candidates of one question, in the current fusion's order, and their features."""

    ids: tuple[str, ...]
    features: np.ndarray  # (len(ids), len(FEATURES))

    def to_json(self) -> dict[str, dict[str, float]]:
        return {cid: dict(zip(FEATURES, map(float, row), strict=True)) for cid, row in zip(self.ids, self.features, strict=True)}


@dataclass(frozen=True)
class Terms:
    """The question's searchable terms, rarest first, each with its idf."""

    words: tuple[str, ...]  # as the user wrote them (folded): FTS5 stems them itself
    idf: tuple[float, ...]


def question_terms(total: int, df: Mapping[str, int], stems: Mapping[str, str]) -> Terms:
    """The terms the index holds in at most half its chunks, rarest first, at most `MAX_TERMS`."""
    kept = []
    for word, s in stems.items():
        count = df.get(s, 0)
        if count and count <= total / 2:
            kept.append((count, word, math.log(1 + (total - count + 0.5) / (count + 0.5))))
    kept.sort()
    kept = kept[:MAX_TERMS]
    return Terms(tuple(w for _, w, _ in kept), tuple(i for _, _, i in kept))


def query_words(query: str) -> list[str]:
    """The question's words, folded, stopwords out, each once."""
    words = dict.fromkeys(w for w in _WORD.findall(normalize_text(query)) if w not in STOPWORDS and not w.isdigit())
    return list(words)


def query_stems(query: str, stemming: Stemming = ENGLISH) -> dict[str, str]:
    """{word as the keyword index writes it: its stem as FTS5 stores it} for the question's words
    (`query_words`); in English the word is the user's own."""
    words = query_words(query)
    return dict(zip((stemming.term(w) for w in words), stem(words, stemming), strict=True))


def _quoted(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def path_features(hits: Scored) -> dict[str, tuple[float, ...]]:
    """(found, 1/rank, 1 − ln rank / ln(n + 1), DBSF-normalised score, score / best score) for each
    chunk a path of n results found: the reciprocal rank tells the first few apart, the log rank the
    rest."""
    if not hits:
        return {}
    values = [s for _, s in hits]
    scale = dbsf_scale(values)
    top = max(values)
    out: dict[str, tuple[float, ...]] = {}
    log_n = math.log(len(hits) + 1)
    for rank, (cid, score) in enumerate(hits, 1):
        if cid in out:
            continue
        norm = scale(score)
        rel = score / top if top > 0 else 0.0
        out[cid] = (1.0, 1.0 / rank, 1.0 - math.log(rank) / log_n, norm, rel)
    return out


def head_matcher(entities: Sequence[EntityMatch]) -> Callable[[Chunk], bool]:
    """Whether a named entity is in a chunk's label or heading, or the chunk is the entity's own
    note. The names are folded and compiled once per question, not once per candidate."""
    notes = {e.note_path for e in entities if e.note_path}
    names = sorted({n for e in entities for n in (normalize(e.name), normalize(e.matched)) if n}, key=len, reverse=True)
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, names)) + r")(?!\w)") if names else None

    def holds(chunk: Chunk) -> bool:
        if chunk.path in notes:
            return True
        if pattern is None:
            return False
        return pattern.search(_folded_head(chunk.label, chunk.heading)) is not None

    return holds


@functools.lru_cache(maxsize=8192)
def _folded_head(label: str, heading: str) -> str:
    """A chunk's label and heading as names are matched in them: the same few hundred chunks come
    back question after question, and folding them was a third of the features' time."""
    return f" {normalize_text(label)} {normalize_text(heading)} ".replace("_", " ")


_NOT_FOUND = (0.0,) * 5
_NO_WINDOWS = (0.0, 0.0, -1.0, 0.0)  # best, second, gap (−1: no window came back), ln(1 + 0)
_KIND_ROW = {kind: tuple(float(kind == k) for k in KINDS) for kind in KINDS}


def build_features(
    ids: Sequence[str],
    scored: Mapping[str, Scored],
    windows: Mapping[str, Sequence[float]],
    chunks: Mapping[str, Chunk],
    entities: Sequence[EntityMatch],
    terms: Terms,
    holds: Mapping[str, set[int]],
    near: set[str],
    linked: set[str],
    fused: Sequence[Fused],
) -> np.ndarray:
    """The feature rows of `ids` (see the module docstring), pure: everything read is passed in.
    Each row is one list display: this runs for every candidate of every question."""
    by_keyword, by_semantic, by_entity = (path_features(scored.get(path, [])) for path in PATHS)
    top_fused = max((f.score for f in fused), default=0.0) or 1.0
    fused_by = {f.id: (f.score / top_fused, 1.0 / rank) for rank, f in enumerate(fused, 1)}
    idf_total = sum(terms.idf) or 1.0
    n_terms = len(terms.words)
    in_head = head_matcher(entities)
    top_sim = max((sims[0] for sims in windows.values() if sims), default=0.0)
    coverage = {cid: sum(terms.idf[t] for t in held) / idf_total for cid, held in holds.items()}
    top_coverage = max(coverage.values(), default=0.0)
    rows: list[list[float]] = []
    for cid in ids:
        keyword = by_keyword.get(cid, _NOT_FOUND)
        semantic = by_semantic.get(cid, _NOT_FOUND)
        entity = by_entity.get(cid, _NOT_FOUND)
        sims = windows.get(cid)
        if sims:
            sim = (sims[0], sims[1] if len(sims) > 1 else 0.0, sims[0] - top_sim, math.log1p(len(sims)))
        else:
            sim = _NO_WINDOWS
        covered = coverage.get(cid, 0.0)
        chunk = chunks.get(cid)
        kind = chunk.kind if chunk is not None and chunk.kind in KINDS else "note"
        rows.append([
            *keyword, *semantic, *entity, *sim,
            covered,
            len(holds.get(cid, ())) / n_terms if n_terms else 0.0,
            covered - top_coverage,
            float(cid in near),
            float(chunk is not None and in_head(chunk)),
            float(cid in linked),
            *_KIND_ROW[kind],
            math.log1p(len(chunk.text)) if chunk is not None else 0.0,
            keyword[0] + semantic[0] + entity[0],  # how many paths found it
            *fused_by.get(cid, (0.0, 0.0)),
        ])
    return np.array(rows, dtype=np.float64).reshape(len(ids), len(FEATURES))


async def gather_evidence(
    store: Store,
    *,
    stems: Mapping[str, str],
    scored: Mapping[str, Scored],
    windows: Mapping[str, Sequence[float]],
    chunks: Mapping[str, Chunk],
    rowids: Mapping[str, int],
    entities: Sequence[EntityMatch],
    fused: Sequence[Fused],
    seeds: Sequence[str],
    clearance: Clearance,
    stats: MentionStats | None = None,
    counts: TermCounts | None = None,
) -> Evidence:
    """Every candidate's features. `stems`: the question's words and their stems (`query_stems`, made
    once per question); `chunks` and `rowids`: the candidates as loaded (`Store.chunks_and_rowids`);
    `fused`: the current fusion's order of all candidates; `seeds`: its top k, whose references mark
    the linked candidates; `stats`: the counts of the store's generation, kept between questions;
    `counts`: the question's term counts the keyword path read. All of them the reader's
    (`clearance`)."""
    ids = tuple(dict.fromkeys([f.id for f in fused] + [cid for hits in scored.values() for cid, _ in hits]))
    total = await (stats or MentionStats()).indexed(store, clearance)
    df = await reader_counts(store, clearance, counts).of(stems.values())
    terms = question_terms(total, df, stems)
    matches = [_quoted(w) for w in terms.words]
    if len(terms.words) >= 2:
        matches.append(f"NEAR({_quoted(terms.words[0])} {_quoted(terms.words[1])}, {NEAR})")
    # A term many chunks hold is looked up chunk by chunk; a rarer one's whole posting list is read.
    held_by = [df[stems[w]] for w in terms.words]
    held_by += [held_by[0] + held_by[1]] if len(held_by) >= 2 else []
    lookups = {i for i, count in enumerate(held_by) if count > SCAN_PER_CANDIDATE * len(ids)}
    holds: dict[str, set[int]] = {}
    near: set[str] = set()
    at = {rowids[cid]: cid for cid in ids if cid in rowids}
    for i, rowid in await store.matching_chunks(list(at), matches, lookups, clearance):
        cid = at[rowid]
        if i < len(terms.words):
            holds.setdefault(cid, set()).add(i)
        else:
            near.add(cid)
    linked = {ref.chunk_id for ref in await store.references(seeds, clearance)} if seeds else set()
    features = build_features(ids, scored, windows, chunks, entities, terms, holds, near, linked, fused)
    return Evidence(ids, features)

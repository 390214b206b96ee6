"""Rank fusion: data in, data out.

Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, SIGIR 2009): score(d) = Σ_paths w / (k + rank(d)),
ranks 1-based, k = 60. It never mixes scores across paths, only ranks. Distribution-based score fusion
(the 3-sigma normalisation popularised by Qdrant's DBSF) is the alternative that does use scores:
each path's scores are scaled by its own mean and standard deviation, clipped to [0, 1], then added.
Ties break on the best single-path rank, then on the id, so the order is deterministic.

Either way, a chunk that tells a session (a session's record) scores a share more (`telling`) than it
would: a page that mentions an event and scores as the session telling it does not come first. A
chunk of a note of no kind (neither a session's, a sheet nor a world page: a hub, a timeline, prep)
that the question does not name scores a share less (`kindless`), for the same reason.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..types import Scored


@dataclass(frozen=True)
class Fused:
    id: str
    score: float
    ranks: tuple[tuple[str, int], ...]  # (path, 1-based rank) for each path that found it

    @property
    def best_rank(self) -> int:
        return min(rank for _, rank in self.ranks)


def _order(scores: dict[str, float], ranks: dict[str, dict[str, int]], limit: int | None) -> list[Fused]:
    fused = _sorted(Fused(doc, score, tuple(sorted(ranks[doc].items()))) for doc, score in scores.items())
    return fused[:limit] if limit is not None else fused


def _sorted(fused: Iterable[Fused]) -> list[Fused]:
    # Rounded: the same ranks summed in another order can differ in the last bit, and equal
    # scores must reach the tie-break.
    return sorted(fused, key=lambda f: (-round(f.score, 12), f.best_rank, f.id))


def weigh_kinds(fused: Iterable[Fused], tells: Collection[str], telling: float,
                kindless: Collection[str] = (), kindless_share: float = 0.0) -> list[Fused]:
    """`fused` with each chunk in `tells` (a session's record) scoring `telling` more and each in
    `kindless` scoring `kindless_share` less, in order again."""
    factor = {cid: 1 - kindless_share for cid in kindless} if kindless_share else {}
    if telling:
        factor.update({cid: 1 + telling for cid in tells})
    if not factor:
        return list(fused)
    return _sorted(Fused(f.id, f.score * factor[f.id], f.ranks) if f.id in factor else f for f in fused)


def _ranks(rankings: Mapping[str, Sequence[str]]) -> dict[str, dict[str, int]]:
    ranks: dict[str, dict[str, int]] = {}
    for path, ids in rankings.items():
        for rank, doc in enumerate(ids, 1):
            ranks.setdefault(doc, {}).setdefault(path, rank)  # a repeated id keeps its best rank
    return ranks


def rrf(
    rankings: Mapping[str, Sequence[str]],
    *,
    k: int = 60,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[Fused]:
    """Reciprocal Rank Fusion of ranked id lists; `weights` makes it weighted RRF."""
    ranks = _ranks(rankings)
    scores = {
        doc: sum((weights or {}).get(path, 1.0) / (k + rank) for path, rank in by_path.items())
        for doc, by_path in ranks.items()
    }
    return _order(scores, ranks, limit)


def dbsf_scale(values: Sequence[float]) -> Callable[[float], float]:
    """DBSF's normalisation of one path's scores: a score's place between the path's mean ± 3σ
    (population σ), clipped to [0, 1]; when every score is the same, each counts 1. In floats, not
    `statistics` (which sums exactly, in fractions: a third of the learned fusion's features' time),
    agreeing to 1e-9 wherever scores are more than a millionth of their size apart (tested). Equal
    scores are told apart first, since the float mean of three 0.1s is not 0.1."""
    if min(values) == max(values):
        return lambda score: 1.0
    mean = math.fsum(values) / len(values)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))
    low, span = mean - 3 * std, 6 * std
    if span == 0:  # scores apart by less than the floats' resolution
        return lambda score: 1.0
    return lambda score: min(1.0, max(0.0, (score - low) / span))


def dbsf(
    scored: Mapping[str, Sequence[tuple[str, float]]],
    *,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[Fused]:
    """Distribution-based score fusion of (id, score) lists, higher scores better."""
    ranks = _ranks({path: [doc for doc, _ in hits] for path, hits in scored.items()})
    scores: dict[str, float] = {doc: 0.0 for doc in ranks}
    for path, hits in scored.items():
        if not hits:
            continue
        scale = dbsf_scale([s for _, s in hits])
        weight = (weights or {}).get(path, 1.0)
        seen: set[str] = set()
        for doc, score in hits:
            if doc in seen:
                continue
            seen.add(doc)
            scores[doc] += weight * scale(score)
    return _order(scores, ranks, limit)


def within_reach(ids: Sequence[str], best: Sequence[str], reach: int) -> list[str]:
    """`ids` with `best` (its first `reach`) among the first `reach`: those found lower come right
    after the others kept there, in `best`'s order, and the ids they displace follow; every id not in
    `best` keeps its order."""
    place = {doc: i for i, doc in enumerate(ids)}
    listed = [doc for doc in dict.fromkeys(best) if doc in place][:reach]
    below = [doc for doc in listed if place[doc] >= reach]
    if not below:
        return list(ids)
    others = [doc for doc in ids if doc not in listed]
    head = set(others[: reach - len(listed)]) | (set(listed) - set(below))
    return [doc for doc in ids if doc in head] + below + [doc for doc in ids if doc not in head and doc not in below]


Fuse = Callable[[Mapping[str, Scored], Collection[str], Collection[str]], list[Fused]]


def make_fusion(
    method: str, *, weights: Mapping[str, float], rrf_k: int = 60, limit: int | None = None, telling: float = 0.0,
    kindless: float = 0.0,
) -> Fuse:
    """The fusion `ORACLE_FUSION` names, chosen once: each path's (id, score) list, the ids of the
    chunks that tell a session and of the kindless ones in, the fused pool out. Plain RRF counts every
    path alike; weighted RRF and DBSF weigh them by `weights`; a telling scores `telling` more, a
    kindless chunk `kindless` less. `learned` fuses as DBSF does: the learned model (`learned.py`)
    reorders that list, and falls back to it."""
    by = weights if method == "weighted_rrf" else None

    def fuse(scored: Mapping[str, Scored], tells: Collection[str], unkinded: Collection[str] = ()) -> list[Fused]:
        if method in ("dbsf", "learned"):
            fused = dbsf(scored, weights=weights)
        else:
            fused = rrf({name: [cid for cid, _ in hits] for name, hits in scored.items()}, k=rrf_k, weights=by)
        fused = weigh_kinds(fused, tells, telling, unkinded, kindless)
        return fused[:limit] if limit is not None else fused

    return fuse

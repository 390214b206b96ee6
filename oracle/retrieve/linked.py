"""The linked stage (after fusion): sessions and notes that the fused top k refer to, or that refer
to them, for the reranker to weigh; a multi-session arc is often tied together only by such
references.

Returns (chunk id, score) pairs, best first, for visible chunks only."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Sequence

from ..index.store import Store
from ..types import Clearance, Scored


async def linked_path(
    store: Store,
    seeds: Sequence[str],
    clearance: Clearance,
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
    for ref in await store.references(seeds, clearance):
        if ref.chunk_id in rank:
            continue
        weight = 1.0 / rank[ref.seed] / math.sqrt(max(ref.degree, 1))
        pair = (ref.seed, ref.chunk_id)
        ties[pair] = max(ties.get(pair, 0.0), weight)  # one tie per pair, by any key
    scores: dict[str, float] = defaultdict(float)
    for (_, other), weight in ties.items():
        scores[other] += weight
    places = await store.chunk_places(list(scores))
    known = set(candidates)
    ranked = sorted((c for c in scores if places[c].label not in known), key=lambda c: (-scores[c], places[c].order))
    labels: list[str] = []
    out: Scored = []
    for cid in ranked:
        label = places[cid].label
        if label not in labels:
            if len(labels) == limit:
                continue
            labels.append(label)
        out.append((cid, scores[cid]))
    return out

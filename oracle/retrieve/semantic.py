"""The semantic path: the query embedded once, Chroma cosine over the dense windows, collapsed to
chunks by their best window; a window whose chunk SQLite does not hold (a half-finished ingest) is
dropped.

Returns (chunk id, window similarities) pairs, best first, for visible chunks only."""

from __future__ import annotations

import numpy as np

from ..index.seam import Embeddings, Vectors
from ..index.store import Store
from ..types import Clearance


async def semantic_windows(
    store: Store,
    vectors: Vectors,
    embedder: Embeddings,
    text: str,
    clearance: Clearance,
    depth: int,
    vector: np.ndarray | None = None,
) -> list[tuple[str, tuple[float, ...]]]:
    """The semantic path with the similarity of each of a chunk's windows that came back, best first:
    a session whose second window also matches speaks of the question at length, not in one
    passing line. The learned fusion weighs them."""
    if vector is None:
        vector = await embedder.encode_query(text)
    visibility = clearance.windows  # Chroma's filter: a player's windows are the public ones
    # Several windows per chunk: ask for enough windows to fill `depth` distinct chunks, and ask again
    # for more when they do not: the best windows of a few long sessions can fill the first answer,
    # and windows of chunks SQLite does not hold (an ingest in progress or killed) are dropped, so the
    # list is the one the committed index alone would give.
    n = depth * 8
    for _ in range(4):
        hits = await vectors.query(vector, n, visibility=visibility)
        best: dict[str, list[float]] = {}
        for hit in hits:  # sorted by distance: the first window of a chunk is its best
            best.setdefault(hit.chunk_id, []).append(1.0 - hit.distance)
        present = await store.visible_chunk_ids(list(best), clearance)
        found = [(cid, tuple(sims)) for cid, sims in best.items() if cid in present]
        if len(found) >= depth or len(hits) < n:
            return found[:depth]
        n *= 4
    return found[:depth]

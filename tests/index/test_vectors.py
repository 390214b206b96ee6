"""The Chroma store on disk: writes are cut into small batches (Chroma holds the interpreter lock for
a whole write), and nothing is lost or mixed at the batches' edges."""
from __future__ import annotations

import numpy as np

from oracle.index import vectors as vectors_mod
from oracle.index.vectors import VectorStore


def window_rows(n: int, seed: int = 0) -> tuple[list[str], np.ndarray, list[dict]]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"chunk{i // 3}:{i % 3}" for i in range(n)]
    metadatas = [{"chunk_id": f"chunk{i // 3}", "visibility": "gm" if i % 5 == 0 else "public"} for i in range(n)]
    return ids, vectors, metadatas


def test_writes_larger_than_a_batch_keep_every_row_and_its_visibility(tmp_path):
    n = vectors_mod._WRITE_BATCH * 3 + 5  # several batches in each collection, and a partial last one
    ids, vectors, metadatas = window_rows(n)
    store = VectorStore(tmp_path / "chroma", "test")
    store.upsert(ids, vectors, metadatas)

    assert store.count() == n
    assert store.all_ids() == set(ids)
    stored_ids, chunk_ids, stored = store.vectors()
    by_id = dict(zip(stored_ids, stored))
    assert all(np.allclose(by_id[i], v, atol=1e-6) for i, v in zip(ids, vectors))
    assert dict(zip(stored_ids, chunk_ids)) == {i: m["chunk_id"] for i, m in zip(ids, metadatas)}
    public = {i for i, m in zip(ids, metadatas) if m["visibility"] == "public"}
    assert set(store.vectors(visibility="public")[0]) == public
    assert {h.window_id for h in store.query(vectors[0], n, visibility="public")} == public

    gone = ids[3 : 3 + vectors_mod._WRITE_BATCH * 2 + 1]
    store.delete(gone)
    assert store.all_ids() == set(ids) - set(gone)


def test_an_upsert_replaces_rows_across_batches(tmp_path):
    n = vectors_mod._WRITE_BATCH * 2 + 3
    ids, first, metadatas = window_rows(n, seed=1)
    _, second, _ = window_rows(n, seed=2)
    store = VectorStore(tmp_path / "chroma", "test")
    store.upsert(ids, first, metadatas)
    store.upsert(ids, second, metadatas)

    assert store.count() == n
    stored_ids, _, stored = store.vectors()
    by_id = dict(zip(stored_ids, stored))
    assert all(np.allclose(by_id[i], v, atol=1e-6) for i, v in zip(ids, second))

"""The Chroma store on disk: writes are cut into small batches (Chroma holds the interpreter lock for
a whole write), nothing is lost or mixed at the batches' edges, and Chroma saves its index after every
batch (else a write after a read rebuilds it from the log, holding the lock for up to a second)."""
from __future__ import annotations

import numpy as np
import pytest

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


def hnsw_settings(store: VectorStore) -> list[dict]:
    return [
        store.client.get_collection(c.name).configuration_json["hnsw"] for c in store.collections.values()
    ]


def test_collections_save_their_index_after_every_batch(tmp_path):
    store = VectorStore(tmp_path / "chroma", "test")
    assert [h["sync_threshold"] for h in hnsw_settings(store)] == [vectors_mod._WRITE_BATCH] * 2


def test_a_store_made_with_chromas_default_saving_is_set_to_save_as_often(tmp_path):
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    ids, vectors, metadatas = window_rows(40)
    old = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=ChromaSettings(anonymized_telemetry=False))
    for visibility in ("public", "gm"):  # as the Oracle made them before: Chroma's save every 1,000 windows
        collection = old.get_or_create_collection(
            f"test-{visibility}", embedding_function=None,
            configuration={"hnsw": {"space": "cosine", "ef_search": 200, "ef_construction": 200}},
        )
        rows = [i for i, m in enumerate(metadatas) if m["visibility"] == visibility]
        collection.upsert(ids=[ids[i] for i in rows], embeddings=vectors[rows], metadatas=[metadatas[i] for i in rows])
    assert old.get_collection("test-public").configuration_json["hnsw"]["sync_threshold"] == 1000
    old.close()

    store = VectorStore(tmp_path / "chroma", "test")
    assert [h["sync_threshold"] for h in hnsw_settings(store)] == [vectors_mod._WRITE_BATCH] * 2
    assert [h["space"] for h in hnsw_settings(store)] == ["cosine"] * 2
    assert store.all_ids() == set(ids)  # nothing lost on the way
    assert store.query(vectors[1], 1, visibility="public")[0].window_id == ids[1]


# ---------------------------------------------------------------------------------------------
# Lending an embedded store to another process (the embedding worker's cold build)

WRITER = """
import sys
import numpy as np
sys.path.insert(0, {root!r})
from oracle.index.vectors import VectorStore
from tests.index.test_vectors import window_rows

store = VectorStore(__import__("pathlib").Path({folder!r}), "test")
ids, vectors, metadatas = window_rows({n})
store.upsert(ids, vectors, metadatas)
store.client.close()
"""


async def test_a_lent_store_is_written_by_another_process_and_read_back(tmp_path):
    import asyncio
    import subprocess
    import sys
    from pathlib import Path

    from oracle.index.seam import Vectors

    vectors = Vectors(VectorStore(tmp_path / "chroma", "test"))
    ids, rows, _ = window_rows(40)
    early_ids, early_rows, early_metadatas = window_rows(10, seed=9)
    early_ids = [f"early{i}" for i in early_ids]
    await vectors.upsert(early_ids, early_rows, early_metadatas)
    assert (await vectors.query(early_rows[2], 1))[0].window_id == early_ids[2]  # its index is in memory
    assert await vectors.lend()
    with pytest.raises(RuntimeError, match="already lent"):
        await vectors.lend()
    # While lent: a question finds nothing (the collection was empty) and never fails; other calls
    # wait for the store to come back.
    assert [] == await vectors.query(rows[0], 5)
    counting = asyncio.create_task(vectors.count())
    folder, _ = vectors.where
    root = str(Path(__file__).resolve().parents[2])
    await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", WRITER.format(root=root, folder=folder, n=40)], check=True, timeout=300
    )
    assert not counting.done()
    await vectors.take_back()
    assert 50 == await counting
    assert await vectors.all_ids() == set(ids) | set(early_ids)
    assert (await vectors.query(rows[7], 1))[0].window_id == ids[7]


async def test_a_store_another_client_of_this_process_holds_is_not_lent(tmp_path):
    from oracle.index.seam import Vectors

    other = VectorStore(tmp_path / "chroma", "test")  # a second client on the same folder, still open
    vectors = Vectors(VectorStore(tmp_path / "chroma", "test"))
    assert not await vectors.lend()
    ids, rows, metadatas = window_rows(20)
    await vectors.upsert(ids, rows, metadatas)  # open again at once: written from here
    assert (await vectors.query(rows[3], 1))[0].window_id == ids[3]
    assert other.count() == 20


async def test_lending_waits_for_the_calls_in_flight(tmp_path):
    import asyncio
    import time

    from oracle.index.seam import Vectors

    store = VectorStore(tmp_path / "chroma", "test")
    ids, rows, metadatas = window_rows(20)
    store.upsert(ids, rows, metadatas)
    events: list[str] = []
    query, release = store.query, store.release

    def slow_query(*args, **kwargs):
        time.sleep(0.3)
        try:
            return query(*args, **kwargs)
        finally:
            events.append("query done")

    def spied_release():
        events.append("released")
        return release()

    store.query, store.release = slow_query, spied_release
    vectors = Vectors(store)
    asking = asyncio.create_task(vectors.query(rows[0], 3))
    await asyncio.sleep(0.05)  # the query is in its thread
    assert await vectors.lend()
    assert ["query done", "released"] == events
    assert (await asking)[0].window_id == ids[0]
    await vectors.take_back()

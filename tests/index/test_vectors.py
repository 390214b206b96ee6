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
    by_id = dict(zip(stored_ids, stored, strict=False))
    assert all(np.allclose(by_id[i], v, atol=1e-6) for i, v in zip(ids, vectors, strict=False))
    assert dict(zip(stored_ids, chunk_ids, strict=False)) == {i: m["chunk_id"] for i, m in zip(ids, metadatas, strict=False)}
    public = {i for i, m in zip(ids, metadatas, strict=False) if m["visibility"] == "public"}
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
    by_id = dict(zip(stored_ids, stored, strict=False))
    assert all(np.allclose(by_id[i], v, atol=1e-6) for i, v in zip(ids, second, strict=False))


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
# One folder, several processes (docs/processes.md)


def test_stores_on_one_folder_share_its_client(tmp_path):
    first = VectorStore(tmp_path / "chroma", "test")
    second = VectorStore(tmp_path / "chroma", "test")
    assert first.client is second.client
    ids, rows, metadatas = window_rows(20)
    first.upsert(ids, rows, metadatas)
    assert second.query(rows[2], 1)[0].window_id == ids[2]
    first.close()  # the folder stays open for the other store
    assert second.query(rows[5], 1)[0].window_id == ids[5]
    second.close()
    third = VectorStore(tmp_path / "chroma", "test")  # a new client: the last one closed
    assert 20 == third.count()


def test_a_write_marks_the_folder_until_it_returns(tmp_path):
    """What tells a draft cut mid-write (its process killed) from a whole one (`folders.draft`)."""
    store = VectorStore(tmp_path / "chroma", "test")
    ids, rows, metadatas = window_rows(20)
    marked = []
    upsert = type(store.collections["public"]).upsert

    def watching(collection, **kwargs):
        marked.append((tmp_path / "chroma" / vectors_mod.WRITING).exists())
        return upsert(collection, **kwargs)

    for collection in store.collections.values():
        collection.upsert = watching.__get__(collection)
    store.upsert(ids, rows, metadatas)
    assert marked and all(marked)
    assert not (tmp_path / "chroma" / vectors_mod.WRITING).exists()
    with pytest.raises(vectors_mod.VectorStoreError):
        store.upsert(ids[:2], rows[:2, :3], metadatas[:2])  # a vector of the wrong size: Chroma refuses it
    assert (tmp_path / "chroma" / vectors_mod.WRITING).exists()


def test_a_read_waits_while_the_folder_is_written(tmp_path):
    """The access lock: a write (any process, any thread) excludes every read of the folder."""
    import fcntl
    import os
    import threading

    store = VectorStore(tmp_path / "chroma", "test")
    ids, rows, metadatas = window_rows(10)
    store.upsert(ids, rows, metadatas)
    fd = os.open(tmp_path / "chroma" / vectors_mod.ACCESS_LOCK, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a writer holds it during one write
    found: list = []
    reader = threading.Thread(target=lambda: found.append(store.query(rows[1], 1)))
    reader.start()
    reader.join(0.5)
    assert reader.is_alive() and not found  # still waiting for the lock
    os.close(fd)
    reader.join(30)
    assert found[0][0].window_id == ids[1]


STRESS_WRITER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from oracle.index.vectors import VectorStore
from tests.index.test_vectors import window_rows

store = VectorStore(Path({folder!r}), "test")
end = time.monotonic() + {seconds}
n = 0
while time.monotonic() < end:
    ids, vectors, metadatas = window_rows(64, seed=n)
    store.upsert([f"w{{n}}-{{i}}" for i in ids], vectors, metadatas)
    if n >= 10:
        store.delete([f"w{{n - 10}}-{{i}}" for i in ids[:32]])
    n += 1
print(n)
"""

STRESS_READER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from oracle.index.vectors import VectorStore
from tests.index.test_vectors import window_rows

store = VectorStore(Path({folder!r}), "test")
_, vectors, _ = window_rows(64, seed=1)
end = time.monotonic() + {seconds}
reads = 0
while time.monotonic() < end:
    store.close()  # the index loaded from the folder again, as after another process's commit
    store = VectorStore(Path({folder!r}), "test")
    assert store.query(vectors[reads % 64], 5)
    reads += 1
print(reads)
"""


@pytest.mark.slow  # two processes for ten seconds
def test_a_process_reading_the_folder_while_another_writes_it_never_crashes(tmp_path):
    """Without the access lock, the reader died of a segmentation fault within seconds (loading the
    index while the writer saved it): docs/processes.md."""
    import subprocess
    import sys
    from pathlib import Path

    folder = tmp_path / "chroma"
    ids, rows, metadatas = window_rows(200)
    VectorStore(folder, "test").upsert(ids, rows, metadatas)
    root = str(Path(__file__).resolve().parents[2])
    run = {"root": root, "folder": str(folder), "seconds": 10}
    writer = subprocess.Popen([sys.executable, "-c", STRESS_WRITER.format(**run)], stdout=subprocess.PIPE, text=True)
    reader = subprocess.run([sys.executable, "-c", STRESS_READER.format(**run)], capture_output=True, text=True,
                            timeout=300, check=False)
    written, _ = writer.communicate(timeout=300)
    assert (0, 0) == (reader.returncode, writer.returncode), reader.stderr[-2000:]
    assert int(reader.stdout) > 0 and int(written) > 0  # both worked all along

"""The embedding worker process: the vectors it makes are the process's own, and a killed worker
fails the reingest with a reason instead of hanging. Starting it spawns a process that loads torch
and the model (seconds): one worker serves every test of this file."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from oracle.campaigns import Campaign, Campaigns
from oracle.index.embed import EmbedError
from oracle.index.ingest import ingest
from oracle.index.library import Library
from oracle.index.worker import EmbedWorker
from oracle.oracle import Oracle
from oracle.settings import BUNDLED_EMBED_MODEL
from oracle.types import GM, PUBLIC, Clearance

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def worker():
    worker = EmbedWorker(BUNDLED_EMBED_MODEL)
    worker.start()
    yield worker
    pool = worker._pool
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


async def vectors_by_id(index) -> dict[str, np.ndarray]:
    vectors = await index.vectors()
    out = {}
    for visibility in (PUBLIC, GM):
        ids, _, matrix = await vectors.vectors(visibility=visibility)
        out |= dict(zip(ids, matrix, strict=False))
    return out


def spy_upserts(monkeypatch, data: Path) -> list[int]:
    """The windows each upsert of this process writes into a Chroma folder under `data` (an ingest's
    draft, served once it commits)."""
    from oracle.index.vectors import VectorStore

    written: list[int] = []
    upsert = VectorStore.upsert

    def spy(self, ids, vecs, metadatas):
        if data in self.path.parents:
            written.append(len(ids))
        return upsert(self, ids, vecs, metadatas)

    monkeypatch.setattr(VectorStore, "upsert", spy)
    return written


async def test_a_reingest_through_the_worker_stores_the_very_vectors_of_the_process(
    worker, mini_notes, make_settings, embedder, tmp_path, monkeypatch
):
    campaigns = Campaigns((
        Campaign("here", mini_notes, tmp_path / "here"),
        Campaign("worker", mini_notes, tmp_path / "worker"),
    ), source=tmp_path / "campaigns.toml")
    settings = make_settings(mini_notes)
    in_process = await Library.open(settings, campaigns, embedder=embedder, worker=False)
    # The library takes the test's worker in place of starting its own.
    library = await Library.open(settings, campaigns, embedder=embedder, worker=False)
    library.embeddings.worker = library.worker = worker
    try:
        assert embedder.fingerprint == await worker.ready()
        assert worker.pid not in (None, os.getpid())
        offloaded = []
        offload = library.embeddings.offload

        async def spy(fn, *args):
            offloaded.append(fn.__name__)
            return await offload(fn, *args)

        library.embeddings.offload = spy
        written_here = spy_upserts(monkeypatch, tmp_path / "here")
        written_there = spy_upserts(monkeypatch, tmp_path / "worker")
        here = await ingest(in_process.index("here"))
        there = await ingest(library.index("worker"))
        assert ["read_and_chunk", "build_compendium"] == offloaded
        # Embedded there, written from here: the ingest's process alone writes the campaign's folder.
        assert sum(written_here) == sum(written_there) == here.windows_embedded > 0
        assert (here.windows_embedded, here.chunks, here.entities) == (there.windows_embedded, there.chunks, there.entities)
        for clearance in Clearance:
            stores = [await i.store() for i in (in_process.index("here"), library.index("worker"))]
            mine_names, their_names = [await s.entity_names(clearance) for s in stores]
            assert mine_names == their_names and mine_names
            assert [await stores[0].entity(e.entity_id, clearance) for e in mine_names] == [
                await stores[1].entity(e.entity_id, clearance) for e in their_names
            ]
        for visibility in (PUBLIC, GM):  # each window in the collection of its visibility, as here
            here_ids, there_ids = [
                sorted((await (await i.vectors()).vectors(visibility=visibility))[0])
                for i in (in_process.index("here"), library.index("worker"))
            ]
            assert here_ids == there_ids and here_ids
        mine, theirs = await vectors_by_id(in_process.index("here")), await vectors_by_id(library.index("worker"))
        assert sorted(mine) == sorted(theirs) and len(mine) == here.windows_embedded
        assert [] == [i for i in mine if not np.array_equal(mine[i], theirs[i])]
    finally:
        library.worker = library.embeddings.worker = None  # the fixture stops it
        await library.close()
        await in_process.close()


async def test_a_build_the_worker_fails_commits_nothing_and_the_next_ingest_completes(
    worker, mini_notes, make_settings, embedder, tmp_path
):
    for n in range(10, 16):  # more windows than one batch of the ingest
        (mini_notes / "sessions" / f"Session {n}.md").write_text(
            f"## Session {n}\n" + f"Mirela charted the coast past the Saltmarsh, day {n}. " * 150
        )
    campaigns = Campaigns((Campaign("c", mini_notes, tmp_path / "c"),), source=tmp_path / "campaigns.toml")
    library = await Library.open(make_settings(mini_notes), campaigns, embedder=embedder, worker=False)
    library.embeddings.worker = library.worker = worker
    index = library.index("c")
    encode = worker.encode
    try:
        asked = []
        calls = []

        async def dies(texts):  # the first batch is written, a question arrives, then the worker dies
            calls.append(len(texts))
            if len(calls) == 1:
                return await encode(texts)
            asked.append(await Oracle(index).ask("who sold the brass compass?"))
            raise EmbedError("the embedding worker process stopped")

        worker.encode = dies
        with pytest.raises(EmbedError):
            await ingest(index)
        assert ["not_found"] == [a.mode for a in asked]  # nothing committed yet: answered, not failed
        assert 0 == await (await index.vectors(check=False)).count()  # the served folder untouched
        worker.encode = encode
        report = await ingest(index)
        # The first batch, written into the draft before the worker died, is gone on from, not embedded again.
        assert report.windows_embedded + calls[0] == await (await index.vectors()).count()
        assert (await Oracle(index).search("who sold the brass compass?")).paths["semantic"]
    finally:
        worker.encode = encode
        library.worker = library.embeddings.worker = None
        await library.close()


async def test_an_offloaded_step_runs_in_the_worker_process(worker):
    assert await worker.offload(os.getpid) == worker.pid != os.getpid()


@pytest.mark.slow
async def test_a_killed_worker_fails_the_call_with_a_reason_and_the_next_call_starts_a_new_one(worker):
    await worker.ready()
    starts = worker.starts
    os.kill(worker.pid, signal.SIGKILL)
    with pytest.raises(EmbedError, match="embedding worker process stopped .*previous index is still served"):
        await worker.encode(["The party met Brother Aldous."] * 64)
    vector = await worker.encode(["The party met Brother Aldous."])
    assert ((1, 384), starts + 1) == (vector.shape, worker.starts)


PARENT = """
import asyncio, sys, time
from oracle.index.worker import EmbedWorker
from oracle.oracle import Oracle
from oracle.settings import BUNDLED_EMBED_MODEL

async def main():
    worker = EmbedWorker(BUNDLED_EMBED_MODEL)
    worker.start()
    await worker.ready()
    print(worker.pid, flush=True)
    time.sleep(600)

if __name__ == "__main__":
    asyncio.run(main())
"""


@pytest.mark.slow
def test_the_worker_does_not_outlive_a_killed_bot(tmp_path):
    import subprocess
    import sys
    import time
    from pathlib import Path

    script = tmp_path / "bot.py"
    script.write_text(PARENT)
    repo = Path(__file__).resolve().parents[2]
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(repo)})
    try:
        worker_pid = int(parent.stdout.readline())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        for _ in range(100):  # it notices within a second or two
            try:
                os.kill(worker_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(worker_pid, signal.SIGKILL)
            raise AssertionError("the embedding worker outlived the process that started it")
    finally:
        if parent.poll() is None:
            parent.kill()

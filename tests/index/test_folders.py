"""The served Chroma folder is never written: an ingest writes a draft, whole or torn when its process
is killed, and its commit names the draft as served (oracle/index/folders.py)."""
from __future__ import annotations

import hashlib
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oracle.index import folders
from oracle.index.vectors import WRITING, VectorStore
from tests.index.test_vectors import window_rows

ROOT = Path(__file__).resolve().parents[2]


def fingerprint(folder: Path) -> dict[str, str]:
    """The folder's index files. Not Chroma's SQLite file: every client that opens the folder writes
    a row there (SQLite keeps that whole on its own)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.startswith("chroma.sqlite3")
    }


def served_folder(base: Path, n: int = 40) -> tuple[str, list[str]]:
    """A version holding `n` windows, as a commit serves it."""
    name = folders.draft(base, "", "")
    ids, rows, metadatas = window_rows(n)
    store = VectorStore(base / name, "test")
    store.upsert(ids, rows, metadatas)
    store.close()
    return name, ids


def test_a_draft_is_a_copy_and_writing_it_leaves_the_served_folder_as_it_was(tmp_path):
    base = tmp_path / "chroma"
    served, ids = served_folder(base)
    before = fingerprint(base / served)
    draft = folders.draft(base, served, "")
    assert draft != served
    store = VectorStore(base / draft, "test")
    assert store.all_ids() == set(ids)
    more, rows, metadatas = window_rows(30, seed=3)
    store.upsert([f"new-{i}" for i in more], rows, metadatas)
    store.delete(ids[:10])
    store.close()
    assert before == fingerprint(base / served)
    reader = VectorStore(base / served, "test")
    assert reader.all_ids() == set(ids)


def test_a_whole_draft_is_gone_on_from_and_a_torn_one_is_made_again(tmp_path):
    base = tmp_path / "chroma"
    served, ids = served_folder(base)
    draft = folders.draft(base, served, "")
    assert draft == folders.draft(base, served, "")  # whole: the next ingest goes on from it
    (base / draft / WRITING).touch()  # as a process killed in the middle of a write leaves it
    again = folders.draft(base, served, "")
    assert again != draft and not (base / draft).exists()
    assert VectorStore(base / again, "test").all_ids() == set(ids)
    other = base / "v-other"  # a draft of another served folder: nothing to go on from
    other.mkdir()
    (other / folders.DRAFT).write_text(json.dumps({"from": "v-gone"}))
    newer = folders.draft(base, served, "")
    assert newer == again and not other.exists()


def test_retiring_keeps_the_served_folder_and_the_one_before(tmp_path):
    base = tmp_path / "chroma"
    legacy = VectorStore(base, "test")  # a store from before versions: Chroma's files in the base itself
    ids, rows, metadatas = window_rows(12)
    legacy.upsert(ids, rows, metadatas)
    legacy.close()
    first = folders.draft(base, "", "")
    assert VectorStore(base / first, "test").all_ids() == set(ids)  # the versions are not copied into it
    folders.retire(base, first, "")
    assert (base / "chroma.sqlite3").exists()  # served before: a process may still be reading it
    assert not (base / first / folders.DRAFT).exists()
    second = folders.draft(base, first, "")
    stray = folders.draft(base, second, first)  # a draft of a folder never served
    folders.retire(base, second, first)
    left = sorted(p.name for p in base.iterdir())
    assert left == sorted(["oracle-access.lock", first, second]) and stray not in left
    assert VectorStore(base / second, "test").all_ids() == set(ids)


WRITER = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from oracle.index.vectors import VectorStore
from tests.index.test_vectors import window_rows

store = VectorStore(Path({folder!r}), "test")
print("open", flush=True)
n = 0
while True:
    ids, vectors, metadatas = window_rows(64, seed=n)
    store.upsert([f"w{{n}}-{{i}}" for i in ids], vectors, metadatas)
    if n >= 4:
        store.delete([f"w{{n - 4}}-{{i}}" for i in ids[:32]])
    n += 1
"""


@pytest.mark.slow  # a dozen processes, each killed while it writes
def test_a_process_killed_while_writing_a_draft_leaves_the_served_folder_and_a_usable_draft(tmp_path):
    """Killed at random moments of a stream of writes (many of them in the middle of Chroma saving its
    index): the served folder is read as it was, and the draft the next ingest gets always opens."""
    base = tmp_path / "chroma"
    served, ids = served_folder(base, 200)
    before = fingerprint(base / served)
    moments = random.Random(7)
    cuts = 0
    for _ in range(12):
        draft = folders.draft(base, served, "")
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER.format(root=str(ROOT), folder=str(base / draft))],
            stdout=subprocess.PIPE, text=True,
        )
        assert writer.stdout is not None and "open" == writer.stdout.readline().strip()
        time.sleep(moments.uniform(0.05, 1.5))
        writer.send_signal(signal.SIGKILL)
        writer.wait(30)
        assert before == fingerprint(base / served)
        reader = VectorStore(base / served, "test")
        assert reader.all_ids() == set(ids)
        reader.close()
        cut = (base / draft / WRITING).exists()
        cuts += cut
        going_on = folders.draft(base, served, "")
        assert (going_on == draft) != cut
        store = VectorStore(base / going_on, "test")  # whole: every read of it works
        assert set(ids) <= store.all_ids()
        _, vectors, _ = window_rows(4, seed=1)
        assert store.query(vectors[0], 3)
        store.close()
    assert cuts  # some kills did land in the middle of a write
    assert json.loads((base / going_on / folders.DRAFT).read_text()) == {"from": served}


async def test_a_store_from_before_versions_is_served_then_moved_into_versions(
    mini_notes, make_settings, open_quick_index
):
    """An index whose Chroma files sit in `data/chroma` itself (as the Oracle kept them before) is
    served as it is; the next ingest that writes serves a version, and the old files go once two
    versions have been served."""
    import shutil
    import sqlite3

    from oracle.index.ingest import ingest
    from oracle.oracle import Oracle

    settings = make_settings(mini_notes)
    base = settings.chroma_path
    index = open_quick_index(settings)
    first = await ingest(index)
    await index.close()
    with sqlite3.connect(settings.sqlite_path) as db:
        (version,) = db.execute("SELECT value FROM meta WHERE key = ?", (folders.SERVED,)).fetchone()
        db.execute("DELETE FROM meta WHERE key IN (?, ?)", (folders.SERVED, folders.BEFORE))
    for path in (base / version).iterdir():
        shutil.move(str(path), base / path.name)
    (base / version).rmdir()

    index = open_quick_index(settings)
    assert first.windows_embedded == await (await index.vectors()).count()
    assert (await Oracle(index).search("Who sold Mirela the brass compass?")).paths["semantic"]
    session = mini_notes / "sessions" / "Session 4.md"
    for n in range(2):
        session.write_text(session.read_text() + f"\nOld Wick blew out candle {n}.\n")
        report = await ingest(index)
        assert (0, 1) == (report.windows_repaired, len(report.changed))
        assert (base / "chroma.sqlite3").exists() == (n == 0)  # served before the first version only
        assert await (await index.store()).window_count() == await (await index.vectors()).count()
        assert (await Oracle(index).search("Who sold Mirela the brass compass?")).paths["semantic"]

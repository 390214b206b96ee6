"""Broken stores, a full disk and a read-only data folder: a clear message, and the old index served."""
from __future__ import annotations

import sqlite3
import subprocess
import uuid
from pathlib import Path

import pytest

from oracle.cli import main
from oracle.index.ingest import IngestError, ingest
from oracle.index.vectors import VectorStoreError
from oracle.oracle import Oracle

QUESTION = "Who sold Mirela the brass compass?"


def cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, " ".join((captured.out + captured.err).split())


def test_a_corrupt_sqlite_index_says_what_to_run(mini_notes, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "oracle.sqlite3").write_bytes(b"this is not a database" * 100)
    for command in (["status"], ["search", QUESTION, "--notes", str(mini_notes)], ["ask", QUESTION, "--notes", str(mini_notes)]):
        code, output = cli(capsys, *command, "--data", str(data))
        assert 1 == code
        assert "is unreadable (file is not a database); delete the data folder and run `oracle ingest`" in output
        assert "Traceback" not in output


def test_a_missing_index_says_what_to_run(tmp_path, capsys):
    code, output = cli(capsys, "status", "--data", str(tmp_path / "nothing"))
    assert (1, True) == (code, "run `oracle ingest` first" in output)


async def test_a_lost_chroma_folder_is_refused_then_repaired(mini_notes, make_settings, open_quick_index, tmp_path):
    first = await ingest(open_quick_index(make_settings(mini_notes)))
    # The SQLite index without its Chroma folder (Chroma caches an open store per path within a
    # process, so the folder is left behind rather than deleted under it).
    settings = make_settings(mini_notes, data_dir=tmp_path / "moved")
    settings.data_dir.mkdir()
    with sqlite3.connect(make_settings(mini_notes).sqlite_path) as src, sqlite3.connect(settings.sqlite_path) as dst:
        src.backup(dst)  # WAL mode: a file copy could miss the latest commit

    with pytest.raises(VectorStoreError) as err:
        await Oracle(open_quick_index(settings)).search(QUESTION)
    assert f"holds 0 of the {first.windows_embedded} windows the index names: run `oracle ingest`" in str(err.value)

    report = await ingest(open_quick_index(settings))
    assert (first.chunks, first.windows_embedded) == (report.windows_repaired, report.windows_embedded)
    retrieval = await Oracle(open_quick_index(settings)).search(QUESTION)
    assert "campaign-log › Session 1" == retrieval.paths["semantic"][0].chunk.label


@pytest.fixture
def small_disk(tmp_path):
    """A real 3 MB filesystem (tmpfs) for the data folder; needs root, as CI and this machine have."""
    mount = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path) -> None:
    """Leave the filesystem with no free block."""
    with open(disk / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass


async def _answers(index) -> list[list[str]]:
    oracle = Oracle(index)
    out = []
    for q in (QUESTION, "Who ambushed them at the ford?", "What is the Drowned Bell?"):
        retrieval = await oracle.search(q)
        out.append([h.chunk.id for h in retrieval.fused[:5]])
    return out


async def test_a_full_disk_stops_the_ingest_and_keeps_the_old_index(mini_notes, make_settings, open_quick_index, small_disk):
    settings = make_settings(mini_notes, data_dir=small_disk / "data")
    index = open_quick_index(settings)
    await ingest(index)
    before = await _answers(index)

    (mini_notes / "sessions" / "Session 7.md").write_text("## Session 7\n" + "The party walked the salt road. " * 3000)
    _fill(small_disk)
    with pytest.raises(IngestError) as err:
        await ingest(index)
    assert str(err.value).startswith("the ingest stopped (")
    assert str(err.value).endswith("the previous index is still served")

    assert before == await _answers(index)  # the open index keeps answering, unchanged
    (small_disk / "filler").unlink()
    report = await ingest(index)  # room again: the next run completes
    assert ["sessions/Session 7.md"] == report.added


async def test_a_read_only_data_folder_stops_the_ingest_and_keeps_the_old_index(
    mini_notes, make_settings, open_quick_index, small_disk
):
    """Linux will not remount a folder read-only while the index holds files open for writing,
    so the read-only view is a second, read-only bind mount of the same folder."""
    settings = make_settings(mini_notes, data_dir=small_disk / "data")
    index = open_quick_index(settings)
    await ingest(index)
    before = await _answers(index)
    await index.close()
    snapshot = {p: p.read_bytes() for p in settings.data_dir.rglob("*") if p.is_file()}

    read_only = small_disk.parent / f"ro-{uuid.uuid4().hex[:6]}"
    read_only.mkdir()
    subprocess.run(["mount", "--bind", str(settings.data_dir), str(read_only)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(read_only)], check=True)
        (mini_notes / "sessions" / "Session 7.md").write_text("## Session 7\nThe party rested.")
        with pytest.raises(IngestError) as err:
            await ingest(open_quick_index(make_settings(mini_notes, data_dir=read_only)))
        assert "the ingest stopped (Read-only file system); the previous index is still served" == str(err.value)
    finally:
        subprocess.run(["umount", "-l", str(read_only)], check=False)
    assert snapshot == {p: p.read_bytes() for p in settings.data_dir.rglob("*") if p.is_file()}
    assert before == await _answers(open_quick_index(settings))

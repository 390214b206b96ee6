"""`oracle backup` and `oracle restore` (oracle/backup.py): real SQLite files written while they are
copied, a real index and Chroma folder restored and answering, and the copy an upgrade keeps."""
from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
import threading
from pathlib import Path

import pytest

from oracle.backup import BackupError, backup, restore
from oracle.campaigns import Campaigns
from oracle.cli import main
from oracle.index.ingest import ingest
from oracle.index.lock import IngestLock, NotWritable, check_writable
from oracle.journal import Asked, Journal
from oracle.oracle import Oracle
from tests.test_journal import answer

QUESTION = "Who sold Mirela the brass compass?"


def count(path, table: str) -> int:
    with sqlite3.connect(path) as db:
        return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


async def journal_of(settings, n: int) -> None:
    async with await Journal.open(settings.journal_path) as journal:
        for i in range(n):
            await journal.record(Asked("ask", f"question {i}?", 1, "Mira"), answer(f"answer {i}"))


async def test_a_backup_taken_while_the_journal_is_written_is_whole_and_restores(mini_notes, make_settings, tmp_path):
    settings = make_settings(mini_notes)
    await journal_of(settings, 5)
    stop = threading.Event()

    def play() -> None:  # the bot recording answers all along, on a connection of its own
        db = sqlite3.connect(settings.journal_path)
        n = 0
        while not stop.is_set():
            db.execute("INSERT INTO answers (kind, question, answer, mode, abstained, citations, gm) "
                       "VALUES ('ask', ?, 'a', 'llm', 0, '[]', 0)", (f"during {n}",))
            db.commit()
            n += 1
        db.close()

    writer = threading.Thread(target=play)
    writer.start()
    try:
        done = [backup(settings, Campaigns.single(settings), tmp_path / "backups") for _ in range(3)]
    finally:
        stop.set()
        writer.join()
    total = count(settings.journal_path, "answers")
    kept = [count(d.folder / "campaigns" / "default" / "journal.sqlite3", "answers") for d in done]
    assert 5 <= kept[0] <= kept[1] <= kept[2] <= total  # each a snapshot of its own moment
    for d in done:
        with sqlite3.connect(d.folder / "campaigns" / "default" / "journal.sqlite3") as db:
            assert "ok" == db.execute("PRAGMA integrity_check").fetchone()[0]

    settings.journal_path.unlink()
    restore(settings, Campaigns.single(settings), done[2].folder)
    assert kept[2] == count(settings.journal_path, "answers")


async def test_the_index_comes_back_with_its_chroma_folder_and_answers(mini_notes, make_settings, open_quick_index, tmp_path):
    settings = make_settings(mini_notes)
    index = open_quick_index(settings)
    await ingest(index)
    before = [h.chunk.id for h in (await Oracle(index).search(QUESTION)).fused[:5]]
    await index.close()
    done = backup(settings, Campaigns.single(settings), tmp_path / "backups", index=True)
    assert not (done.folder / "bot.sqlite3").exists()  # no bot ever ran: nothing to copy

    shutil.rmtree(settings.data_dir)
    restore(settings, Campaigns.single(settings), done.folder)
    index = open_quick_index(settings)
    assert before == [h.chunk.id for h in (await Oracle(index).search(QUESTION)).fused[:5]]
    assert (await Oracle(index).search(QUESTION)).paths["semantic"]
    report = await ingest(index)  # nothing to embed again: the windows came back too
    assert (0, [], []) == (report.windows_embedded, report.added, report.changed)


async def test_a_running_index_reads_the_restored_one_at_its_next_question(
    mini_notes, make_settings, open_quick_index, tmp_path
):
    settings = make_settings(mini_notes)
    index = open_quick_index(settings)
    await ingest(index)
    done = backup(settings, Campaigns.single(settings), tmp_path / "backups", index=True)
    (mini_notes / "sessions" / "Session 9.md").write_text("## Session 9\nThe lighthouse keeper counted gulls.")
    await ingest(index)
    assert "Session 9" in (await Oracle(index).search("Who counted the gulls?")).fused[0].chunk.label
    restore(settings, Campaigns.single(settings), done.folder)
    labels = [h.chunk.label for h in (await Oracle(index).search("Who counted the gulls?")).fused]
    assert not any("Session 9" in label for label in labels)  # the index as it was backed up


async def test_a_restore_waits_for_no_ingest_and_refuses_what_is_not_a_backup(mini_notes, make_settings, tmp_path):
    settings = make_settings(mini_notes)
    await journal_of(settings, 1)
    done = backup(settings, Campaigns.single(settings), tmp_path / "backups")
    with IngestLock(settings.lock_path, "the command line"):
        with pytest.raises(Exception, match="an ingest is already running"):
            restore(settings, Campaigns.single(settings), done.folder)
    with pytest.raises(BackupError, match="is not an Oracle backup"):
        restore(settings, Campaigns.single(settings), tmp_path)


async def test_keep_leaves_the_newest_backups(mini_notes, make_settings, tmp_path, monkeypatch):
    import oracle.backup as backup_mod

    settings = make_settings(mini_notes)
    await journal_of(settings, 1)
    stamps = iter(["20261201T000000Z", "20261202T000000Z", "20261203T000000Z"])

    class Clock:
        @staticmethod
        def now(tz):
            return type("T", (), {"strftime": lambda self, f: next(stamps)})()

    monkeypatch.setattr(backup_mod, "datetime", Clock)
    for _ in range(3):
        backup(settings, Campaigns.single(settings), tmp_path / "backups", keep=2)
    assert ["oracle-20261202T000000Z", "oracle-20261203T000000Z"] == sorted(p.name for p in (tmp_path / "backups").iterdir())


def test_the_commands_back_up_and_restore_the_journal_and_the_threads(mini_notes, tmp_path, monkeypatch, capsys):
    import asyncio

    from bot.history import ThreadHistory

    monkeypatch.chdir(tmp_path)
    for name in ("ORACLE_CAMPAIGNS", "ORACLE_CHROMA_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ORACLE_NOTES_DIR", str(mini_notes))
    monkeypatch.setenv("ORACLE_DATA_DIR", str(tmp_path / "var"))
    from oracle.settings import Settings

    settings = Settings(_env_file=None)

    async def play() -> None:
        await journal_of(settings, 3)
        history = await ThreadHistory.open(settings.threads_path)
        await history.add_thread(41, 1, 2, 3, "default")
        await history.close()

    async def thread_campaign() -> str | None:
        history = await ThreadHistory.open(settings.threads_path)
        try:
            return await history.campaign_of(41)
        finally:
            await history.close()

    asyncio.run(play())

    assert 0 == main(["backup", str(tmp_path / "saved"), "--json"])
    made = json.loads(capsys.readouterr().out)
    assert sorted(made["files"]) == ["bot.sqlite3", "campaigns/default/journal.sqlite3"]
    shutil.rmtree(tmp_path / "var")
    assert 0 == main(["restore", made["folder"]])
    assert 3 == count(settings.journal_path, "answers")
    assert "default" == asyncio.run(thread_campaign())
    assert 1 == main(["restore", str(tmp_path)])
    assert "is not an Oracle backup" in capsys.readouterr().err


def test_an_index_another_user_owns_is_refused_in_one_sentence_and_left_alone(mini_notes, tmp_path, capsys):
    """As root (the sandbox's and CI's user), an index the service's user owns is refused: its new
    files would be root's. As that user, a folder it may not write is refused the same way."""
    import os

    if os.geteuid() != 0:
        pytest.skip("needs root to own a folder as another user")
    data = tmp_path / "var"
    data.mkdir()
    os.chown(data, 4321, 4321)
    code = main(["ingest", "--notes", str(mini_notes), "--data", str(data)])
    said = " ".join(capsys.readouterr().err.split())
    assert code == 1 and f"the index at {data} belongs to user 4321: as root this would leave files" in said
    assert "/opt/oracle/systemd/oracle-run COMMAND" in said and list(data.iterdir()) == []

    os.chown(data, 0, 0)
    data.chmod(0o755)
    reachable = Path(tempfile.mkdtemp(prefix="oracle-perm-"))  # /tmp: every user may pass through it
    reachable.chmod(0o755)
    try:
        os.setegid(4321)
        os.seteuid(4321)  # this process, as another user, for the two checks
        try:
            with pytest.raises(NotWritable) as unreachable:
                check_writable(data)  # under pytest's own folder, which only root may enter
            with pytest.raises(NotWritable) as refused:
                check_writable(reachable)
        finally:
            os.seteuid(0)
            os.setegid(0)
    finally:
        reachable.rmdir()
    assert f"cannot reach the index at {data} (permission denied)" in str(unreachable.value)
    assert f"cannot write the index at {reachable}, which belongs to root" in str(refused.value)

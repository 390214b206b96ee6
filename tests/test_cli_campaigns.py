"""`--campaign NAME` on the command line, and `oracle watch`, with a campaigns file and without."""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oracle.cli import cmd_watch, main, parser
from oracle.index.store import Store
from tests.conftest import MINI_CAMPAIGN, closed_port_url, write_notes
from tests.index.test_library import HARBOUR


@pytest.fixture
def env(monkeypatch, tmp_path):
    """A clean environment in an empty folder: no developer's .env, Ollama away, annotations off."""
    monkeypatch.chdir(tmp_path)
    for name in ("ORACLE_CAMPAIGNS", "ORACLE_NOTES_DIR", "ORACLE_DATA_DIR", "ORACLE_CHROMA_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OLLAMA_HOST", closed_port_url())
    monkeypatch.setenv("ORACLE_ANNOTATE", "false")
    monkeypatch.setenv("ORACLE_DATA_DIR", str(tmp_path / "var"))
    return monkeypatch


@pytest.fixture
def campaigns_file(env, tmp_path):
    write_notes(tmp_path / "ember", MINI_CAMPAIGN)
    write_notes(tmp_path / "harbour", HARBOUR)
    path = tmp_path / "campaigns.toml"
    path.write_text('[campaigns.ember]\nnotes = "ember"\ndiscord.channels = [1]\ndiscord.gm_roles = ["ember gm"]\n\n'
                    '[campaigns.harbour]\nnotes = "harbour"\ndata = "var/the-harbour"\ndiscord.channels = [2]\ndiscord.gm_roles = ["harbour gm"]\n')
    env.setenv("ORACLE_CAMPAIGNS", str(path))
    return path


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, " ".join(captured.err.split())


def test_an_unknown_campaign_lists_the_names(campaigns_file, capsys):
    code, _, err = cli(capsys, "search", "anything", "--campaign", "sunday")
    assert 1 == code
    assert f"there is no campaign 'sunday' in {campaigns_file}; the campaigns are: ember, harbour" in err


def test_without_the_file_only_the_default_campaign_exists(env, capsys):
    code, _, err = cli(capsys, "status", "--campaign", "tuesday")
    assert 1 == code
    assert "no ORACLE_CAMPAIGNS file: only the default campaign); the campaigns are: default" in err


def test_a_bad_campaigns_file_stops_every_command_with_its_line(env, tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('[campaigns.a]\nnotes = "."\nchanels = [1]\n')
    env.setenv("ORACLE_CAMPAIGNS", str(bad))
    for command in (["status"], ["ingest"], ["search", "x"], ["watch"]):
        code, _, err = cli(capsys, *command)
        assert (1, True) == (code, f"{bad}, line 3: unknown key 'chanels'" in err), err


def test_ingest_takes_every_campaign_and_search_names_one(campaigns_file, tmp_path, capsys, quick_command_line):
    code, out, _ = cli(capsys, "ingest", "--json")
    assert 0 == code
    reports = json.loads(out)["campaigns"]
    assert (["ember", "harbour"], 4) == (sorted(reports), reports["harbour"]["files"]["added"])
    assert (tmp_path / "var" / "ember" / "oracle.sqlite3").exists()
    assert (tmp_path / "var" / "the-harbour" / "oracle.sqlite3").exists()  # relative to the file

    code, _, err = cli(capsys, "search", "Who lost two fingers?")
    assert 1 == code and "lists several campaigns: name one with --campaign (ember, harbour)" in err
    code, out, _ = cli(capsys, "search", "Who lost two fingers?", "--campaign", "harbour", "--json", "--gm")
    assert 0 == code
    fused = [h["label"] for h in json.loads(out)["fused"]]
    assert "Session 2" == fused[0]
    assert set(fused) <= {"Session 1", "Session 2", "Session 3", "Sheet: Odile_Marsh"}


def test_the_default_campaign_is_todays_single_campaign(env, tmp_path, capsys, quick_command_line):
    notes = write_notes(tmp_path / "notes", HARBOUR)
    env.setenv("ORACLE_NOTES_DIR", str(notes))
    code, out, _ = cli(capsys, "ingest", "--campaign", "default", "--json")
    assert (0, 4) == (code, json.loads(out)["files"]["added"])  # the report itself, as before
    assert (tmp_path / "var" / "oracle.sqlite3").exists()  # ORACLE_DATA_DIR itself, as before


async def test_oracle_watch_prints_each_reingest(campaigns_file, tmp_path, capsys, quick_command_line):
    args = parser().parse_args(["watch", "--campaign", "harbour", "--quiet", "0.3", "--json"])
    task = asyncio.create_task(cmd_watch(args))

    async def next_report() -> dict:
        for _ in range(600):
            lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
            if lines:
                return json.loads(lines[0])
            await asyncio.sleep(0.1)
        raise AssertionError("no reingest")

    try:
        caught_up = await next_report()  # the notes were never indexed: the first pass takes them all
        assert ("harbour", 4) == (caught_up["campaign"], len(caught_up["paths"]["added"]))
        (tmp_path / "harbour" / "sessions" / "Session 4.md").write_text("The Gull limped home to Port Vessery.\n")
        report = await next_report()
        assert ("harbour", ["sessions/Session 4.md"]) == (report["campaign"], report["paths"]["added"])
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_an_ingest_that_never_finished_is_no_index(env, tmp_path, capsys, quick_command_line):
    """A missing notes folder is said as such and leaves nothing behind. A first ingest that stopped
    before its one write leaves an index file with nothing in it: `status` says so, and a question
    ingests first instead of answering from nothing."""
    code, _, err = cli(capsys, "ingest", "--notes", str(tmp_path / "nowhere"))
    assert (2, True) == (code, "the notes folder" in err and "does not exist: set ORACLE_NOTES_DIR" in err), err
    assert not (tmp_path / "var").exists()

    env.setenv("ORACLE_NOTES_DIR", str(write_notes(tmp_path / "notes", HARBOUR)))
    (tmp_path / "var").mkdir()
    asyncio.run(_open_and_close(tmp_path / "var" / "oracle.sqlite3"))
    code, _, err = cli(capsys, "status")
    assert (1, True) == (code, "no ingest has finished into" in err), err

    code, out, err = cli(capsys, "search", "Who lost two fingers?", "--json", "--gm")
    assert 0 == code, err  # answered from the notes: ingested first
    assert "Session 2" == json.loads(out)["fused"][0]["label"]


def test_a_notes_folder_that_is_a_file_or_holds_no_note_is_one_sentence_and_exit_2(env, tmp_path, capsys,
                                                                                   quick_command_line):
    """A wrong folder, or a vault not synced or mounted yet, never ingests 0 notes quietly, and never
    empties an index that holds some."""
    a_file = tmp_path / "vault.md"
    a_file.write_text("# Session 1\n")
    code, _, err = cli(capsys, "ingest", "--notes", str(a_file))
    assert (2, f"the notes folder {a_file} is a file, not a folder" in err) == (2, True), err
    empty = tmp_path / "empty"
    (empty / ".obsidian").mkdir(parents=True)
    (empty / ".obsidian" / "workspace.md").write_text("not a note")  # a hidden folder holds no note
    code, _, err = cli(capsys, "ingest", "--notes", str(empty))
    assert (code, f"the notes folder {empty} holds no Markdown note: set ORACLE_NOTES_DIR" in err) == (2, True), err
    assert not (tmp_path / "var").exists()

    notes = write_notes(tmp_path / "notes", HARBOUR)
    assert 0 == cli(capsys, "ingest", "--notes", str(notes))[0]
    for path in notes.rglob("*.md"):
        path.unlink()  # the sync folder came up empty
    code, _, err = cli(capsys, "ingest", "--notes", str(notes))
    assert (code, "holds no Markdown note (the index is kept as it was)" in err) == (2, True), err
    code, out, _ = cli(capsys, "search", "Who lost two fingers?", "--json", "--gm", "--notes", str(notes))
    assert 0 == code and json.loads(out)["fused"]  # still answered from the index


async def _open_and_close(path) -> None:
    store = await Store.open(path)
    await store.close()


def test_messages_keep_their_square_brackets(env, tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('notes = "x"\n')
    env.setenv("ORACLE_CAMPAIGNS", str(bad))
    code, _, err = cli(capsys, "status")
    assert (1, True) == (code, "the file holds [campaigns.NAME] tables only" in err), err


def run_cli(*argv: str, env: dict[str, str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oracle.cli", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300, check=False)


def test_a_bad_setting_or_a_failed_ingest_is_one_line_not_a_traceback(tmp_path):
    """In a process of its own, as a game master runs it: logging set up by the command line."""
    base = {**os.environ, "OLLAMA_HOST": closed_port_url(), "ORACLE_ANNOTATE": "false",
            "ORACLE_DATA_DIR": str(tmp_path / "var"), "ORACLE_CAMPAIGNS": ""}
    done = run_cli("status", env={**base, "ORACLE_WATCH_QUIET": "abc"}, cwd=tmp_path)
    assert 2 == done.returncode, done.stderr
    assert "Traceback" not in done.stderr and 1 == len(done.stderr.strip().splitlines()), done.stderr
    assert "a setting is wrong: ORACLE_WATCH_QUIET:" in done.stderr

    done = run_cli("ingest", "--notes", str(tmp_path / "nowhere"), env=base, cwd=tmp_path)
    assert 2 == done.returncode, done.stderr  # bad input, as a wrong setting
    assert "Traceback" not in done.stderr, done.stderr
    assert [f"oracle ingest: the notes folder {tmp_path / 'nowhere'} does not exist: set ORACLE_NOTES_DIR (or "
            "--notes) to your vault"] == done.stderr.strip().splitlines()

    done = run_cli("status", env={**base, "ORACLE_NOTES_DIR": str(tmp_path / "nowhere")}, cwd=tmp_path)
    assert 1 == done.returncode, done.stderr
    assert 1 == len(done.stderr.strip().splitlines()), done.stderr
    assert f"and the notes folder {tmp_path / 'nowhere'} does not exist: set ORACLE_NOTES_DIR" in done.stderr


def test_oracle_watch_stops_cleanly_on_sigterm(tmp_path):
    """systemd stops a unit with SIGTERM: the watcher closes its indexes and says so, like Ctrl-C."""
    notes = write_notes(tmp_path / "notes", HARBOUR)
    environ = {**os.environ, "OLLAMA_HOST": closed_port_url(), "ORACLE_ANNOTATE": "false", "ORACLE_CAMPAIGNS": "",
               "ORACLE_NOTES_DIR": str(notes), "ORACLE_DATA_DIR": str(tmp_path / "var")}
    watcher = subprocess.Popen([sys.executable, "-m", "oracle.cli", "watch", "--no-catch-up", "--quiet", "0.5"],
                               stderr=subprocess.PIPE, text=True, env=environ, cwd=tmp_path)
    try:
        assert watcher.stderr is not None
        first = watcher.stderr.readline()
        assert first.startswith(f"watching {notes}"), first
        time.sleep(0.5)
        watcher.send_signal(signal.SIGTERM)
        code = watcher.wait(60)
        rest = watcher.stderr.read()
    finally:
        watcher.kill()
    assert 143 == code, rest
    assert "Traceback" not in rest
    assert "stopped: no longer watching" in rest, rest


def test_a_timer_ingest_skips_a_campaign_being_ingested_and_succeeds(campaigns_file, tmp_path, capsys,
                                                                     quick_command_line):
    from oracle.index.lock import IngestLock
    from oracle.settings import Settings

    ember = Settings(_env_file=None, data_dir=tmp_path / "var" / "ember")
    with IngestLock(ember.lock_path, by="gm#1234 (/oracle reingest)"):
        code, out, _ = cli(capsys, "ingest", "--if-idle", "--json")
        reports = json.loads(out)["campaigns"]
        assert 0 == code
        assert reports["ember"]["skipped"].startswith("an ingest is already running (started by gm#1234")
        assert 4 == reports["harbour"]["files"]["added"]

        code, out, _ = cli(capsys, "ingest", "--campaign", "ember", "--if-idle")
        assert (0, True) == (code, "skipped: an ingest is already running" in " ".join(out.split()))

        code, _, err = cli(capsys, "ingest", "--campaign", "ember")  # by hand: refused, as before
        assert (1, True) == (code, "an ingest is already running" in err)


def test_status_during_a_first_ingest_says_it_runs_and_a_stopped_first_ingest_says_nothing_was_indexed(tmp_path):
    """The real command line with the paced stand-in for the model, so the first ingest is still
    embedding while `status` runs, and a SIGTERM (as Ctrl-C) lands inside it."""
    from tests.fakes.hashed_cli import PACE

    notes = write_notes(tmp_path / "notes", {f"sessions/Session {n}.md": f"## Session {n}\n" + "The gulls cried. " * 200
                                             for n in range(1, 8)})
    environ = {**os.environ, "OLLAMA_HOST": closed_port_url(), "ORACLE_ANNOTATE": "false", "ORACLE_CAMPAIGNS": "",
               "ORACLE_NOTES_DIR": str(notes), "ORACLE_DATA_DIR": str(tmp_path / "var"), PACE: "0.2",
               "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    first = subprocess.Popen([sys.executable, "-m", "tests.fakes.hashed_cli", "ingest"], stderr=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, text=True, env=environ, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "var" / "oracle.sqlite3").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        status = subprocess.run([sys.executable, "-m", "tests.fakes.hashed_cli", "status"], capture_output=True,
                                text=True, env=environ, cwd=tmp_path, timeout=60)
        assert first.poll() is None, "the first ingest ended before status ran"
        first.send_signal(signal.SIGTERM)
        code = first.wait(60)
        said = first.stderr.read() if first.stderr else ""
    finally:
        first.kill()
    assert 1 == status.returncode, status.stderr
    assert "the first ingest into" in status.stderr and "is not done yet: an ingest is running (started by the " \
        "command line at" in " ".join(status.stderr.split()), status.stderr
    assert 143 == code and "stopped: nothing was indexed yet; run the command again" in said, said
    assert "previous index" not in said


def test_a_large_note_is_said_with_what_it_costs_and_a_redirected_ingest_shows_its_stages(env, tmp_path, capsys,
                                                                                         quick_command_line):
    notes = write_notes(tmp_path / "notes", {
        "sessions/Session 1.md": "## Session 1\n" + "The gulls cried over the harbour while the captain argued. " * 400,
        "sessions/Session 2.md": "## Session 2\nThe party met the monk.\n",
    })
    env.setenv("ORACLE_LARGE_NOTE_KB", "10")
    code, out, err = cli(capsys, "ingest", "--notes", str(notes))
    assert 0 == code, err
    said = " ".join(out.split())
    assert re.search(r"note sessions/Session 1\.md: a large note \(2\d KB, 4,003 words: (\d+) windows", said), said
    assert "windows to embed, slow on a CPU); indexed all the same" in said and "Session 2.md: a large" not in said
    # Not a terminal (a log, a pipe): a line as each stage starts, with how much it has to do.
    assert f"reading the notes in {notes}" in err and "embedding windows: " in err and "writing the index" in err
    code, out, err = cli(capsys, "ingest", "--notes", str(notes), "--json")
    assert "embedding windows" not in err and "a large note" not in out  # unchanged: nothing read again

"""One index, any number of processes: an ingest run by another process (`oracle ingest` from a shell,
a timer, `oracle watch`) is found by every path of an index a process already holds open (as the bot
holds it) at its next question; two ingests of one campaign never run at once, the second told why;
and a process that reads while another writes, or writes after another wrote, leaves the index whole.

The other process is the real command line, with the hashed stand-in for the model
(tests/fakes/hashed_cli.py); the index held open is the test's own, with the real SQLite and Chroma
and the same stand-in. What is judged is what each process reads of the other's writes, not which
passages a model ranks first: a question naming a new session's words finds it first on every path
once it is read. docs/processes.md has the design.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from oracle.index.ingest import ingest
from oracle.index.lock import IngestBusy
from oracle.oracle import Oracle
from tests.conftest import closed_port_url
from tests.fakes.hashed_cli import PACE
from tests.test_kill import wait_for_lock

ROOT = Path(__file__).resolve().parent.parent

NEW_SESSION = """
## Session 5 — The Flooded Vault
Beneath the Saltmarsh chapel the party waded into a flooded vault. Teodric pried a glass heron from
the silt; its eyes were two drowned pearls. The heron sang one note when Mirela touched it.
"""
NEW_QUESTION = "What did Teodric pry out of the silt in the flooded vault?"
LATER_SESSION = """
## Session 6 — The Ash Orchard
The party camped in an orchard of burnt apple trees east of Greyhaven. A scarecrow of iron wire
taught Pip a riddle about seven lanterns before it crumbled into rust.
"""
LATER_QUESTION = "Who taught Pip a riddle in the burnt orchard?"
# In the long sessions' own rare words: their windows are mostly a repeated tail, which outweighs a
# question's few words for the bag-of-words stand-in. What is judged there is that every window is
# read back and found by its own vector; these only show the new sessions among the first found.
NEW_WORDS = "Teodric glass heron silt drowned pearls"
LATER_WORDS = "scarecrow iron wire riddle crumbled rust"


def cli_env(embed_seconds: float = 0.0) -> dict[str, str]:
    return {**os.environ, "OLLAMA_HOST": closed_port_url(), "ORACLE_OLLAMA_PROBE_TIMEOUT": "2",
            "PYTHONPATH": str(ROOT), PACE: str(embed_seconds)}


def cli_ingest(notes: Path, data: Path, cwd: Path) -> list[str]:
    return [sys.executable, "-m", "tests.fakes.hashed_cli", "ingest", "--notes", str(notes), "--data", str(data),
            "--json"]


async def ingest_elsewhere(notes: Path, data: Path, cwd: Path) -> dict:
    """`oracle ingest` in a process of its own; its report."""
    done = await asyncio.to_thread(
        subprocess.run, cli_ingest(notes, data, cwd), capture_output=True, text=True, env=cli_env(), cwd=cwd,
        timeout=600,
    )
    assert 0 == done.returncode, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def long_tail(word: str) -> str:
    """About 3,000 words of a session's ordinary prose, each paragraph its own."""
    return "".join(f"\nOn day {n} the {word} rose over the reeds and the party kept watch until dawn. " * 12
                   for n in range(20))


def labels(hits) -> list[str]:
    return [h.chunk.label for h in hits]


async def test_an_ingest_in_another_process_is_found_by_every_path_at_the_next_question(
    quick_mini_campaign, make_settings, open_quick_index, tmp_path
):
    mini_notes = quick_mini_campaign.notes  # ingested once for the session, copied here
    settings = make_settings(mini_notes)
    index = open_quick_index(settings)  # held open all along, as the bot holds it
    oracle = Oracle(index)
    before = await oracle.search(NEW_QUESTION)  # the dense index is in this process's memory now
    assert "Session 5" not in labels(before.fused)

    (mini_notes / "sessions" / "Session 5.md").write_text(NEW_SESSION.lstrip())
    report = await ingest_elsewhere(mini_notes, settings.data_dir, tmp_path)
    assert (1, 0) == (report["files"]["added"], report["files"]["changed"])

    after = await oracle.search(NEW_QUESTION)
    assert "Session 5" == labels(after.paths["semantic"])[0]  # the dense index read afresh
    assert "Session 5" == labels(after.paths["keyword"])[0]
    assert "Session 5" == labels(after.fused)[0]
    # Nothing changed since: the next question reads the same store, which still finds it.
    vectors = await index.vectors()
    assert vectors is await index.vectors()
    assert "Session 5" == labels((await oracle.search(NEW_QUESTION)).paths["semantic"])[0]


PROBE = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from oracle import Index, Oracle, Settings
    from tests.fakes.embedder import HashEmbedder

    async def main():
        settings = Settings(_env_file=None, notes_dir=Path(sys.argv[1]), data_dir=Path(sys.argv[2]))
        async with Index(settings, embedder=HashEmbedder()) as index:
            oracle = Oracle(index)
            found = {}
            for question in json.loads(sys.argv[3]):
                retrieval = await oracle.search(question)
                found[question] = [h.chunk.label for h in retrieval.paths["semantic"][:3]]
            vectors = await index.vectors()
            ids, _, matrix = await vectors.vectors()  # every window read back, and each found by its vector
            unfound = [i for i, v in zip(ids, matrix) if (await vectors.query(v, 1))[0].distance > 1e-4]
            print(json.dumps({"found": found, "windows": len(ids), "unfound": unfound}))

    asyncio.run(main())
    """
)


async def test_an_ingest_here_after_one_elsewhere_leaves_the_index_whole_for_every_process(
    quick_mini_campaign, make_settings, open_quick_index, tmp_path
):
    """A write through a dense index read before another process wrote it leaves the folder unreadable
    (measured: every later reader crashed). This process ingests right after another did, before any
    question could have read the index afresh; then a new process reads everything."""
    mini_notes = quick_mini_campaign.notes  # ingested once for the session, copied here
    settings = make_settings(mini_notes)
    index = open_quick_index(settings)
    await Oracle(index).search(NEW_QUESTION)  # the dense index is in memory
    # Long sessions: each ingest writes more windows than Chroma keeps unsaved (16), so both save it.
    (mini_notes / "sessions" / "Session 5.md").write_text(NEW_SESSION.lstrip() + long_tail("tide"))
    elsewhere = await ingest_elsewhere(mini_notes, settings.data_dir, tmp_path)
    (mini_notes / "sessions" / "Session 6.md").write_text(LATER_SESSION.lstrip() + long_tail("ember"))
    report = await ingest(index)
    assert ["sessions/Session 6.md"] == report.added
    assert min(elsewhere["windows_embedded"], report.windows_embedded) > 16

    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, str(script), str(mini_notes), str(settings.data_dir), json.dumps([NEW_WORDS, LATER_WORDS])],
        capture_output=True, text=True, env=cli_env(), cwd=tmp_path, timeout=300,
    )
    assert 0 == done.returncode, done.stderr[-2000:]
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert "Session 5" in probe["found"][NEW_WORDS]
    assert "Session 6" in probe["found"][LATER_WORDS]
    assert (probe["windows"], []) == (await (await index.store()).window_count(), probe["unfound"])
    assert "Session 6" in labels((await Oracle(index).search(LATER_WORDS)).paths["semantic"])[:3]


async def test_a_second_ingest_is_refused_while_questions_are_answered_and_the_first_is_then_found(
    quick_mini_campaign, make_settings, open_quick_index, tmp_path
):
    mini_notes = quick_mini_campaign.notes  # ingested once for the session, copied here
    settings = make_settings(mini_notes)
    index = open_quick_index(settings)
    oracle = Oracle(index)
    await oracle.search(NEW_QUESTION)
    for n in range(10, 40):  # enough text that the other process's ingest takes a while
        (mini_notes / "sessions" / f"Session {n}.md").write_text(
            f"## Session {n}\n" + f"Mirela charted the coast past the Saltmarsh, day {n}. " * 120
        )
    (mini_notes / "sessions" / "Session 5.md").write_text(NEW_SESSION.lstrip())

    first = subprocess.Popen(  # noqa: ASYNC220 - started at once; every wait on it is off the loop
        cli_ingest(mini_notes, settings.data_dir, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=cli_env(embed_seconds=0.01), cwd=tmp_path,
    )
    try:
        await asyncio.to_thread(wait_for_lock, settings.lock_path, first)
        # Another shell's ingest of the same campaign: refused at once, with who holds it.
        second = await asyncio.to_thread(
            subprocess.run, cli_ingest(mini_notes, settings.data_dir, tmp_path), capture_output=True, text=True,
            env=cli_env(), cwd=tmp_path, timeout=300,
        )
        said = " ".join((second.stdout + second.stderr).split())
        assert 1 == second.returncode, second.stdout + second.stderr
        assert "oracle ingest: an ingest is already running (started by the command line at " in said
        assert f"pid {first.pid})" in said
        # This process's own ingest (the bot's reingest, `oracle watch`): refused the same way.
        with pytest.raises(IngestBusy, match=rf"^an ingest is already running \(started by the command line at .*, pid {first.pid}\)$"):
            await ingest(index)
        # Questions go on while the other process writes the dense index, never failing.
        asked = 0
        while first.poll() is None:
            retrieval = await oracle.search(NEW_QUESTION)
            assert retrieval.fused
            asked += 1
        assert asked > 0
        _, err = await asyncio.to_thread(first.communicate, timeout=600)
        assert 0 == first.returncode, err[-2000:]
    finally:
        if first.poll() is None:
            first.kill()
    assert "Session 5" == labels((await oracle.search(NEW_QUESTION)).paths["semantic"])[0]

"""A real ingest process killed (SIGKILL) at several moments: the previous index stays whole and
served, and the next ingest completes it with no orphan window, chunk or mention.

Every step runs in its own process, as a game master's would: the ingest under test, and the
searches that check what is served, each a new process reading the folders as they were left
(tests/test_processes.py checks what a process holding the index open reads). The processes are the
real command line with the hashed stand-in for the model (tests/fakes/hashed_cli.py), its embedding
paced by sleeping: what is judged is what a kill leaves on disk, not which passages rank first, and
a process without torch starts in a second and spends no CPU while it "embeds".
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from testing.ollama_server import Delay, FakeOllama
from tests.conftest import MINI_CAMPAIGN, write_notes
from tests.fakes.hashed_cli import LOG, PACE

QUESTIONS = ["Who sold Mirela the brass compass?", "Who ambushed them at the ford?", "What did the ledger name?"]
ROOT = Path(__file__).resolve().parent.parent
EMBED_SECONDS = "0.01"  # per window: the edited notes' 150-odd windows take over a second to embed

PROBE = textwrap.dedent(
    """
    import asyncio, json, sqlite3, sys
    from pathlib import Path
    from oracle import Index, Oracle, Settings
    from tests.fakes.embedder import HashEmbedder

    async def main():
        settings = Settings(notes_dir=Path(sys.argv[1]), data_dir=Path(sys.argv[2]))
        questions = json.loads(sys.argv[3])
        async with Index(settings, embedder=HashEmbedder()) as index:
            oracle = Oracle(index)
            answers = [[h.chunk.id for h in (await oracle.search(q)).fused[:5]] for q in questions]
            vectors = await index.vectors(check=False)
            chroma_ids = sorted(await vectors.all_ids())
        db = sqlite3.connect(settings.sqlite_path)
        state = {
            "integrity": db.execute("PRAGMA integrity_check").fetchone()[0],
            "fts": db.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')").rowcount,
            "chunks": sorted(r[0] for r in db.execute("SELECT id FROM chunks")),
            "windows": sorted(r[0] for r in db.execute("SELECT id FROM windows")),
            "window_chunks": sorted({r[0] for r in db.execute("SELECT chunk_id FROM windows")}),
            "mention_chunks": sorted({r[0] for r in db.execute("SELECT chunk_id FROM mentions")}),
        }
        print(json.dumps({"answers": answers, "chroma": chroma_ids, **state}))

    asyncio.run(main())
    """
)


def env(ollama: str, data: Path) -> dict[str, str]:
    return {**os.environ, "OLLAMA_HOST": ollama, "ORACLE_OLLAMA_PROBE_TIMEOUT": "2", "ORACLE_OLLAMA_TIMEOUT": "5",
            "PYTHONPATH": str(ROOT), PACE: EMBED_SECONDS, LOG: str(embed_log(data))}


def embed_log(data: Path) -> Path:
    return data.parent / "embedded.log"


def embedded_batches(data: Path) -> int:
    """Batches embedded so far, by every ingest process."""
    log = embed_log(data)
    return len(log.read_text().splitlines()) if log.exists() else 0


def probe(notes: Path, data: Path, ollama: str, script: Path) -> dict:
    done = subprocess.run(
        [sys.executable, str(script), str(notes), str(data), json.dumps(QUESTIONS)],
        capture_output=True, text=True, env=env(ollama, data), timeout=120, cwd=ROOT,
    )
    assert 0 == done.returncode, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def ingest_process(notes: Path, data: Path, ollama: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.hashed_cli", "ingest", "--notes", str(notes), "--data", str(data), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(ollama, data), cwd=ROOT,
    )


def locked(lock: Path) -> bool:
    if not lock.exists():
        return False
    with open(lock, "rb") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def wait_until(reached: Callable[[], bool], process: subprocess.Popen, what: str, timeout: float = 60) -> None:
    """Until `reached()`, while the ingest process still runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the ingest ended before {what}: " + process.stderr.read().decode()[-2000:]
        if reached():
            return
        time.sleep(0.01)
    raise AssertionError(f"the ingest never reached {what}")


def wait_for_lock(lock: Path, process: subprocess.Popen, timeout: float = 60) -> None:
    """Until the ingest process holds its lock: it has loaded the model and started the work."""
    wait_until(lambda: locked(lock), process, "its lock", timeout)


def whole(state: dict) -> None:
    assert ("ok", state["chunks"]) == (state["integrity"], sorted(set(state["chunks"])))
    assert set(state["window_chunks"]) <= set(state["chunks"])  # no window of a missing chunk
    assert set(state["mention_chunks"]) <= set(state["chunks"])  # no mention of a missing chunk
    assert set(state["windows"]) <= set(state["chroma"])  # every window SQLite names is stored


@pytest.mark.slow  # a dozen processes, and annotations that take a while: over 20 s
def test_killing_an_ingest_at_any_moment_loses_nothing(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    campaign = dict(MINI_CAMPAIGN)
    for n in range(10, 40):  # enough text that the embedding takes a while
        campaign[f"sessions/Session {n}.md"] = (
            f"## Session {n}\n" + f"Mirela charted the coast past the Saltmarsh, day {n}. " * 120
        )
    notes = write_notes(tmp_path / "notes", campaign)
    data = tmp_path / "data"
    with FakeOllama(models=["qwen2.5:14b"]) as fake:
        # Each annotation takes a while, so a kill can land while annotating too.
        fake.responder = lambda request: Delay(0.1, then={"summary": "A passage.", "entities": []})
        first = ingest_process(notes, data, fake.url)
        assert 0 == first.wait(600), first.stderr.read().decode()[-2000:]
        old = probe(notes, data, fake.url, script)
        whole(old)

        # The game master edits: a new session, a changed one, a deleted one.
        (notes / "sessions" / "Session 40.md").write_text("## Session 40\nThe brass compass was sold again, to a gull.")
        log = notes / "sessions" / "campaign-log.md"
        log.write_text(log.read_text().replace("ambushed them at the ford", "ambushed them at the old ford"))
        (notes / "sessions" / "Session 4.md").unlink()
        for n in range(10, 40, 3):
            session = notes / "sessions" / f"Session {n}.md"
            session.write_text(session.read_text() + "\nA storm came in from the west.")

        def annotations_asked() -> int:
            return len(fake.chat_requests())  # no search runs during an ingest: each one annotates

        def reached(stage: str) -> Callable[[], bool]:
            """Whether the ingest about to start has reached `stage`, watched from outside."""
            asked, batches = annotations_asked(), embedded_batches(data)
            return {
                "scan": lambda: True,  # it holds the lock
                "embed": lambda: embedded_batches(data) > batches,  # a batch embedded, more to come
                "commit": lambda: annotations_asked() > asked,  # the first annotation asked: just committed
                "annotate": lambda: annotations_asked() > asked + 3,  # annotating, some already cached
            }[stage]

        served = []
        for stage in ["scan", "embed", "commit", "annotate"]:
            kill_now = reached(stage)
            process = ingest_process(notes, data, fake.url)
            wait_for_lock(data / "ingest.lock", process)
            wait_until(kill_now, process, stage)
            process.send_signal(signal.SIGKILL)
            process.wait(60)
            state = probe(notes, data, fake.url, script)
            whole(state)
            served.append(state)

        final = ingest_process(notes, data, fake.url)
        out, err = final.communicate(timeout=600)
        assert 0 == final.returncode, err.decode()[-2000:]
        new = probe(notes, data, fake.url, script)

    whole(new)
    assert new["chroma"] == new["windows"]  # no orphan window left in Chroma
    assert sorted(new["chunks"]) == new["window_chunks"]  # every chunk has its windows
    assert old["answers"] != new["answers"]  # the edits changed what is served
    for state in served:  # after every kill: the old index or the new one, never a mix
        assert state["chunks"] in (old["chunks"], new["chunks"])
        for answer in state["answers"]:  # and every answer drawn from that index alone
            assert set(answer) <= set(state["chunks"])

"""The bot answers while `oracle ingest` runs in another process (a shell, the reingest timer): its
next answer cites the session that ingest added, found by its semantic path as by its keyword path.

Both processes embed with the hashed stand-in for the model (the bot's module campaign already does;
the other process is tests/fakes/hashed_cli.py): what is judged is that the bot reads what the other
process wrote, and a question in the new session's words finds it first on every path."""
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from tests.bot.harness import QUESTION, bot_messages, run, spy

pytestmark = pytest.mark.asyncio(loop_scope="module")


NEW_SESSION = """## Session 5 — The Flooded Vault
Beneath the Saltmarsh chapel the party waded into a flooded vault. Teodric pried a glass heron from
the silt; its eyes were two drowned pearls. The heron sang one note when Mirela touched it.
"""
NEW_QUESTION = "What did Teodric pry out of the silt in the flooded vault?"


async def oracle_ingest(notes: Path, data: Path, ollama: str, cwd: Path) -> dict:
    """The real command line on the stand-in, in a process of its own, against the same fake Ollama as
    the bot."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.fakes.hashed_cli", "ingest", "--notes", str(notes), "--data", str(data), "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=cwd,
        env={**os.environ, "OLLAMA_HOST": ollama, "ORACLE_OLLAMA_PROBE_TIMEOUT": "5",
             "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    out, err = await asyncio.wait_for(process.communicate(), 600)
    assert 0 == process.returncode, (out + err).decode()[-2000:]
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_the_next_answer_cites_a_session_another_process_ingested(world, fake, oracle_bot, tmp_path):
    searches = spy(oracle_bot, "search")
    await run(fake, oracle_bot, "oracle ask", {"question": QUESTION}, timeout=60)  # it has read its dense index
    assert searches and "Session 5" not in bot_messages(fake)[-1].content

    (world.notes / "sessions" / "Session 5.md").write_text(NEW_SESSION)
    report = await oracle_ingest(world.notes, world.settings.data_dir, world.ollama.url, tmp_path)
    assert (1, 0) == (report["files"]["added"], report["files"]["changed"])

    await run(fake, oracle_bot, "oracle ask", {"question": NEW_QUESTION}, timeout=60)
    retrieval = searches[-1]
    assert "Session 5" == retrieval.paths["semantic"][0].chunk.label
    assert "Session 5" == retrieval.paths["keyword"][0].chunk.label
    reply = bot_messages(fake)[-1]
    assert "[Session 5]" in reply.content  # the fake model cites the first passage it was given

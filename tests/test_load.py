"""Twenty questions at once while a reingest runs: all answered, each from the old index or the new
one (never a mix), and never more LLM calls or searches at once than the configured limits."""
from __future__ import annotations

import asyncio
import sqlite3

from oracle.index.ingest import ingest
from oracle.oracle import Oracle
from testing.ollama_server import Reply
from tests.conftest import request_kind

QUESTIONS = [
    "Who sold Mirela the brass compass?", "Who ambushed them at the ford?", "What is the Drowned Bell?",
    "Who is the Candle Monk?", "What did the ledger name?", "Where is Greyhaven?", "Who is Teodric?",
    "What happened on the Weeping Bridge?", "Who is Pip?", "What is the Lantern Market?",
] * 2


def chunk_ids(settings) -> set[str]:
    with sqlite3.connect(settings.sqlite_path) as db:
        return {r[0] for r in db.execute("SELECT id FROM chunks")}


async def test_twenty_questions_during_a_reingest(mini_notes, make_settings, open_quick_index, fake_ollama):
    in_flight = 0
    most = 0

    async def slow_llm(request: dict) -> Reply:
        nonlocal in_flight, most
        if request_kind(request) == "annotate":  # the reingest's annotations
            return Reply('{"summary": "A passage of the campaign.", "entities": []}')
        in_flight += 1
        most = max(most, in_flight)
        try:
            await asyncio.sleep(0.05)
        finally:
            in_flight -= 1
        if request.get("format"):
            return Reply('{"best": [1, 2]}')
        return Reply("The notes say so [Session 1].")

    fake_ollama.responder = slow_llm
    settings = make_settings(mini_notes, ollama_host=fake_ollama.url, llm_concurrency=2, search_concurrency=3)
    index = open_quick_index(settings)
    await ingest(index)
    old = chunk_ids(settings)

    for n in range(5, 25):
        (mini_notes / "sessions" / f"Session {n}.md").write_text(f"## Session {n}\nMirela mapped cove {n} of the Saltmarsh.")
    log = mini_notes / "sessions" / "campaign-log.md"
    log.write_text(log.read_text().replace("Weeping Bridge", "Weeping Stone Bridge"))

    oracle = Oracle(index)
    searching = searching_most = 0
    search = oracle.search

    async def counted_search(*args, **kwargs):
        nonlocal searching, searching_most
        searching += 1
        searching_most = max(searching_most, searching)
        try:
            return await search(*args, **kwargs)
        finally:
            searching -= 1

    oracle.search = counted_search
    reingest = asyncio.create_task(ingest(index))
    answers = await asyncio.gather(*(oracle.ask(q) for q in QUESTIONS))
    await reingest
    new = chunk_ids(settings)

    assert old != new
    assert len(QUESTIONS) == len(answers)
    assert all(a.mode == "llm" and a.text for a in answers)
    for answer in answers:
        used = {c.id for c in answer.fragments} | {s.chunk.id for s in answer.headlines}
        assert used <= old or used <= new, f"{answer.question!r} mixed two indexes"
    assert 2 == most  # the questions' rerank and answer calls: never more than ORACLE_LLM_CONCURRENCY
    assert 3 == searching_most  # the others waited their turn: ORACLE_SEARCH_CONCURRENCY

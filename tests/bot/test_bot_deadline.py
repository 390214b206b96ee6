"""`/oracle ask` keeps the question's deadline: against the fake Ollama in its slow mode (nothing for
minutes) the asker gets the passages once ORACLE_FIRST_WORDS_SECONDS has passed, set low here; a
model still loading is said in that first reply, and it goes on loading for the next question. The
campaign, the fakes and the helpers are in `harness.py`."""
from __future__ import annotations

import asyncio

import pytest

from bot.formatting import PROGRESS
from oracle.texts import texts
from testing.ollama_server import FakeModel, FakeOllama
from tests.bot.harness import MODEL, QUESTION, first_label, run, spy, start_bot
from tests.conftest import request_kind as kind

pytestmark = pytest.mark.asyncio(loop_scope="module")

MINUTES = 600.0
PASSAGES = "**Passages, not an answer.** "


async def left(ollama: FakeOllama, count: int) -> list[dict]:
    """The requests whose client went away before the reply's end, once the fake has seen `count`."""
    for _ in range(500):
        if len(ollama.abandoned) >= count:
            break
        await asyncio.sleep(0.01)
    return list(ollama.abandoned)


async def test_an_ollama_that_answers_after_minutes_gets_the_passages_at_the_deadline(world, fake, tmp_path, indexes):
    index = indexes(first_words=2.0)
    world.ollama.abandoned.clear()
    world.ollama.slow = MINUTES
    try:
        async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=index) as client:
            answers = spy(client, "ask")
            player = await run(fake, client, "oracle ask", {"question": QUESTION}, member=fake.player, timeout=30)
            gm = await run(fake, client, "oracle ask", {"question": QUESTION, "private": True}, member=fake.gm,
                           timeout=30)
            world.ollama.slow = 0.0
            gm_status = await run(fake, client, "oracle status", member=fake.gm)
            player_status = await run(fake, client, "oracle status", member=fake.player)
    finally:
        world.ollama.slow = 0.0

    reason = "the model did not start answering within 2 s (ORACLE_FIRST_WORDS_SECONDS)"
    assert [("passages", reason, False), ("passages", reason, True)] == [(a.mode, a.reason, a.clearance.gm) for a in answers]
    assert [e.body["content"] for e in player.edits][:3] == [
        PROGRESS["searching"], PROGRESS["ranking"], PROGRESS["writing"]]
    # The player reads the passages, marked, and no host; the game master reads why.
    assert player.original.content.startswith(
        f"{PASSAGES}The Oracle could not write an answer ({texts().model_too_slow}). The most relevant passages")
    assert world.ollama.url not in "\n".join(m.content for m in player.messages)
    assert gm.original.content.startswith(f"{PASSAGES}The Oracle could not write an answer ({reason}).")
    asked = world.requests()
    assert ["rerank", "answer"] * 2 == [kind(r) for r in asked] and asked == await left(world.ollama, 4)
    # The game master's status says why the last answers were passages; a player's does not.
    assert f"**Model fallbacks:** 2 answers given as passages since the bot started (last: “{QUESTION}”" \
        in gm_status.original.content and reason in gm_status.original.content
    assert "fallbacks" not in player_status.original.content and reason not in player_status.original.content


async def test_a_model_still_loading_is_said_in_the_first_reply_and_answers_the_next(world, fake, tmp_path, indexes):
    world.ollama.add_model(FakeModel(MODEL, load_seconds=6.0))  # out of memory, and slow to load
    world.ollama.loaded.pop(MODEL, None)
    world.ollama.loads.clear()
    world.ollama.aborted_loads.clear()
    # 2.5 s: before the 6 s load ends, and room for the next question's rerank and first words on a
    # loaded machine (with 1 s, a burner beside the suite once left the rerank's share no answer).
    index = indexes(first_words=2.5)
    try:
        async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=index) as client:
            answers = spy(client, "ask")
            assert index.llm.loading  # the bot loads the model as it starts
            first = await run(fake, client, "oracle ask", {"question": QUESTION}, timeout=30)
            assert await client.warming is None  # the same load, never abandoned: now done
            later = await run(fake, client, "oracle ask", {"question": QUESTION}, timeout=30)
    finally:
        world.ollama.add_model(FakeModel(MODEL))

    assert first.original.content.startswith(f"{PASSAGES}The model is still loading; here are the passages meanwhile.")
    assert answers[0].reason == ("the model did not start answering within 2.5 s (ORACLE_FIRST_WORDS_SECONDS): "
                                 "the model is still loading")
    [answer] = world.requests("answer")[1:]
    assert ("llm", f"The Candle Monk sold the compass [{first_label(answer)}].") == (
        answers[1].mode, later.original.content)
    assert ([(MODEL, 16384)], []) == (world.ollama.loads, world.ollama.aborted_loads)

"""The Discord bot end to end: the real, unmodified discord.py client (`OracleBot`) against the fake
Discord (testing/discord/), answering from a real index with the fake Ollama recording every
request. The campaign, the fakes and the helpers are in `harness.py`."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
from pathlib import Path

import pytest

import bot.reingest
from bot.delivery import UNDELIVERED
from bot.errors import FAILED_AFTER
from bot.formatting import MESSAGE_LIMIT, PROGRESS, thread_name
from bot.streaming import WRITING_MARK
from oracle.index.index import REINGEST_FOR_POLICY, Index
from oracle.index.lock import IngestLock
from oracle.settings import Settings
from oracle.types import Clearance
from testing.discord import (
    EPHEMERAL,
    FakeDiscord,
)
from testing.ollama_server import CutStream, Reply
from tests.bot.harness import (
    ERROR_SENTENCE,
    MODEL,
    PUBLIC_NAMES,
    QUESTION,
    SECRETS,
    ZARN_GM,
    Campaign,
    bot_messages,
    buttons,
    first_label,
    headers,
    no_secret,
    rows,
    run,
    source_line,
    spy,
    start_bot,
    until,
)
from tests.conftest import closed_port_url
from tests.conftest import request_kind as kind

pytestmark = pytest.mark.asyncio(loop_scope="module")


# ---------------------------------------------------------------------------------------------
# 1. /oracle ask end to end


async def test_ask_end_to_end_as_a_player(world, fake, oracle_bot, tmp_path):
    question = QUESTION + " And what does that compass always point at, whoever carries it across the marsh?"
    assert len(question) > 100
    inter = await run(fake, oracle_bot, "oracle ask", {"question": question}, member=fake.player)

    assert (inter.response.type, inter.response.data) == (5, None)  # deferred, public
    assert [] == inter.rejected  # the fake refuses a late acknowledgement, as Discord does
    [rerank, request] = world.requests()
    assert (kind(rerank), kind(request)) == ("rerank", "answer")
    label, path, start, end = headers(request)[0]
    expected = f"The Candle Monk sold the compass [{label}]."

    assert [e.kind for e in inter.events] == ["callback"] + ["edit_original"] * 4
    assert [e.body["content"] for e in inter.edits] == [
        PROGRESS["searching"], PROGRESS["ranking"], PROGRESS["writing"], expected
    ]
    assert [e.elapsed for e in inter.edits] == sorted(e.elapsed for e in inter.edits)
    assert inter.followups == []
    original = inter.original
    assert (original.content, original.flags, original.loading) == (expected, 0, False)
    # Who asked and what: Discord itself shows only "Mirela's Player used /oracle ask".
    [embed] = original.embeds
    assert (embed["author"]["name"], embed["title"]) == ("Mirela's Player asked", question)
    assert (embed["description"], embed["footer"]["text"]) == (source_line(label, path, start, end), "Sources")
    assert original.allowed_mentions == {"parse": []}
    [answer_id] = [r[0] for r in rows(tmp_path / "journal.sqlite3", "SELECT id FROM answers")]
    assert buttons(original) == [f"oracle:sources:default:{answer_id}", f"oracle:vote:default:{answer_id}:up",
                                 f"oracle:vote:default:{answer_id}:down"]

    [thread] = fake.threads
    assert thread["id"] == str(original.id)  # opened on the answer message
    assert (thread["parent_id"], thread["type"]) == (str(fake.channel_id), 11)
    assert thread["name"] == thread_name(question) == question[:99] + "…"
    assert len(thread["name"]) == 100
    # Open for a week of silence, not the channel's default day: the next weekly session finds it.
    assert (thread["thread_metadata"]["auto_archive_duration"], thread["thread_metadata"]["archived"]) == (10080, False)
    thread_id = int(thread["id"])

    history = tmp_path / "bot.sqlite3"
    assert rows(history, "SELECT thread_id, guild_id, channel_id, owner_id FROM threads") == [
        (thread_id, fake.guild_id, fake.channel_id, fake.player.id)
    ]
    assert rows(history, f"SELECT role, content FROM turns WHERE thread_id = {thread_id:d} ORDER BY id") == [
        ("user", question), ("assistant", expected)
    ]


# ---------------------------------------------------------------------------------------------
# 2. Follow-ups in the thread, also after a restart


async def test_follow_up_in_the_thread_uses_the_history_and_survives_a_restart(world, fake, tmp_path):
    history_path = tmp_path / "bot.sqlite3"
    async with start_bot(world, fake, history_path) as client:
        inter = await run(fake, client, "oracle ask", {"question": QUESTION})
        first_answer = inter.original.content
        thread_id = int(fake.threads[0]["id"])
        searches = spy(client, "search")
        world.ollama.requests.clear()

        said = await fake.message(thread_id, fake.player, "and then what?")
        await until(lambda: len(rows(history_path, "SELECT 1 FROM turns")) == 4, what="the follow-up's turns")

        [request] = world.requests()  # "and then what?" goes on in the notes' order: nothing to rerank
        second_answer = f"The Candle Monk sold the compass [{first_label(request)}]."
        [reply] = [m for m in bot_messages(fake, thread_id)]
        assert reply.content == second_answer  # answered IN the thread
        assert [m.id for m in fake.messages(fake.channel_id) if m.author_id == fake.app_id] == [inter.original.id]
        assert reply.embeds[0]["footer"]["text"] == "Sources" and "title" not in reply.embeds[0]
        assert reply.data["message_reference"]["message_id"] == str(said.id)  # a reply to the question
        assert reply.allowed_mentions == {"parse": []}
        assert fake.requests_for("POST", f"/channels/{thread_id}/typing")  # "Oracle is typing…"
        # The search was expanded with the previous question; the question answered is the user's own.
        [retrieval] = searches
        assert retrieval.search_query == f"{QUESTION} and then what?"
        assert retrieval.told == retrieval.fused[0].chunk.id  # the passage told last, first
        # ...which is the passage the first answer cited, kept with its turn.
        assert [(retrieval.told,), (retrieval.reached,)] == rows(history_path, "SELECT told FROM turns WHERE role = 'assistant' ORDER BY id")
        assert [(m["role"], m["content"]) for m in request["messages"][1:-1]] == [
            ("user", QUESTION), ("assistant", first_answer)
        ]
        assert request["messages"][-1]["content"].endswith("\n\nQuestion: and then what?")
        assert said.id not in [m.id for m in bot_messages(fake)]

    # A new bot process (new client, the same history file): the thread is still the Oracle's.
    world.ollama.requests.clear()
    async with start_bot(world, fake, history_path) as client:
        searches = spy(client, "search")
        await fake.message(thread_id, fake.player, "and after that?")
        await until(lambda: len(rows(history_path, "SELECT 1 FROM turns")) == 6, what="the turns after the restart")
        [request] = world.requests()
        [after] = searches  # on from the passage the answer before went to, as the history kept it
        assert (after.told,) == rows(history_path, "SELECT told FROM turns WHERE role = 'assistant' ORDER BY id")[1]
        assert [(m["role"], m["content"]) for m in request["messages"][1:-1]] == [
            ("user", QUESTION), ("assistant", first_answer), ("user", "and then what?"), ("assistant", second_answer)
        ]
        replies = bot_messages(fake, thread_id)
        assert [m.content for m in replies][-1] == f"The Candle Monk sold the compass [{first_label(request)}]."
        assert len(replies) == 2
    assert rows(history_path, "SELECT role, content FROM turns ORDER BY id")[-2:] == [
        ("user", "and after that?"), ("assistant", replies[-1].content)
    ]


async def test_a_follow_up_a_week_later_in_the_thread_discord_archived_is_answered(world, fake, tmp_path):
    """Discord archives a thread after its archive time without a word and syncs only active threads:
    discord.py drops it, and a member's message (which unarchives it) reaches the bot for a thread
    it does not hold, a week later and after a restart alike."""
    history_path = tmp_path / "bot.sqlite3"
    async with start_bot(world, fake, history_path) as client:
        await run(fake, client, "oracle ask", {"question": QUESTION})
        thread_id = int(fake.threads[0]["id"])
        assert [thread_id] == await fake.pass_time(7 * 24 * 3600)  # a week without a word
        await until(lambda: client.get_channel(thread_id) is None, what="discord.py letting the thread go")
        said = await fake.message(thread_id, fake.player, "and then what?")
        await until(lambda: len(rows(history_path, "SELECT 1 FROM turns")) == 4, what="the follow-up's turns")
        [reply] = bot_messages(fake, thread_id)
        assert reply.data["message_reference"]["message_id"] == str(said.id)
        assert not fake.archived(thread_id)

    assert [thread_id] == await fake.pass_time(7 * 24 * 3600)  # another week, the bot restarted meanwhile
    async with start_bot(world, fake, history_path) as client:
        assert client.get_channel(thread_id) is None  # READY holds only active threads
        await fake.message(thread_id, fake.player, "and after that?")
        await until(lambda: len(rows(history_path, "SELECT 1 FROM turns")) == 6, what="the turns after the restart")
        assert len(bot_messages(fake, thread_id)) == 2


async def mention_follow_up(world: Campaign, fake: FakeDiscord, history_path: Path) -> None:
    """Without the message-content intent: ask, then follow up in the thread unmentioned, then mentioned."""
    async with start_bot(world, fake, history_path, message_content=False) as client:
        assert not fake.intents & (1 << 15)
        await run(fake, client, "oracle ask", {"question": QUESTION})
        thread_id = int(fake.threads[0]["id"])
        await fake.message(thread_id, fake.player, "and then what?")  # not mentioned: blank content here
        await asyncio.sleep(0.3)
        assert len(bot_messages(fake, thread_id)) == 0
        await fake.message(thread_id, fake.player, f"{fake.bot.mention} and then what?")
        await until(lambda: len(rows(history_path, "SELECT 1 FROM turns")) == 4, what="the mention's turns")
        assert rows(history_path, "SELECT role, content FROM turns ORDER BY id")[2] == ("user", "and then what?")
        assert len(bot_messages(fake, thread_id)) == 1


async def test_without_the_message_content_intent_a_mention_in_the_thread_is_answered(world, fake, tmp_path):
    await mention_follow_up(world, fake, tmp_path / "bot.sqlite3")


async def test_a_mentioned_follow_up_logs_no_error(world, fake, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    await mention_follow_up(world, fake, tmp_path / "bot.sqlite3")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


# ---------------------------------------------------------------------------------------------
# 3. A private ask


async def test_a_private_ask_is_ephemeral_and_opens_no_thread(world, fake, oracle_bot, tmp_path):
    inter = await run(fake, oracle_bot, "oracle ask", {"question": QUESTION, "private": True})
    assert (inter.response.type, inter.response.data) == (5, {"flags": EPHEMERAL})
    assert [] == inter.rejected  # the fake refuses a late acknowledgement, as Discord does
    [request] = world.requests("answer")
    assert inter.original.content == f"The Candle Monk sold the compass [{first_label(request)}]."
    assert inter.original.flags == EPHEMERAL and inter.original.ephemeral
    assert [m.ephemeral for m in bot_messages(fake)] == [True]
    assert fake.threads == []
    assert fake.requests_for("POST", "/channels/{channel_id}/messages/{message_id}/threads") == []
    assert rows(tmp_path / "bot.sqlite3", "SELECT * FROM threads") == []


# ---------------------------------------------------------------------------------------------
# 4. Reingest


@pytest.fixture
def ingest_calls(monkeypatch) -> list:
    calls: list = []
    real = bot.reingest.ingest

    async def counted(*args, **kwargs):
        calls.append(kwargs.get("by"))
        return await real(*args, **kwargs)

    monkeypatch.setattr(bot.reingest, "ingest", counted)
    return calls


async def test_reingest_is_refused_to_a_player(world, fake, oracle_bot, ingest_calls):
    inter = await fake.interaction("oracle reingest", member=fake.player)
    await inter.settle()
    assert (4, []) == (inter.response.type, inter.rejected)
    assert inter.response.data["flags"] == EPHEMERAL
    assert (inter.original.content, inter.original.ephemeral) == ("Only a game master can reingest the notes.", True)
    assert [e.kind for e in inter.events] == ["callback"]
    assert ingest_calls == []
    assert world.requests() == []


async def test_reingest_by_a_game_master_reports_progress_and_a_summary(
    world, fake, tmp_path, ingest_calls, monkeypatch
):
    # Its own copy of the notes and data, so the module's index stays as it is.
    notes = Path(shutil.copytree(world.notes, tmp_path / "notes"))
    index = Index(world.make_settings(notes_dir=notes, data_dir=tmp_path / "data"), embedder=world.embedder)
    monkeypatch.setattr(bot.reingest, "PROGRESS_EVERY", 0.1)
    world.brain.annotate_delay = 0.1  # 12 annotations: over a second of progress
    try:
        async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=index) as client:
            inter = await fake.interaction("oracle reingest", member=fake.gm)
            await inter.wait_edits(1, timeout=10)
            # Another game master while it runs: refused, naming who started the running one.
            other = await fake.interaction("oracle reingest", member=fake.owner)
            [refusal] = await other.wait_followups(1)
            await fake.wait_until(lambda: inter.id in client.completed, 20, "the reingest")
    finally:
        await index.close()

    assert (inter.response.type, inter.response.data) == (5, {"flags": EPHEMERAL})
    assert [] == inter.rejected  # the fake refuses a late acknowledgement, as Discord does
    # Progress and summary are an ordinary message in the game master's DMs: no 15-minute limit.
    assert inter.original.content == "⚙️ Reingest started: progress and summary in your direct messages."
    [report] = fake.dm_messages(fake.gm)
    assert report.body["content"] == "⚙️ Reingest started…"
    *progress, summary = [e["content"] for e in report.edits]
    assert len(progress) >= 2
    line = re.compile(r"⚙️ Reingesting: files( \d+/\d+)?(, windows embedded \d+/\d+)?(, index [01]/1)?"
                      r"(, annotations \d+/12)?")
    assert all(line.fullmatch(p) for p in progress), progress
    assert any(", annotations " in p for p in progress)
    head, added = summary.split("\n**Added**\n")
    assert re.fullmatch(
        r"✅ Reingest done in \d+\.\d s: 7 added, 0 changed, 0 removed, 0 unchanged, 0 skipped\.\n"
        r"12 passages indexed, 12 embedded, annotations 12/12\.\n"
        r"🔒 Kept from players: 2 game-master-only notes, 2 secret blocks in 1 other note \(per file: `oracle ingest`\)\.",
        head,
    ), head
    # Every note added, with the sessions and labels it holds (the summary is the game master's own).
    assert [line.split("`")[1] for line in added.splitlines()] == sorted(
        ["gm/Plans.md", "npcs/Brother_Aldous.md", "sessions/Session 4.md", "sessions/campaign-log.md",
         "sheets/Mirela_Vane.md", "world/GODS.md", "world/The_True_Heir.md"])
    assert ("• `sessions/campaign-log.md`: campaign-log, campaign-log › Session 1 — The Lantern Market,"
            " campaign-log › Session 2,") in added
    assert ingest_calls == [f"Game Master ({fake.gm.id})", f"Guild Owner ({fake.owner.id})"]

    assert refusal.ephemeral
    assert re.fullmatch(
        rf"Not started: an ingest is already running \(started by Game Master \({fake.gm.id}\) at "
        rf"\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00, pid {os.getpid()}\)\.",
        refusal.content,
    ), refusal.content


async def test_reingest_while_another_ingest_holds_the_lock_is_refused(world, fake, oracle_bot, ingest_calls):
    with IngestLock(world.settings.lock_path, by="someone"):
        inter = await fake.interaction("oracle reingest", member=fake.gm)
        await inter.settle()
    assert (inter.response.type, inter.response.data) == (5, {"flags": EPHEMERAL})
    [message] = inter.followups
    assert message.ephemeral
    assert re.fullmatch(
        rf"Not started: an ingest is already running \(started by someone at "
        rf"\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00, pid {os.getpid()}\)\.",
        message.content,
    ), message.content
    assert len(ingest_calls) == 1 and world.requests() == []


# ---------------------------------------------------------------------------------------------
# 5. Mentions


async def test_an_answer_pings_nobody(world, fake, oracle_bot):
    def pinging(request: dict) -> str:
        return (f"@everyone @here <@123> <@{fake.gm.id}> <@&{fake.gm_role_id}> "
                f"The Candle Monk sold the compass [{first_label(request)}].")

    world.brain.answer = pinging
    inter = await run(fake, oracle_bot, "oracle ask", {"question": QUESTION})
    thread_id = int(fake.threads[0]["id"])
    await fake.message(thread_id, fake.player, "and then what?")
    await fake.wait_until(lambda: bot_messages(fake, thread_id), 5, "the follow-up answer")

    sent = bot_messages(fake)
    assert [m.id for m in sent] == [inter.original.id, bot_messages(fake, thread_id)[0].id]
    for message in sent:
        assert message.content.startswith(f"@everyone @here <@123> <@{fake.gm.id}> <@&{fake.gm_role_id}> ")
        assert message.allowed_mentions == {"parse": []}
        assert (message.mention_ids, message.data["mention_roles"], message.data["mention_everyone"]) == (
            [], [], False)


# ---------------------------------------------------------------------------------------------
# 6. A long answer


def long_answer(request: dict) -> str:
    label = first_label(request)  # "campaign-log › Session 1": the sentence is short enough for it to fit
    paragraphs = [
        " ".join(
            f"In paragraph {p} the Candle Monk, sentence {s}, tells again how the compass was sold "
            f"in the market [{label}]."
            for s in range(4)
        )
        for p in range(11)
    ]
    return "\n\n".join(paragraphs)


async def test_a_long_answer_is_split_at_paragraphs_and_nothing_is_lost(world, fake, oracle_bot):
    world.brain.answer = long_answer
    inter = await run(fake, oracle_bot, "oracle ask", {"question": QUESTION})
    [request] = world.requests("answer")
    text = long_answer(request)
    assert 4500 <= len(text) <= 5500

    pieces = [m.content for m in inter.messages]
    assert len(pieces) == 3
    assert all(len(p) <= MESSAGE_LIMIT for p in pieces)
    assert "\n\n".join(pieces) == text  # cut only between paragraphs, nothing lost
    assert all(p.endswith(".") and p.startswith("In paragraph ") for p in pieces)
    assert [e.kind for e in inter.events][-3:] == ["edit_original", "followup", "followup"]
    assert [bool(m.embeds) for m in inter.messages] == [False, False, True]  # sources after the last piece
    assert all(m.allowed_mentions == {"parse": []} and not m.ephemeral for m in inter.messages)
    [thread] = fake.threads
    assert thread["id"] == str(inter.original.id)


# ---------------------------------------------------------------------------------------------
# 7. Autocomplete


async def test_autocomplete_offers_at_most_25_names_and_never_a_gm_only_one(world, fake, oracle_bot):
    choices = await fake.autocomplete("oracle who", {"name": ""}, member=fake.player)
    assert choices == [{"name": n, "value": n} for n in PUBLIC_NAMES[:25]]
    inter = fake.interactions[-1]
    assert (8, []) == (inter.response.type, inter.rejected)

    zarn = await fake.autocomplete("oracle who", {"name": "zar"}, member=fake.gm)
    public_zarn = [n for n in PUBLIC_NAMES if n.startswith("Zarn ")]
    assert [c["value"] for c in zarn] == public_zarn[:25]
    assert ZARN_GM not in [c["value"] for c in zarn]  # even to a game master: anyone may be watching
    assert ZARN_GM in await oracle_bot.oracle.dossiers.names("zar", clearance=Clearance.GM, limit=25)  # it is there for GM answers

    assert await fake.autocomplete("oracle who", {"name": "Lost"}, member=fake.gm) == []
    assert await oracle_bot.oracle.dossiers.names("Lost", clearance=Clearance.GM) == ["The True Heir"]  # "the Lost Prince"
    assert await fake.autocomplete("oracle who", {"name": "old w"}) == [
        {"name": "Brother Aldous", "value": "Brother Aldous"}
    ]


# ---------------------------------------------------------------------------------------------
# 8. /oracle who


async def test_who_returns_the_dossier_of_an_alias(world, fake, oracle_bot):
    inter = await run(fake, oracle_bot, "oracle who", {"name": "Old Wick"})
    assert (inter.response.type, inter.response.data) == (5, None)
    assert inter.original.content == ""
    [embed] = inter.original.embeds
    assert embed["title"] == "Brother Aldous"
    assert embed["description"] == "\n".join([
        "**campaign-log › Session 1** — `sessions/campaign-log.md` lines 3–5 (3×)",
        "**Session 4** — `sessions/Session 4.md` lines 1–2 (1×)",
        "**Sheet: Brother_Aldous** — `npcs/Brother_Aldous.md` lines 4–4 (3×)",
    ])
    assert [(f["name"], f["value"], f["inline"]) for f in embed["fields"]] == [
        ("Also called", "Aldous, Brother, Old Wick, the Candle Monk", False),
        ("First seen", "campaign-log › Session 1", True),
        ("Last seen", "Session 4", True),
    ]
    assert embed["footer"]["text"] == "sheet · mentioned under 3 labels"
    assert world.requests() == []


async def test_who_keeps_gm_only_names_for_private_gm_answers(world, fake, oracle_bot):
    player = await run(fake, oracle_bot, "oracle who", {"name": "the Lost Prince", "private": True})
    assert player.original.content == "The Compendium has no entry for “the Lost Prince”."
    assert player.original.embeds == []
    gm = await run(fake, oracle_bot, "oracle who", {"name": "the Lost Prince", "private": True}, member=fake.gm)
    assert gm.original.ephemeral and gm.original.embeds[0]["title"] == "The True Heir"
    public = await run(fake, oracle_bot, "oracle who", {"name": "the Lost Prince"}, member=fake.gm)
    assert public.original.content == "The Compendium has no entry for “the Lost Prince”."


# ---------------------------------------------------------------------------------------------
# 9. /oracle status


def last_ingest(settings: Settings) -> str:
    return dict(rows(settings.sqlite_path, "SELECT key, value FROM meta"))["last_ingest"]


async def test_status_is_ephemeral_and_names_counts_ollama_and_the_intent(world, fake, oracle_bot):
    await oracle_bot.warming  # the startup load, which status reports
    inter = await run(fake, oracle_bot, "oracle status", member=fake.player)
    assert (inter.response.type, inter.response.data) == (5, {"flags": EPHEMERAL})
    assert inter.original.ephemeral
    assert inter.original.content == "\n".join([
        # A player's counts are of what a player can read: 2 notes and 4 passages are GM-only.
        "**Notes:** 5 files, 4 sessions, 8 passages, 44 Compendium entries",
        f"**Last ingest:** {last_ingest(world.settings)}",
        "**Language of the notes:** English (en)",
        "**Annotations:** 8/8",
        f"**Models:** answers with `{MODEL}`, embeds with `bundled:all-MiniLM-L6-v2`",
        "**Ollama:** answers",
        "**Context window:** 16384 tokens, 1024 of them for the answer",
        "**Model loaded:** yes, with 16384 tokens of context",
        "**Thread follow-ups:** on (message-content intent enabled)",
    ])


async def test_status_says_when_ollama_is_down_and_the_intent_is_off(world, fake, tmp_path, indexes):
    host = closed_port_url()
    index = indexes(ollama_host=host)
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=index, message_content=False) as client:
        inter = await run(fake, client, "oracle status", member=fake.gm)
    lines = inter.original.content.split("\n")
    assert lines[5] == f"**Ollama:** Ollama is not reachable at {host}"
    assert lines[6] == (f"**Context window:** 16384 tokens, 1024 of them for the answer (the model's context "
                        f"length is unknown (Ollama is not reachable at {host}))")
    assert lines[7] == f"**Model loaded:** unknown: Ollama is not reachable at {host}"
    assert lines[8] == (
        "**Thread follow-ups:** only when the bot is mentioned. To read every reply in a thread, enable the "
        "Message Content intent for this application in the Discord Developer Portal (Bot → Privileged Gateway "
        "Intents) and restart the bot."
    )
    assert inter.original.ephemeral and len(inter.original.content) <= MESSAGE_LIMIT


async def test_a_players_status_names_no_host_nor_the_policy_a_game_masters_names_the_policy(
    world, fake, tmp_path, indexes
):
    host = closed_port_url()
    index = indexes(ollama_host=host, player_notes=["sessions/", "Handouts"], gm_notes=["TODO.md"])
    policy = "players read only sessions/, Handouts (ORACLE_PLAYER_NOTES); game master only: TODO.md (ORACLE_GM_NOTES)"
    assert policy == index.settings.policy.describe()
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=index) as client:
        player = await run(fake, client, "oracle status", member=fake.player)
        gm = await run(fake, client, "oracle status", member=fake.gm)

    shown = player.original.content
    port = host.rsplit(":", 1)[1]
    assert [] == re.findall(rf"127\.0\.0\.1|http|(?<!\d){port}(?!\d)|reachable|Who reads what|ORACLE_|TODO\.md", shown)
    lines = shown.split("\n")
    assert lines[5:8] == [
        "**Ollama:** not answering",
        "**Context window:** 16384 tokens, 1024 of them for the answer (the model's context length is unknown)",
        "**Model loaded:** unknown: not answering",
    ]
    assert player.original.ephemeral and gm.original.ephemeral
    lines = gm.original.content.split("\n")
    assert f"**Who reads what:** {policy}" in lines
    assert f"**Ollama:** Ollama is not reachable at {host}" in lines
    # The module's notes were indexed under no policy: the game master learns that players are refused,
    # and what the last ingest made of the notes; a player sees neither.
    assert ("⚠️ **Policy:** the notes were indexed under “everything else is public unless marked or named like GM"
            " material”; players are refused until `/oracle reingest`.") in lines
    assert "**What the Oracle made of your notes:**" in lines and "- language: English (en)" in lines
    assert len(gm.original.content) <= MESSAGE_LIMIT
    assert [] == re.findall(r"Policy|made of your notes", shown)


async def test_a_player_asking_an_index_built_under_another_policy_is_told_to_wait_for_a_reingest(
    world, fake, tmp_path, indexes
):
    index = indexes(player_notes=["sessions/"])
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=index):
        inter = await fake.interaction("oracle ask", {"question": QUESTION}, member=fake.player)
        [refusal] = await inter.wait_followups(1)
        choices = await fake.autocomplete("oracle who", {"name": ""}, member=fake.player)
    assert (REINGEST_FOR_POLICY, True) == (refusal.content, refusal.ephemeral)
    assert [] == choices


# ---------------------------------------------------------------------------------------------
# 10. Ollama down


async def test_with_ollama_down_the_passages_are_shown(world, fake, tmp_path, indexes):
    host = closed_port_url()
    index = indexes(ollama_host=host)
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=index) as client:
        answers = spy(client, "ask")
        inter = await run(fake, client, "oracle ask", {"question": QUESTION})

    [answer] = answers
    assert (answer.mode, answer.reason) == ("passages", f"Ollama is not reachable at {host}")
    assert (5, []) == (inter.response.type, inter.rejected)
    assert [e.body["content"] for e in inter.edits][:3] == [
        PROGRESS["searching"], PROGRESS["ranking"], PROGRESS["writing"]
    ]
    text = "\n\n".join(m.content for m in inter.messages)
    assert text.startswith(  # the host is in the log, never in what players read: only that no model runs
        "**Passages, not an answer.** The Oracle could not write an answer (no running language model answers). "
        "The most relevant passages from the notes:"
    )
    assert host not in text
    assert len(answer.citations) == 5
    for c in answer.citations:
        assert f"[{c.label}] ({c.path}, lines {c.start_line}–{c.end_line})\n> " in text
    [embed] = [e for m in inter.messages for e in m.embeds]
    assert embed["footer"]["text"] == "Passages"
    assert embed["description"] == "\n".join(
        source_line(c.label, c.path, c.start_line, c.end_line) for c in answer.citations)
    assert all(len(m.content) <= MESSAGE_LIMIT for m in inter.messages)
    assert world.requests() == []
    assert len(fake.threads) == 1


# ---------------------------------------------------------------------------------------------
# 11. Game-master clearance


async def test_secrets_reach_the_model_only_for_a_gm_asking_privately_or_in_a_gm_channel(world, fake, tmp_path):
    gm_channel = fake.add_text_channel("gm-screen")
    question = "What does Pip hide?"
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", gm_channels=[gm_channel]) as client:
        await run(fake, client, "oracle ask", {"question": question, "private": True}, member=fake.gm)
        [request] = world.requests("answer")
        assert "SECRET-PIP" in request["messages"][-1]["content"]

        for member, options, channel in [
            (fake.gm, {}, None),  # a GM, in the public channel
            (fake.player, {"private": True}, None),  # a player, privately
            (fake.player, {}, gm_channel),  # a player in the GM channel
        ]:
            world.ollama.requests.clear()
            inter = await run(fake, client, "oracle ask", {"question": question, **options},
                              member=member, channel_id=channel)
            assert [kind(r) for r in world.requests()] == ["rerank", "answer"]
            assert no_secret(world.requests()), (member.username, options, channel)
            assert not any(s in m.content for m in inter.messages for s in SECRETS)

        world.ollama.requests.clear()
        inter = await run(fake, client, "oracle ask", {"question": question}, member=fake.gm, channel_id=gm_channel)
        assert "SECRET-PIP" in world.requests("answer")[0]["messages"][-1]["content"]

        # A follow-up in the thread opened in the GM channel: anyone may read a thread, so no secret.
        thread_id = int(fake.threads[-1]["id"])
        assert fake.threads[-1]["parent_id"] == str(gm_channel)
        world.ollama.requests.clear()
        await fake.message(thread_id, fake.gm, "and then what?")
        await fake.wait_until(lambda: bot_messages(fake, thread_id), 5, "the follow-up answer")
        assert [kind(r) for r in world.requests()][-1] == "answer"
        assert "SECRET-PIP" not in json.dumps(world.requests()[-1]["messages"][-1])


# ---------------------------------------------------------------------------------------------
# 12. Several people at once


async def test_concurrent_questions_queue_for_one_llm_slot(world, fake, tmp_path, indexes):
    members = [fake.add_member(f"player{i}", roles=[fake.player_role_id]) for i in range(5)]
    index = indexes(llm_concurrency=1)
    world.brain.delay = 0.15
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=index) as client:
        inters = [await fake.interaction("oracle ask", {"question": QUESTION}, member=m) for m in members]
        await fake.wait_until(lambda: all(i.id in client.completed for i in inters), 20, "five answers")

    assert world.brain.max_in_flight == 1
    assert [kind(r) for r in world.requests()].count("answer") == 5
    for inter in inters:
        assert (5, []) == (inter.response.type, inter.rejected)
        contents = [e.body["content"] for e in inter.edits]
        assert contents[-1].startswith("The Candle Monk sold the compass [")
        assert [c for c in contents if c != PROGRESS["queued"]][:3] == [
            PROGRESS["searching"], PROGRESS["ranking"], PROGRESS["writing"]]
    queued = [i for i in inters if PROGRESS["queued"] in [e.body["content"] for e in i.edits]]
    assert len(queued) >= 1
    assert len(fake.threads) == 5


# ---------------------------------------------------------------------------------------------
# 14. Rate limits and reconnects


async def test_a_rate_limited_edit_and_followup_still_deliver_the_answer(world, fake, oracle_bot):
    edit = fake.rate_limit("PATCH", "/webhooks/{application_id}/{token}/messages/@original", times=1, retry_after=0.2)
    inter = await run(fake, oracle_bot, "oracle ask", {"question": QUESTION})
    assert edit.remaining == 0 and len(edit.hits) == 1
    assert [e.body["content"] for e in inter.edits][0] == PROGRESS["searching"]
    assert inter.original.content.startswith("The Candle Monk sold the compass [")

    world.brain.answer = long_answer
    followup = fake.rate_limit("POST", "/webhooks/{application_id}/{token}", times=1, retry_after=0.2)
    inter = await run(fake, oracle_bot, "oracle ask", {"question": QUESTION}, member=fake.gm)
    assert followup.remaining == 0
    [request] = world.requests("answer")[-1:]
    assert "\n\n".join(m.content for m in inter.messages) == long_answer(request)
    posts = fake.requests_for("POST", "/webhooks/{application_id}/{token}")
    assert [r.status for r in posts] == [429, 200, 200]


async def test_a_gateway_reconnect_while_writing_does_not_lose_the_answer(world, fake, oracle_bot, tmp_path):
    world.brain.answer_delay = 1.0
    session = fake.session
    inter = await fake.interaction("oracle ask", {"question": QUESTION})
    await asyncio.wait_for(world.brain.writing.wait(), 5)
    await fake.reconnect()  # RECONNECT, then the client RESUMEs
    assert session.resumes == 1
    await fake.wait_until(lambda: inter.id in oracle_bot.completed, 10, "the answer")
    [request] = world.requests("answer")
    assert inter.original.content == f"The Candle Monk sold the compass [{first_label(request)}]."
    [thread] = fake.threads
    thread_id = int(thread["id"])
    assert await oracle_bot.history.campaign_of(thread_id) == "default"
    first, second = fake.gateway_connections
    assert (first.closed, second.kind, second.session) == (True, "resume", session)


# ---------------------------------------------------------------------------------------------
# 15. Unexpected errors


async def test_an_unexpected_error_is_one_ephemeral_sentence_and_a_log_line(world, fake, tmp_path, indexes, caplog):
    caplog.set_level(logging.INFO)
    broken = indexes()
    store = await broken.store()
    await store.close()  # every question now fails, on the first read of the index
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=broken) as client:
        inter = await fake.interaction("oracle ask", {"question": QUESTION}, member=fake.player)
        await inter.settle(idle=0.5)
        assert inter.id not in client.completed

    # It fails before the answer is deferred, so the sentence is the interaction's own reply.
    assert (4, [], []) == (inter.response.type, inter.rejected, inter.followups)
    assert (inter.response.data["content"], inter.response.data["flags"]) == (ERROR_SENTENCE, EPHEMERAL)
    for m in fake.messages(include_deleted=True):
        assert not re.search(r"Traceback|Error|Exception|File \"|no active connection", m.content), m.content
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.name == "bot.errors"]
    assert len(errors) == 1
    assert errors[0].getMessage().startswith("/oracle ask failed (")
    assert errors[0].exc_info is not None and errors[0].exc_info[0] is ValueError
    assert fake.threads == [] and world.requests() == []


async def test_a_failed_ask_leaves_no_public_message_saying_it_is_still_working(world, fake, tmp_path, indexes):
    broken = indexes()
    await (await broken.store()).close()
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=broken):
        inter = await fake.interaction("oracle ask", {"question": QUESTION}, member=fake.player)
        await inter.settle(idle=0.5)
    public = [m for m in bot_messages(fake, fake.channel_id) if not m.ephemeral]
    assert [m.content for m in public if m.content in PROGRESS.values()] == []


async def test_a_failure_after_the_answer_was_given_never_takes_the_answer_down(world, fake, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        async def broken(*args, **kwargs):
            raise RuntimeError("the thread map went away")

        client.history.add_thread = broken  # fails after the answer is shown, while its thread is recorded
        inter = await fake.interaction("oracle ask", {"question": QUESTION}, member=fake.player)
        await inter.settle(idle=0.5)
    assert inter.original is not None and not inter.original.deleted
    assert inter.original.content.startswith("The Candle Monk sold the compass")
    [told] = inter.followups
    assert (told.content, told.ephemeral) == (FAILED_AFTER, True)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR][0].startswith("/oracle ask failed")


async def test_a_late_private_answer_to_closed_direct_messages_is_said_in_the_channel(world, fake, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    world.brain.answer_delay = 1.0
    fake.close_dms(fake.player)
    async with start_bot(world, fake, tmp_path / "bot.sqlite3"):
        inter = await fake.interaction("oracle ask", {"question": QUESTION, "private": True}, member=fake.player)
        await inter.wait_acknowledged(10)
        await fake.wait_until(lambda: world.brain.writing.is_set(), 30, "the answer to be written")
        fake.advance(16 * 60)  # the answer comes after Discord dropped the interaction's token
        [notice] = await fake.wait_until(lambda: bot_messages(fake, fake.channel_id)[1:], 30, "the notice")
    assert notice.content == UNDELIVERED.format(asker=fake.player.mention)
    assert [u["id"] for u in notice.data["mentions"]] == [str(fake.player.id)]  # the asker alone is pinged
    assert fake.dm_messages(fake.player) == [] and fake.threads == []
    assert not any("Candle Monk" in m.content for m in fake.messages(include_deleted=True))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_a_failed_follow_up_is_one_short_sentence_in_the_thread(world, fake, tmp_path, indexes):
    index = indexes()
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=index) as client:
        await run(fake, client, "oracle ask", {"question": QUESTION})
        thread_id = int(fake.threads[0]["id"])
        async def broken(*args, **kwargs):
            raise RuntimeError("the index went away")

        client.oracle.ask = broken  # from now on every question fails inside the Oracle
        await fake.message(thread_id, fake.player, "and then what?")
        [reply] = await fake.wait_until(lambda: bot_messages(fake, thread_id), 2, "a reply in the thread")
    assert reply.content == ERROR_SENTENCE


# ---------------------------------------------------------------------------------------------
# 13. The model warm at startup, and the answer streamed


async def test_the_model_is_loaded_at_startup_with_the_window_every_request_uses(world, fake, oracle_bot):
    await oracle_bot.warming
    [load] = [r for r in world.ollama.chat_requests() if r.get("messages") == []]
    assert ({"num_ctx": 16384}, world.settings.keep_alive) == (load["options"], load["keep_alive"])
    await run(fake, oracle_bot, "oracle ask", {"question": QUESTION})

    served = world.ollama.served()
    assert {s.num_ctx for s in served} == {16384}
    assert [s.loaded for s in served[1:]] == [False, False]  # the question reloaded nothing
    assert all(s.fits for s in served)


def cut_answer(request: dict) -> CutStream:
    """Six cited sentences, then half of a seventh; the connection drops after 60 tokens."""
    label = first_label(request)
    sentences = [f"The Candle Monk, sentence {s}, sold the brass compass in the Lantern Market [{label}]." for s in range(6)]
    return CutStream(" ".join(sentences) + f" Then the monk warned them about [{label}", after=60)


async def test_a_stream_cut_halfway_ends_in_what_was_written_marked_and_cited(world, fake, oracle_bot):
    world.brain.answer = cut_answer
    inter = await run(fake, oracle_bot, "oracle ask", {"question": QUESTION})

    [request] = world.requests("answer")
    label, path, start, end = headers(request)[0]
    content = inter.original.content
    written, marker = content.split("\n\n")
    assert written.startswith("The Candle Monk, sentence 0, sold the brass compass")
    assert written.endswith(f"[{label}].")  # whole sentences only: no half-written label
    assert len(written.split()) > 20 and "Then the monk" not in written
    # Players read that it stopped, never the host or the error (those are in the log).
    assert marker == "*(The answer stops here: the language model stopped before the end.)*"
    [embed] = inter.original.embeds
    assert (embed["footer"]["text"], embed["description"]) == ("Sources", source_line(label, path, start, end))


async def test_a_stream_cut_before_a_sentence_ends_shows_the_passages(world, fake, oracle_bot):
    world.brain.answer = lambda request: CutStream("The Candle Monk sold the brass compass to", after=5)
    answers = spy(oracle_bot, "ask")
    inter = await run(fake, oracle_bot, "oracle ask", {"question": QUESTION})

    [answer] = answers
    assert answer.mode == "passages"
    assert answer.reason == (f"the answer stopped after 5 words: Ollama at {world.ollama.url} "
                             "closed the connection mid-reply")
    assert inter.original.content.startswith("**Passages, not an answer.** The Oracle could not write an answer")
    assert inter.messages[-1].embeds[0]["footer"]["text"] == "Passages"


def streamed_answer(request: dict) -> Reply:
    label = first_label(request)
    return Reply(" ".join(f"Sentence {s} of the answer tells of the compass [{label}]." for s in range(8)),
                 chunk_delay=0.005)


async def test_the_reply_is_edited_while_the_model_writes_then_cited(world, fake, tmp_path):
    world.brain.answer = streamed_answer
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", stream_edit_seconds=0) as client:
        inter = await run(fake, client, "oracle ask", {"question": QUESTION})

    [request] = world.requests("answer")
    final = streamed_answer(request).content
    contents = [e.body["content"] for e in inter.edits]
    assert contents[:3] == [PROGRESS["searching"], PROGRESS["ranking"], PROGRESS["writing"]]
    previews, last = contents[3:-1], inter.edits[-1]
    assert len(previews) >= 2
    for preview in previews:  # the text so far, marked as still being written, without sources
        assert preview.endswith(WRITING_MARK) and final.startswith(preview[: -len(WRITING_MARK)])
    assert [len(p) for p in previews] == sorted(len(p) for p in previews)
    assert all(not e.body.get("embeds") for e in inter.edits[3:-1])
    assert last.body["content"] == final and last.body["embeds"][0]["footer"]["text"] == "Sources"


async def test_a_follow_up_is_streamed_into_one_message_of_the_thread(world, fake, tmp_path):
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", stream_edit_seconds=0) as client:
        await run(fake, client, "oracle ask", {"question": QUESTION})
        thread_id = int(fake.threads[0]["id"])
        world.brain.answer = streamed_answer
        world.ollama.requests.clear()
        await fake.message(thread_id, fake.player, "and then what?")
        # Edits as fast as the model writes spend the thread's 5 a 5 s: discord.py then waits a window.
        await until(lambda: len(rows(tmp_path / "bot.sqlite3", "SELECT 1 FROM turns")) == 4, what="the follow-up",
                    timeout=20)

    [request] = world.requests("answer")
    [reply] = bot_messages(fake, thread_id)
    assert len(reply.edits) >= 2  # written while the model wrote, into the same message
    assert reply.body["content"].endswith(WRITING_MARK)
    assert reply.content == streamed_answer(request).content
    assert reply.embeds[0]["footer"]["text"] == "Sources"


def long_streamed_answer(request: dict) -> Reply:
    """Past one message (3,000-odd characters), written in many small pieces."""
    label = first_label(request)
    return Reply(" ".join(f"Sentence {s} of the long answer tells of the compass [{label}]." for s in range(60)),
                 chunk_delay=0.004)


async def test_answers_streaming_in_one_thread_share_its_pace_and_never_resend_a_preview(world, fake, tmp_path):
    every = 0.3
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", stream_edit_seconds=every) as client:
        await run(fake, client, "oracle ask", {"question": QUESTION})
        thread_id = int(fake.threads[0]["id"])
        world.brain.answer = long_streamed_answer
        await fake.message(thread_id, fake.player, "and then what?")
        await fake.message(thread_id, fake.gm, "and what did the monk say?")
        await until(lambda: len(rows(tmp_path / "bot.sqlite3", "SELECT 1 FROM turns")) == 6, what="both follow-ups",
                    timeout=60)

    edits = [r for r in fake.requests_for("PATCH", "/channels/{channel_id}/messages/{message_id}")
             if r.path.startswith(f"/channels/{thread_id}/")]
    previews = [r for r in edits if (r.json.get("content") or "").endswith(WRITING_MARK)]
    assert len(previews) >= 2
    # One edit per `every` in the thread, whichever answer it shows (arrival times: a little slack).
    assert all(b.at - a.at >= every - 0.1 for a, b in zip(previews, previews[1:], strict=False))
    by_message: dict[str, list[str]] = {}
    for r in previews:
        by_message.setdefault(r.path, []).append(r.json["content"])
    for contents in by_message.values():  # the preview past 2,000 characters is sent once, not again and again
        assert all(a != b for a, b in zip(contents, contents[1:], strict=False))
    for reply in bot_messages(fake, thread_id):
        assert not reply.content.endswith(WRITING_MARK)  # each ends as its checked answer


# ---------------------------------------------------------------------------------------------
# An index never ingested


NOT_INDEXED = (
    "The notes have not been indexed yet, so the Oracle has nothing to answer from: a game master "
    "(role gm, or Manage Server) can run `/oracle reingest`."
)


async def test_on_an_empty_index_ask_tells_the_asker_privately_and_status_says_so(world, fake, tmp_path, indexes):
    empty = indexes(data_dir=tmp_path / "never-ingested")
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=empty) as client:
        answers = spy(client, "ask")
        inter = await fake.interaction("oracle ask", {"question": QUESTION}, member=fake.player)
        await inter.settle(idle=0.5)
        status = await run(fake, client, "oracle status", member=fake.player)
    # Refused before anything public: no "thinking", no answer, no thread.
    assert (4, NOT_INDEXED, EPHEMERAL) == (inter.response.type, inter.response.data["content"], inter.response.data["flags"])
    assert [] == answers and [] == fake.threads
    assert [] == [m for m in bot_messages(fake, fake.channel_id) if not m.ephemeral]
    assert status.original.content.split("\n")[0] == f"⚠️ {NOT_INDEXED}"
    assert "**Last ingest:** never" in status.original.content

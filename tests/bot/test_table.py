"""The bot at a real table, through the fake Discord and the real discord.py client: a thread where
members chat, flood control that lets a conversation flow, a thread Discord will not open, the
question and the asker on every answer, sources one click away (also after a restart, never a
secret), votes, what the notes could not answer, a recap, *Ask the Oracle* on a message, and a
reingest that outlives the interaction's 15-minute token.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import shutil
from pathlib import Path

import discord
import pytest

import bot.reingest
from bot.answering import DROPPED, NO_THREAD, WAITING
from oracle.index.index import Index
from testing.discord import EPHEMERAL
from tests.bot.harness import (
    QUESTION,
    SECRETS,
    bot_messages,
    buttons,
    first_label,
    headers,
    rows,
    run,
    start_bot,
    until,
)
from tests.conftest import closed_port_url
from tests.conftest import request_kind as kind

pytestmark = pytest.mark.asyncio(loop_scope="module")

CREATE_PUBLIC_THREADS = discord.Permissions(create_public_threads=True).value


async def ask_and_open_thread(fake, client, member=None) -> tuple[object, int]:
    inter = await run(fake, client, "oracle ask", {"question": QUESTION}, member=member or fake.player)
    return inter, int(fake.threads[-1]["id"])


def stop_the_clock(client) -> None:
    """Flood control's clock stands still: no token comes back while the test runs, so what waits
    and what is dropped does not depend on the machine's speed (the waits themselves are real)."""
    client.get_cog("OracleCog").answering.flood.clock = lambda: 0.0


def answers_in(fake, channel_id: int) -> list:
    return [m for m in bot_messages(fake, channel_id) if not m.ephemeral]


# ---------------------------------------------------------------------------------------------
# Listening: what in a thread is a question


async def test_members_chatting_in_a_thread_cost_nothing_and_questions_are_answered(world, fake, tmp_path):
    avrae = fake.add_member("Avrae", bot=True)
    friend = fake.add_member("friend", roles=[fake.player_role_id])
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        _, thread_id = await ask_and_open_thread(fake, client)
        world.ollama.requests.clear()
        said = await fake.message(thread_id, friend, "I think it was the monk all along")
        chatter = ["thanks!", "lol", "👍", "ok cool thx", "gracias!", "jajaja", "!r 1d20", ".roll d20",
                   "$balance", ";;play bard song", "?help"]
        for text in chatter:
            await fake.message(thread_id, fake.player, text)
        await fake.message(thread_id, fake.player, "same, he is shifty", reply_to=said)  # talking to a member
        await fake.message(thread_id, avrae, "Mirela's Player rolled 1d20 = 17")  # another bot
        await asyncio.sleep(0.5)
        assert world.requests() == [] and answers_in(fake, thread_id) == []

        # A question, a reply to the Oracle and a mention are answered, whatever they say.
        await fake.message(thread_id, fake.player, "and then what?")
        await until(lambda: len(answers_in(fake, thread_id)) == 1, what="the follow-up")
        answer = answers_in(fake, thread_id)[0]
        await fake.message(thread_id, friend, "thanks", reply_to=answer)
        await until(lambda: len(answers_in(fake, thread_id)) == 2, what="the reply to the Oracle")
        await fake.message(thread_id, friend, f"{fake.bot.mention} lol")
        await until(lambda: len(rows(tmp_path / "bot.sqlite3", "SELECT 1 FROM turns")) == 8, what="the mention's turns")
    # "and then what?" goes on in the notes' order, with no rerank; the two questions to the Oracle are reranked.
    assert [kind(r) for r in world.requests()] == ["answer", "rerank", "answer", "rerank", "answer"]
    questions = [q for (q,) in rows(tmp_path / "bot.sqlite3", "SELECT content FROM turns WHERE role = 'user'")]
    assert questions == [QUESTION, "and then what?", "thanks", "lol"]


async def test_other_bots_prefixes_are_configurable(world, fake, tmp_path):
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", ignore_prefixes="%") as client:
        _, thread_id = await ask_and_open_thread(fake, client)
        await fake.message(thread_id, fake.player, "%roll 1d20")
        await fake.message(thread_id, fake.player, "!what about the bell")  # "!" is no prefix here
        await until(lambda: len(answers_in(fake, thread_id)) == 1, what="the follow-up")
        await asyncio.sleep(0.3)
    assert len(answers_in(fake, thread_id)) == 1
    assert rows(tmp_path / "bot.sqlite3", "SELECT content FROM turns WHERE role = 'user'")[-1] == (
        "!what about the bell",)


# ---------------------------------------------------------------------------------------------
# Flood control


async def test_a_quick_follow_up_flows_and_a_flood_waits_quietly(world, fake, tmp_path):
    """Burst 2, a token back every 2 s, one question may wait: the ask and a quick follow-up are
    answered at once; the third waits under ⏳ and is answered; the fourth is dropped with ✋. No
    message tells anyone to slow down."""
    other = fake.add_member("player2", roles=[fake.player_role_id])
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", flood_burst=2, flood_seconds=2,
                         flood_waiting=1) as client:
        stop_the_clock(client)
        _, thread_id = await ask_and_open_thread(fake, client)
        await fake.message(thread_id, fake.player, "and then what?")
        await until(lambda: len(answers_in(fake, thread_id)) == 1, what="the quick follow-up")
        third = await fake.message(thread_id, fake.player, "and after that?")
        await until(lambda: WAITING in fake.get_message(third.id).reactions, what="the ⏳")
        fourth = await fake.message(thread_id, fake.player, "and the bell?")
        await until(lambda: DROPPED in fake.get_message(fourth.id).reactions, what="the ✋")
        # Another member is not held back by this one.
        await run(fake, client, "oracle ask", {"question": QUESTION}, member=other)
        assert len(answers_in(fake, thread_id)) == 1  # the third still waits
        await until(lambda: len(answers_in(fake, thread_id)) == 2, timeout=10, what="the waiting question")
        await until(lambda: WAITING not in fake.get_message(third.id).reactions, what="the ⏳ taken back")

    replies = answers_in(fake, thread_id)
    assert [m.data["message_reference"]["message_id"] for m in replies][-1] == str(third.id)
    said = [m.content for m in bot_messages(fake)]
    assert not any("slow down" in text.lower() for text in said)
    assert fake.get_message(fourth.id).reactions == [DROPPED]
    user_turns = [q for (q,) in rows(tmp_path / "bot.sqlite3", "SELECT content FROM turns WHERE role = 'user'")]
    assert "and the bell?" not in user_turns and "and after that?" in user_turns


async def test_an_ask_over_the_limit_shows_the_hourglass_then_the_answer(world, fake, tmp_path):
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", flood_burst=1, flood_seconds=1,
                         flood_waiting=1) as client:
        stop_the_clock(client)
        await run(fake, client, "oracle ask", {"question": QUESTION, "private": True})
        second = await run(fake, client, "oracle ask", {"question": QUESTION, "private": True}, timeout=15)
    contents = [e.body["content"] for e in second.edits]
    assert contents[0] == WAITING
    assert second.original.content.startswith("The Candle Monk sold the compass [")
    assert [m.ephemeral for m in second.messages] == [True]


# ---------------------------------------------------------------------------------------------
# Threads Discord will not open, and /oracle ask inside an Oracle thread


async def test_without_the_thread_permission_the_answer_stays_and_the_asker_is_told_privately(world, fake, tmp_path):
    fake.set_overwrite(fake.channel_id, fake.bot_role_id, deny=CREATE_PUBLIC_THREADS)
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        inter = await run(fake, client, "oracle ask", {"question": QUESTION})
        await inter.wait_followups(1)
    assert fake.threads == []
    assert not inter.original.deleted and inter.original.content.startswith("The Candle Monk sold the compass [")
    [note] = inter.followups
    assert note.ephemeral
    assert note.content == NO_THREAD.format(
        why="the Oracle may not create public threads in this channel (a server admin can grant it "
            "*Create Public Threads*)")
    assert rows(tmp_path / "bot.sqlite3", "SELECT * FROM threads") == []


@pytest.mark.parametrize("where", ["forum post", "voice chat", "member's thread"])
async def test_where_no_thread_can_be_opened_the_answer_stays(world, fake, tmp_path, where):
    if where == "forum post":
        forum = fake.add_forum_channel("lore-questions")
        channel_id = fake.add_forum_post(forum, fake.player, "The compass", "What do we know of it?")
        why = "this is a forum post, and a post cannot hold threads of its own"
    elif where == "voice chat":
        channel_id = fake.add_voice_channel("table-voice")
        why = "a voice channel's chat cannot hold threads"
    else:
        channel_id = fake.add_thread(fake.channel_id, "side chat", owner=fake.player)
        why = "this is already a thread, and Discord does not open threads inside threads"
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        inter = await run(fake, client, "oracle ask", {"question": QUESTION}, channel_id=channel_id)
        await inter.wait_followups(1)
    assert inter.original.content.startswith("The Candle Monk sold the compass [")
    assert not inter.original.deleted and inter.original.channel_id == channel_id
    [note] = inter.followups
    assert (note.ephemeral, note.content) == (True, NO_THREAD.format(why=why))
    assert fake.requests_for("POST", "/channels/{channel_id}/messages/{message_id}/threads") == []


async def test_ask_inside_an_oracle_thread_continues_its_history(world, fake, tmp_path):
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        first, thread_id = await ask_and_open_thread(fake, client)
        world.ollama.requests.clear()
        inter = await run(fake, client, "oracle ask", {"question": "and then what?"}, channel_id=thread_id)
    [request] = world.requests()  # "and then what?": no rerank
    assert [(m["role"], m["content"]) for m in request["messages"][1:-1]] == [
        ("user", QUESTION), ("assistant", first.original.content)]
    assert inter.original.channel_id == thread_id and inter.followups == []
    assert len(fake.threads) == 1
    assert rows(tmp_path / "bot.sqlite3", "SELECT role, content FROM turns ORDER BY id")[-2:] == [
        ("user", "and then what?"), ("assistant", inter.original.content)]


async def test_a_private_ask_inside_a_thread_stays_out_of_its_public_history(world, fake, tmp_path):
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        _, thread_id = await ask_and_open_thread(fake, client)
        world.ollama.requests.clear()
        inter = await run(fake, client, "oracle ask", {"question": "who is Pip really?", "private": True},
                          member=fake.gm, channel_id=thread_id)
    assert inter.original.ephemeral
    assert any("SECRET-PIP" in json.dumps(r) for r in world.requests("answer"))  # the game master's answer
    assert [q for (q,) in rows(tmp_path / "bot.sqlite3", "SELECT content FROM turns WHERE role = 'user'")] == [QUESTION]


# ---------------------------------------------------------------------------------------------
# Sources one click away, votes


def excerpts(inter) -> list[dict]:
    return [e for m in inter.messages for e in m.embeds]


async def test_show_sources_works_after_a_restart_and_shows_the_clicker_only_what_they_may_read(
    world, fake, tmp_path
):
    gm_channel = fake.add_text_channel("gm-table")
    history = tmp_path / "bot.sqlite3"
    world.brain.answer = lambda request: f"The compass belongs to the Hollow King [{first_label(request)}]."
    async with start_bot(world, fake, history, gm_channels=[gm_channel]) as client:
        inter = await run(fake, client, "oracle ask", {"question": "SECRET-COMPASS who owns the compass?"},
                          member=fake.gm, channel_id=gm_channel)
        [request] = world.requests("answer")
        label, path, start, end = headers(request)[0]
    answer = inter.original
    [sources, up, down] = buttons(answer)
    assert sources.startswith("oracle:sources:")

    # A new process: the buttons of the old one's answer still work.
    async with start_bot(world, fake, history, gm_channels=[gm_channel]):
        as_gm = await fake.click(answer, sources, member=fake.gm)
        await as_gm.wait_followups(1)
        as_player = await fake.click(answer, sources, member=fake.player)
        await as_player.wait_followups(1)
    for click in (as_gm, as_player):
        assert click.response.type == 5 and click.response.data == {"flags": EPHEMERAL}
        assert all(m.ephemeral for m in click.messages)
        [embed] = excerpts(click)
        assert (embed["title"], embed["footer"]["text"]) == (label, f"{path} · lines {start}–{end}")
    gm_text = excerpts(as_gm)[0]["description"]
    player_text = excerpts(as_player)[0]["description"]
    assert "SECRET-COMPASS" in gm_text
    assert not any(s in player_text for s in SECRETS)
    assert player_text == "*Not in the notes you can read now (they may have changed).*"


async def test_a_player_reads_the_cited_lines_of_a_public_answer(world, fake, tmp_path):
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        inter = await run(fake, client, "oracle ask", {"question": QUESTION})
        [request] = world.requests("answer")
        label, path, start, end = headers(request)[0]
        click = await fake.click(inter.original, buttons(inter.original)[0], member=fake.player)
        await click.wait_followups(1)
    [embed] = excerpts(click)
    # The cited lines as the index reads them: links shown by their text, the secret line left out.
    source = [re.sub(r"\[\[[^|\]]*\|([^\]]*)\]\]", r"\1", line)
              for line in (world.notes / path).read_text().splitlines()[start - 1:end] if "%%" not in line]
    assert embed["title"] == label and "Brother Aldous" in embed["description"]
    assert embed["description"] == "\n".join(source).strip()
    assert not any(s in embed["description"] for s in SECRETS)


async def test_votes_one_per_member_changeable_and_a_gm_thumbs_up_confirms_the_sources(world, fake, tmp_path):
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        inter = await run(fake, client, "oracle ask", {"question": QUESTION})
        _, up, down = buttons(inter.original)
        for member, custom_id in ((fake.player, up), (fake.player, down), (fake.gm, up)):
            click = await fake.click(inter.original, custom_id, member=member)
            await click.wait_acknowledged()
        said = [m.content for i in fake.interactions[-3:] for m in i.messages]
    journal = tmp_path / "journal.sqlite3"
    [(answer_id, question, generation, cited)] = rows(journal, "SELECT id, question, generation, citations FROM answers")
    assert question == QUESTION and generation
    assert sorted(rows(journal, "SELECT user_id, vote, gm FROM votes")) == sorted(
        [(fake.player.id, -1, 0), (fake.gm.id, 1, 1)])
    labels = list(dict.fromkeys(c["label"] for c in json.loads(cited)))
    assert rows(journal, "SELECT answer_id, labels, source FROM confirmed") == [(answer_id, json.dumps(labels), "vote")]
    assert said[0].startswith("👍 Thanks: noted as helpful (👍 1 · 👎 0)")
    assert said[1].startswith("👎 Thanks: noted as not helpful (👍 0 · 👎 1)")
    assert "confirmed its sources" in said[2]


# ---------------------------------------------------------------------------------------------
# What the notes could not answer


async def test_unanswered_groups_what_the_notes_did_not_answer_for_game_masters_only(world, fake, tmp_path):
    def answer(request: dict) -> str:
        question = request["messages"][-1]["content"].rsplit("Question: ", 1)[1]
        if "dragon" in question or "zzqx" in question:
            return "The notes do not say anything about a dragon."
        return f"The Candle Monk sold the compass [{first_label(request)}]."

    world.brain.answer = answer
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        for q in ("what colour is the dragon?", "What colour is the dragon", QUESTION, "zzqx vorpal"):
            await run(fake, client, "oracle ask", {"question": q, "private": True})
        voted = await run(fake, client, "oracle ask", {"question": "who rules Greyhaven?", "private": True})
        click = await fake.click(voted.original, buttons(voted.original)[-1], member=fake.player)
        await click.wait_acknowledged()
        refused = await fake.interaction("oracle unanswered", member=fake.player)
        await refused.settle()
        listed = await run(fake, client, "oracle unanswered", member=fake.gm)
    assert refused.original.content == "Only a game master can read the unanswered questions."
    text = listed.original.content
    assert listed.original.ephemeral
    lines = text.splitlines()
    assert lines[0].startswith("**What the notes could not answer**")
    assert re.fullmatch(r"• “who rules Greyhaven\?” — 👎 · last [\d: -]+ UTC", lines[1])
    assert [line.split(" · last")[0] for line in lines[2:4]] == [
        "• “zzqx vorpal” — the notes do not say", "• “What colour is the dragon” — the notes do not say · asked 2×"]
    assert not any(QUESTION in line for line in lines)


# ---------------------------------------------------------------------------------------------
# Recap


async def test_recap_retells_the_last_session_from_public_text(world, fake, tmp_path):
    world.brain.answer = lambda request: f"Old Wick lit every candle [{first_label(request)}]."
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        choices = await fake.autocomplete("oracle recap", {"session": ""})
        inter = await run(fake, client, "oracle recap", {})
        third = await run(fake, client, "oracle recap", {"session": "3", "private": True})
    # Newest first by session number (metadata): the hub's sections are labelled as its own.
    assert [c["value"] for c in choices] == [
        "Session 4", "campaign-log › Session 3", "campaign-log › Session 2", "campaign-log › Session 1"]
    first, again = world.requests("answer")
    assert [h[0] for h in headers(first)] == ["Session 4"]
    assert first["messages"][-1]["content"].endswith(
        "Question: Previously on… Retell Session 4 for the players: what happened, in order, in a few short "
        "paragraphs, citing the session after every claim.")
    assert [h[0] for h in headers(again)] == ["campaign-log › Session 3"]
    assert not any(s in json.dumps(world.requests()) for s in SECRETS)
    assert inter.original.content == "Old Wick lit every candle [Session 4]."
    [embed] = inter.original.embeds
    assert embed["title"] == "Previously on…" and embed["author"]["name"] == "Mirela's Player asked"
    assert third.original.ephemeral and third.original.content == "Old Wick lit every candle [campaign-log › Session 3]."


async def test_recap_without_ollama_shows_the_sessions_opening_lines(world, fake, tmp_path, indexes):
    index = indexes(ollama_host=closed_port_url())
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=index) as client:
        inter = await run(fake, client, "oracle recap", {"session": "4"})
    text = inter.original.content
    assert text.startswith("**Passages, not an answer.** The Oracle could not write the recap (no running "
                           "language model answers). Session 4 in the notes:")
    assert "> Old Wick lit every candle in the chapel while Mirela read the Saltmarsh ledger (entry 4:12)." in text
    assert "127.0.0.1" not in text


# ---------------------------------------------------------------------------------------------
# Ask the Oracle, on a message


async def test_ask_the_oracle_on_a_message_answers_about_its_text(world, fake, tmp_path):
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        announcement = await fake.message(fake.channel_id, fake.gm, "Next session: back to the Lantern Market!")
        inter = await fake.context_menu("Ask the Oracle", announcement, member=fake.player)
        await fake.wait_until(lambda: inter.id in client.completed, 10, "the answer")
    [request] = world.requests("answer")
    assert request["messages"][-1]["content"].endswith(
        "Question: What do the notes say about this? “Next session: back to the Lantern Market!”")
    [embed] = inter.original.embeds
    assert embed["title"] == "About Game Master's message: “Next session: back to the Lantern Market!”"
    assert embed["url"].endswith(f"/{fake.channel_id}/{announcement.id}")
    assert inter.original.content.startswith("The Candle Monk sold the compass [")
    assert len(fake.threads) == 1


async def test_ask_the_oracle_on_a_message_without_text_is_told_privately(world, fake, tmp_path):
    async with start_bot(world, fake, tmp_path / "bot.sqlite3"):
        empty = await fake.message(fake.channel_id, fake.gm, "", embeds=[{"image": {"url": "https://x/y.png"}}])
        inter = await fake.context_menu("Ask the Oracle", empty, member=fake.player)
        await inter.settle()
    assert (inter.original.ephemeral, inter.original.content) == (True, "That message has no text to ask the notes about.")


# ---------------------------------------------------------------------------------------------
# Reingest beyond the 15-minute token, and what players are told


def copied_index(world, tmp_path: Path) -> Index:
    notes = Path(shutil.copytree(world.notes, tmp_path / "notes"))
    return Index(world.make_settings(notes_dir=notes, data_dir=tmp_path / "data"), embedder=world.embedder)


async def test_a_reingest_outlives_the_interaction_token_and_players_hear_what_is_new(
    world, fake, tmp_path, monkeypatch
):
    index = copied_index(world, tmp_path)
    notes = index.settings.notes_dir
    announce = fake.add_text_channel("announcements")
    monkeypatch.setattr(bot.reingest, "PROGRESS_EVERY", 0.1)
    try:
        async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=index, announce_channel=announce) as client:
            first = await run(fake, client, "oracle reingest", member=fake.gm, timeout=30)
            (notes / "sessions" / "Session 5.md").write_text("## Session 5 — The Fall\nThe bridge fell.\n")
            (notes / "gm" / "Session 6.md").write_text("## Session 6 — Secret Plans\nSECRET-PLANS again.\n")
            world.brain.annotate_delay = 0.3
            inter = await fake.interaction("oracle reingest", member=fake.gm)
            await fake.wait_until(lambda: len(fake.dm_messages(fake.gm)) >= 2 and any(
                "Reingesting" in m.content for m in fake.dm_messages(fake.gm)[1:]), 20, "progress")
            fake.advance(16 * 60)  # Discord's 15-minute interaction token runs out mid-ingest
            await fake.wait_until(lambda: inter.id in client.completed, 30, "the reingest")
    finally:
        await index.close()
    progress = fake.dm_messages(fake.gm)[-1]
    summary = progress.content
    assert summary.startswith("✅ Reingest done in ")
    assert "**Added**\n• `gm/Session 6.md`: Session 6 — Secret Plans\n• `sessions/Session 5.md`: Session 5 — The Fall" \
        in summary
    assert len(progress.edits) >= 2  # progress, edited in place, then the summary
    assert first.original.content.endswith("progress and summary in your direct messages.")
    # The first index was no news; then players hear of the session they can read, not the secret one.
    assert [m.content for m in fake.messages(announce)] == ["📜 New in the notes: Session 5 — The Fall"]


async def test_with_dms_closed_the_reingest_reports_privately_and_the_summary_reaches_the_log(
    world, fake, tmp_path, monkeypatch, caplog
):
    caplog.set_level(logging.INFO, logger="bot.reingest")
    index = copied_index(world, tmp_path)
    monkeypatch.setattr(bot.reingest, "PROGRESS_EVERY", 0.1)
    fake.close_dms(fake.gm)
    try:
        async with start_bot(world, fake, tmp_path / "bot.sqlite3", index=index) as client:
            world.brain.annotate_delay = 0.2
            inter = await fake.interaction("oracle reingest", member=fake.gm)
            await inter.wait_edits(2, timeout=20)
            fake.advance(16 * 60)
            await fake.wait_until(lambda: inter.id in client.completed, 30, "the reingest")
    finally:
        await index.close()
    assert inter.original.ephemeral
    assert inter.edits[0].body["content"] == "⚙️ Reingest started…"
    edits = fake.requests_for("PATCH", "/webhooks/{application_id}/{token}/messages/@original")
    assert any(r.status == 401 and r.response["code"] == 50027 for r in edits)  # the token ran out
    assert any(r.getMessage().startswith("reingest: ✅ Reingest done in ") for r in caplog.records)

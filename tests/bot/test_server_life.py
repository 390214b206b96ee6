"""The bot living on a real server: its commands in one scope and in servers only, a bound on the
questions it takes at once, warnings about game-master roles and channels that are not there, one
sentence for a button that fails, and table talk in a thread left alone."""
from __future__ import annotations

import asyncio
import logging

import pytest

from bot.errors import FAILED
from bot.questions import BUSY
from testing.discord import EPHEMERAL
from tests.bot.harness import QUESTION, bot_messages, buttons, run, start_bot, until

pytestmark = pytest.mark.asyncio(loop_scope="module")

GUILD_ONLY = [0]  # Discord's interaction context types: 0 is a server, 1 a bot DM, 2 a private channel


def names(commands: list[dict]) -> list[str]:
    return sorted(c["name"] for c in commands)


async def test_commands_live_in_one_scope_whichever_was_set_before(world, fake, tmp_path):
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", guild_id=None):
        assert names(fake.global_commands) == ["Ask the Oracle", "oracle"]
        assert fake.guild_commands.get(fake.guild_id, []) == []
    async with start_bot(world, fake, tmp_path / "bot.sqlite3"):  # DISCORD_GUILD_ID set since
        assert names(fake.guild_commands[fake.guild_id]) == ["Ask the Oracle", "oracle"]
        assert fake.global_commands == []
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", guild_id=None):  # and unset again
        assert names(fake.global_commands) == ["Ask the Oracle", "oracle"]
        assert fake.guild_commands[fake.guild_id] == []


async def test_commands_are_registered_again_only_when_they_changed(world, fake, tmp_path):
    """Discord rate-limits registrations: a restart with the same definitions registers nothing."""
    def registrations() -> int:
        return sum(len(fake.requests_for("PUT", route)) for route in (
            "/applications/{application_id}/guilds/{guild_id}/commands", "/applications/{application_id}/commands"))

    async with start_bot(world, fake, tmp_path / "bot.sqlite3"):
        first = registrations()
    assert first > 0
    async with start_bot(world, fake, tmp_path / "bot.sqlite3"):  # a restart
        assert registrations() == first
        assert names(fake.guild_commands[fake.guild_id]) == ["Ask the Oracle", "oracle"]
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", guild_id=None):  # another scope
        assert registrations() > first
        assert names(fake.global_commands) == ["Ask the Oracle", "oracle"]


async def test_commands_are_offered_in_servers_only(world, fake, tmp_path):
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", guild_id=None):
        for command in fake.global_commands:
            assert command["contexts"] == GUILD_ONLY, command


async def test_a_question_over_the_bound_is_told_at_once(world, fake, tmp_path):
    world.brain.answer_delay = 3.0
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", max_questions=1) as client:
        first = await fake.interaction("oracle ask", {"question": QUESTION}, member=fake.player)
        await until(lambda: world.brain.writing.is_set(), 30, "the first answer to be written")
        second = await fake.interaction("oracle ask", {"question": "Who is Teodric?"}, member=fake.gm)
        response = await second.wait_acknowledged(3)
        assert (response.type, response.data["flags"]) == (4, EPHEMERAL)
        assert response.data["content"] == BUSY.format(n=1)
        await fake.wait_until(lambda: first.id in client.completed, 30, "the first answer")
    assert "Candle Monk" in first.messages[0].content


async def test_game_master_roles_and_channels_missing_from_the_server_are_named(world, fake, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", gm_roles=["GM", "Dungeon Boss"],
                         gm_channels=[123456789]):
        await until(lambda: any("dungeon boss" in r.getMessage() for r in caplog.records), 5, "the role warning")
    said = [r.getMessage() for r in caplog.records if r.name == "bot.startup"]
    assert any("no role named 'dungeon boss'" in m for m in said), said
    assert not any("'gm'" in m for m in said), said  # the server has a GM role
    assert any("game-master channel 123456789" in m for m in said), said


async def test_the_default_roles_are_alternatives_and_one_of_them_is_enough(world, fake, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    default = ["gm", "dm", "game master", "dungeon master"]  # as .env.example sets them; the server has "GM"
    async with start_bot(world, fake, tmp_path / "bot.sqlite3", gm_roles=default) as client:
        await until(lambda: client.checked_places, 5, "the startup checks")
    assert [r.getMessage() for r in caplog.records if r.name == "bot.startup"] == []


async def test_a_button_that_fails_is_answered_with_one_sentence(world, fake, tmp_path):
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        inter = await run(fake, client, "oracle ask", {"question": QUESTION})
        answer = inter.messages[0]
        table = next(iter(client.tables))
        await table.journal.close()  # every click now fails on its first read of the journal
        click = await fake.click(answer, buttons(answer)[0])
        await click.settle(idle=0.5)
    replies = [e for e in click.callbacks if e.accepted] + [e for e in click.edits if e.accepted]
    texts = [e.data.get("content") if e.data else None for e in click.callbacks] + \
        [m.content for m in click.messages]
    assert FAILED in texts, (replies, texts)


async def test_table_talk_in_a_thread_is_left_alone(world, fake, tmp_path):
    friend = fake.add_member("friend", roles=[fake.player_role_id])
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        await run(fake, client, "oracle ask", {"question": QUESTION})
        thread_id = int(fake.threads[-1]["id"])
        world.ollama.requests.clear()
        await fake.message(thread_id, fake.player, f"<@&{fake.gm_role_id}> is Pip the heir?")
        await fake.message(thread_id, fake.player, f"<@{friend.id}> did you bring the map?")
        await fake.message(thread_id, friend, "are you coming on friday?")
        await fake.message(thread_id, friend, "did you see that?")
        await asyncio.sleep(0.5)
        assert world.requests() == [] and [m for m in bot_messages(fake, thread_id) if not m.ephemeral] == []
        await fake.message(thread_id, friend, "do you know who sold the compass?")
        await until(lambda: bot_messages(fake, thread_id), 10, "the question to the Oracle")

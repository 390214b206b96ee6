"""The bot's decisions around an answer (`bot.answering`, `bot.tables`) against small doubles
(tests/bot/doubles.py): who gets a game master's answer where, who is told to wait, what is said
before the notes are indexed, and where a thread for follow-ups can be opened and what the asker is
told when it cannot. The whole flow, through the fake Discord: test_bot.py, test_table.py."""
from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.answering import MOVED, NO_THREAD, Answering, no_thread_reason
from bot.delivery import InteractionReply
from bot.formatting import thread_name
from bot.history import ThreadHistory
from bot.places import Place, Places
from bot.questions import Questions
from bot.settings import BotSettings
from bot.tables import Table, Tables
from oracle.answer.prompt import Turn
from oracle.campaigns import Campaign, Campaigns
from oracle.types import Clearance
from tests.bot.doubles import (
    Calls,
    CategoryChannel,
    ForumChannel,
    Interaction,
    Member,
    Message,
    TextChannel,
    Thread,
    VoiceChannel,
    guild,
    http_error,
)

TUESDAY, FRIDAY, TUESDAY_GM, ELSEWHERE = 10, 30, 20, 99  # channel ids


class English:
    """An index as hearing a thread reads it: only the notes' language."""

    async def language(self) -> str:
        return "en"


def tables(places: list[Place], *, several: bool, **settings) -> Tables:
    bot_settings = BotSettings(_env_file=None, token="fake-token", **({"gm_roles": ["gm"]} | settings))
    # Routing and game masters read only the campaign's place: no index, Oracle or journal is opened.
    campaigns = Campaigns(tuple(Campaign(p.name, Path(p.name), fronts={"discord": as_table(p)}) for p in places),
                          Path("campaigns.toml") if several else None)
    served = Places.of(campaigns)
    assert [served[p.name] for p in places] == places
    return Tables(served, [Table(c, served[c.name], English(), None, None)  # type: ignore[arg-type]
                           for c in campaigns], bot_settings)


def as_table(place: Place) -> dict[str, object]:
    """A place as its [campaigns.NAME.discord] table."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in vars(place).items() if k != "name" and v is not None}


def host(tables: Tables, history: ThreadHistory | None = None) -> SimpleNamespace:
    """What `Answering` uses of the bot (`answering.OracleHost`)."""
    return SimpleNamespace(settings=tables.settings, tables=tables, history=history, questions=Questions(4), user=None)


SINGLE = [Place("default")]
SEVERAL = [Place("tuesday", channels=(TUESDAY,), gm_roles=("gm",), gm_channels=(TUESDAY_GM,)),
           Place("friday", channels=(FRIDAY,), gm_roles=("dm",))]


@pytest.mark.parametrize(("where", "why"), [
    (lambda: TextChannel(Calls(), TUESDAY), None),
    (lambda: Thread(11, ForumChannel(12)), "this is a forum post, and a post cannot hold threads of its own"),
    (lambda: Thread(11, TextChannel(Calls(), TUESDAY)), "this is already a thread"),
    (lambda: VoiceChannel(13), "a voice channel's chat cannot hold threads"),
    (lambda: ForumChannel(12), "this kind of channel cannot hold threads"),
], ids=["text channel", "forum post", "thread", "voice chat", "forum"])
def test_where_a_thread_can_be_opened_is_known_before_asking_discord(where, why):
    reason = no_thread_reason(where())
    assert reason == why if why is None else reason.startswith(why)


@pytest.mark.parametrize(("member", "channel", "private", "clearance"), [
    (dict(roles=["player"]), TUESDAY, True, Clearance.PLAYER),  # a player, even privately
    (dict(roles=["GM"]), TUESDAY, False, Clearance.PLAYER),  # a game master's public answer: players read it
    (dict(roles=["gm"]), TUESDAY, True, Clearance.GM),
    (dict(roles=["gm"]), TUESDAY_GM, False, Clearance.GM),  # only game masters read it
    (dict(roles=[], manage_server=True), TUESDAY_GM, True, Clearance.PLAYER),  # with several, only the roles count
    (dict(roles=["gm"]), FRIDAY, True, Clearance.PLAYER),  # Tuesday's game master is a player on Friday
])
def test_a_game_masters_answer_only_where_only_game_masters_read_it(member, channel, private, clearance):
    calls = Calls()
    served = tables(SEVERAL, several=True)
    interaction = Interaction(calls, Member(calls, 5, **member), TextChannel(calls, channel))
    table = served.route(interaction.channel) or served.get("tuesday")
    assert clearance == Answering(host(served)).clearance(interaction, table, private)  # type: ignore[arg-type]


def test_with_one_campaign_managing_the_server_makes_a_game_master():
    calls = Calls()
    served = tables(SINGLE, several=False)
    admin = Interaction(calls, Member(calls, 5, manage_server=True), TextChannel(calls, ELSEWHERE))
    table = served.route(admin.channel)
    assert table is not None
    assert Clearance.GM == Answering(host(served)).clearance(admin, table, True)  # type: ignore[arg-type]


def test_a_campaign_asked_about_outside_its_channels_answers_privately():
    calls = Calls()
    served = tables(SEVERAL, several=True)
    answering = Answering(host(served))  # type: ignore[arg-type]
    tuesday = served.get("tuesday")
    in_friday = Interaction(calls, Member(calls, 5), TextChannel(calls, FRIDAY))
    in_a_tuesday_thread = Interaction(calls, Member(calls, 5), Thread(11, TextChannel(calls, TUESDAY)))
    assert (True, False) == (answering.elsewhere(in_friday, tuesday), answering.elsewhere(in_a_tuesday_thread, tuesday))


def test_a_member_sees_the_campaigns_of_the_channels_they_can_view():
    calls = Calls()
    tuesday = TextChannel(calls, TUESDAY, seen_by=[5, 6])
    friday = TextChannel(calls, FRIDAY, seen_by=[6])
    gm_room = TextChannel(calls, TUESDAY_GM, seen_by=[7])  # Tuesday's game masters' channel
    served = tables(SEVERAL, several=True)
    server = guild(tuesday, friday, gm_room)
    seen = {member: [t.name for t in served.visible_to(Member(calls, member, guild=server))] for member in (5, 6, 7, 8)}
    assert {5: ["tuesday"], 6: ["tuesday", "friday"], 7: ["tuesday"], 8: []} == seen
    assert f"<#{TUESDAY}>" == served.where(Member(calls, 5, guild=server))  # where it answers, not the GM room
    assert "no channel you can see" == served.where(Member(calls, 8, guild=server))
    assert [] == served.visible_to(SimpleNamespace(id=5))  # not a member of the server: no campaign


def test_a_category_is_seen_through_its_own_campaigns_channels():
    calls = Calls()
    # Friday answers in a whole category: one hidden channel of its own, and Tuesday's channel,
    # which everyone sees. Seeing the category's other campaign's channel shows no Friday.
    hidden = TextChannel(calls, 31, category_id=40, seen_by=[])
    tuesday = TextChannel(calls, TUESDAY, category_id=40, seen_by=[5])
    campaigns = [SEVERAL[0], Place("friday", channels=(40,), gm_roles=("dm",))]
    served = tables(campaigns, several=True)
    member = Member(calls, 5, guild=guild(CategoryChannel(40, [hidden, tuesday])))
    assert ["tuesday"] == [t.name for t in served.visible_to(member)]
    hidden.seen_by.add(5)
    assert ["tuesday", "friday"] == [t.name for t in served.visible_to(member)]


def test_the_single_campaign_is_everyones():
    served = tables(SINGLE, several=False)
    assert ["default"] == [t.name for t in served.visible_to(SimpleNamespace(id=5))]


@pytest.mark.parametrize(("campaigns", "several", "roles", "fix"), [
    (SINGLE, False, ["gm"], "a game master (role gm, or Manage Server) can run `/oracle reingest`"),
    (SINGLE, False, [], "a member with Manage Server can run `/oracle reingest`"),
    (SEVERAL, True, ["gm"], "a game master (role gm) can run `/oracle reingest`"),
    ([Place("friday", channels=(FRIDAY,), gm_roles=())], True, [],
     "the bot's host can run `oracle ingest --campaign friday`"),
])
def test_before_the_first_ingest_the_asker_is_told_who_can_index_the_notes(campaigns, several, roles, fix):
    served = tables(campaigns, several=several, gm_roles=roles)
    said = Answering(host(served)).not_indexed(next(iter(served)))  # type: ignore[arg-type]
    assert said == f"The notes have not been indexed yet, so the Oracle has nothing to answer from: {fix}."


async def test_a_burst_is_answered_at_once_then_one_waits_shown_and_a_flood_is_dropped():
    served = tables(SINGLE, several=False, flood_burst=1, flood_seconds=0.2, flood_waiting=1)
    answering = Answering(host(served))  # type: ignore[arg-type]
    shown: list[int] = []

    async def wait(n: int) -> None:
        shown.append(n)

    assert await answering.take_turn(5, lambda: wait(1))
    second = asyncio.ensure_future(answering.take_turn(5, lambda: wait(2)))
    await asyncio.sleep(0.05)
    assert not await answering.take_turn(5, lambda: wait(3))  # one already waits: dropped, nothing shown
    assert await answering.take_turn(6, lambda: wait(4))  # another member is counted apart
    assert await second and [2] == shown


@pytest.fixture
async def history(tmp_path):
    opened = await ThreadHistory.open(tmp_path / "threads.sqlite")
    yield opened
    await opened.close()


async def open_thread(history: ThreadHistory, channel_id: int, error=None) -> tuple[Calls, Message]:
    """An answer posted in `channel_id` (Tuesday's channel, or a forum post), then its thread asked for."""
    calls = Calls()
    served = tables(SEVERAL, several=True)
    channel = TextChannel(calls, channel_id) if channel_id != 12 else Thread(11, ForumChannel(12))
    interaction = Interaction(calls, Member(calls, 5), channel)
    answer = Message(calls, channel, "The Candle Monk.")
    if error is not None:
        calls.errors.append(error)
    await Answering(host(served, history)).open_thread(  # type: ignore[arg-type]
        interaction, InteractionReply(interaction, private=False), served.get("tuesday"), answer,  # type: ignore[arg-type]
        "Who sold the compass?", "Who sold the compass?", SimpleNamespace(text="The Candle Monk.", told="c1"))  # type: ignore[arg-type]
    return calls, answer


async def test_a_thread_is_opened_on_the_answer_and_remembers_its_campaign_and_first_turn(history):
    calls, answer = await open_thread(history, TUESDAY)
    assert [("create_thread", answer.id, thread_name("Who sold the compass?"))] == [
        (s.call, s.target, s.content) for s in calls]
    assert "tuesday" == await history.campaign_of(answer.id)
    assert [Turn("user", "Who sold the compass?"), Turn("assistant", "The Candle Monk.", "c1")] == \
        await history.turns(answer.id, 6)


@pytest.mark.parametrize(("channel", "error", "why"), [
    (TUESDAY, http_error(50013, 403, "Missing Permissions"),
     "the Oracle may not create public threads in this channel (a server admin can grant it *Create Public Threads*)"),
    (TUESDAY, http_error(0, 500, "Internal Server Error"), "Discord refused it (Internal Server Error)"),
    (12, None, "this is a forum post, and a post cannot hold threads of its own"),
], ids=["no permission", "server error", "forum post"])
async def test_where_no_thread_opens_the_answer_stays_and_the_asker_alone_is_told_why(history, channel, error, why):
    calls, answer = await open_thread(history, channel, error)
    told = calls.of("followup")
    assert [(NO_THREAD.format(why=why), True)] == [(s.content, s.fields["ephemeral"]) for s in told]
    assert [] == calls.of("edit") and await history.campaign_of(answer.id) is None


class Heard(Answering):
    """`Answering` with its follow-up recorded instead of answered (the answer itself is test_bot.py's)."""

    def __init__(self, host) -> None:
        super().__init__(host)
        self.followed: list[tuple[str, str]] = []

    async def follow_up(self, message, table, question: str, thread) -> None:
        self.followed.append((table.name, question))


def thread_message(calls: Calls, channel, text: str, *, bot: bool = False, reply_to: int | None = None,
                   mentions: tuple = ()) -> SimpleNamespace:
    async def reply(content: str) -> None:
        calls.made("reply", channel.id, content)

    referenced = Message(calls, channel, "an earlier message", author=SimpleNamespace(id=reply_to)) if reply_to else None
    return SimpleNamespace(
        author=SimpleNamespace(id=5, bot=bot), channel=channel, content=text, mentions=list(mentions),
        role_mentions=[], reply=reply,
        reference=SimpleNamespace(resolved=referenced) if referenced else None)


@pytest.mark.parametrize(("text", "kind", "followed"), [
    ("and then what?", {}, [("tuesday", "and then what?")]),
    ("thanks!", {}, []),  # table talk
    ("and then what?", {"bot": True}, []),  # another bot's message
    ("!r 1d20", {}, []),  # another bot's command
    ("and then what?", {"reply_to": 6}, []),  # a reply to another member
], ids=["question", "thanks", "another bot", "a command", "a reply to a member"])
async def test_in_an_oracle_thread_only_questions_for_it_are_followed_up(history, text, kind, followed):
    calls = Calls()
    answering = Heard(host(tables(SEVERAL, several=True), history))
    thread = Thread(11, TextChannel(calls, TUESDAY))
    await history.add_thread(thread.id, 1, TUESDAY, 5, "tuesday")
    await answering.thread_message(thread_message(calls, thread, text, **kind))  # type: ignore[arg-type]
    assert (followed, []) == (answering.followed, list(calls))


async def test_a_thread_that_is_not_the_oracles_or_not_a_thread_is_left_alone(history):
    calls = Calls()
    answering = Heard(host(tables(SEVERAL, several=True), history))
    members_thread = Thread(12, TextChannel(calls, TUESDAY))  # never opened by the Oracle
    await answering.thread_message(thread_message(calls, members_thread, "and then what?"))  # type: ignore[arg-type]
    await answering.thread_message(thread_message(calls, TextChannel(calls, TUESDAY), "and then what?"))  # type: ignore[arg-type]
    assert ([], []) == (answering.followed, list(calls))


async def test_a_thread_whose_channel_now_belongs_to_another_campaign_says_so_and_answers_nothing(history):
    calls = Calls()
    answering = Heard(host(tables(SEVERAL, several=True), history))
    thread = Thread(11, TextChannel(calls, FRIDAY))  # opened when its channel was Tuesday's
    await history.add_thread(thread.id, 1, FRIDAY, 5, "tuesday")
    await answering.thread_message(thread_message(calls, thread, "and then what?"))  # type: ignore[arg-type]
    assert ([], [("reply", MOVED)]) == (answering.followed, [(s.call, s.content) for s in calls])

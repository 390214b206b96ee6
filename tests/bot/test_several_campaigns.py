"""Three campaigns in one bot, through the fake Discord and the real discord.py client.

Tuesday is the mini campaign with its game-master secrets; Friday is a harbour campaign with one
secret of its own; Sunday answers in a category. One embedding model and one fake Ollama serve all
three (a `Library` over a campaigns file), each with its own index and journal. Routing goes by
the channel, the thread's parent, then the category; a channel mapped to none is told privately
where the Oracle answers; a game master of one campaign is a player in another, and a channel of
another campaign in its game-master category is no game-master channel; a thread whose channel
went to another campaign no longer answers for its old one; a reingest of
Tuesday does not hold up twenty questions to Friday; and with watching on, an edit to Friday's
notes is reingested once and announced in Friday's channel.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

import bot.reingest
from bot.__main__ import run as run_bot
from bot.answering import MOVED
from bot.client import OracleBot
from bot.history import ThreadHistory
from bot.places import Places
from bot.settings import BotSettings
from bot.tables import Tables, open_table
from oracle.campaigns import Campaigns
from oracle.index.ingest import ingest
from oracle.index.library import Library
from oracle.index.seam import Embeddings
from oracle.settings import Settings
from oracle.types import Clearance
from testing.discord import EPHEMERAL, FakeDiscord
from testing.ollama_server import FakeOllama
from tests.bot.harness import (
    MODEL,
    QUESTION,
    Brain,
    buttons,
    headers,
    rows,
    run,
)
from tests.conftest import MINI_CAMPAIGN, quick_settings, write_notes
from tests.conftest import request_kind as kind

pytestmark = pytest.mark.asyncio(loop_scope="module")

FRIDAY = {
    "sessions/Session 1.md": "## Session 1 — The Harbour\nOrrin Hale, the harbour master, charged the party a "
                             "double tariff on lamp oil.\n",
    "sessions/Session 2.md": "## Session 2 — The Chain\nOrrin Hale raised the harbour chain against the pirate "
                             "sloop.\n",
    "gm/Orrin.md": "SECRET-FRIDAY: Orrin Hale is the pirate queen's brother.\n",
}
SUNDAY = {"sessions/Session 1.md": "## Session 1 — The Mill\nThe miller's daughter found a silver key in the flour.\n"}
SECRETS = ("SECRET-COMPASS", "SECRET-PIP", "SECRET-PLANS", "SECRET-HEIR", "SECRET-FRIDAY")


@dataclass
class World:
    root: Path
    ollama: FakeOllama
    brain: Brain
    embeddings: Embeddings

    def base(self, **overrides) -> Settings:
        return quick_settings(self.root / "unused", self.root / "data", self.ollama.url,
                              **({"model": MODEL} | overrides))

    def requests(self, what: str | None = None) -> list[dict]:
        return [r for r in self.ollama.chat_requests() if r.get("messages") and (what is None or kind(r) == what)]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory, quick_embedder):
    root = tmp_path_factory.mktemp("campaigns")
    write_notes(root / "notes" / "tuesday", MINI_CAMPAIGN)
    write_notes(root / "notes" / "friday", FRIDAY)
    write_notes(root / "notes" / "sunday", SUNDAY)
    brain = Brain()
    async with FakeOllama(models=[MODEL]) as ollama:
        ollama.responder = brain
        yield World(root, ollama, brain, Embeddings(quick_embedder))


@pytest.fixture
def fresh(world):
    world.ollama.requests.clear()
    world.brain.reset()
    return world


@dataclass
class Server:
    fake: FakeDiscord
    tuesday: int
    friday: int
    sunday_category: int
    sunday: int
    lobby: int
    announce: int
    gm_tuesday: object
    gm_friday: object
    player: object


def campaigns_file(world: World, server: Server, tmp_path: Path, *, tuesday: tuple[int, ...] | None = None,
                   friday: tuple[int, ...] | None = None, tuesday_gm: tuple[int, ...] = ()) -> Path:
    """The three campaigns; `tuesday` and `friday` replace those campaigns' channels."""
    path = tmp_path / "campaigns.toml"
    notes = world.root / "notes"
    path.write_text(f"""
[campaigns.tuesday]
notes = "{notes / 'tuesday'}"
data = "data/tuesday"
[campaigns.tuesday.discord]
channels = {[int(c) for c in (tuesday if tuesday is not None else (server.tuesday,))]}
gm_roles = ["gm-tuesday"]
gm_channels = {[int(c) for c in tuesday_gm]}

[campaigns.friday]
notes = "{notes / 'friday'}"
data = "data/friday"
[campaigns.friday.discord]
channels = {[int(c) for c in (friday if friday is not None else (server.friday,))]}
gm_roles = ["gm-friday"]
announce_channel = {server.announce}

[campaigns.sunday]
notes = "{notes / 'sunday'}"
data = "data/sunday"
[campaigns.sunday.discord]
channels = [{server.sunday_category}]
gm_roles = ["gm-sunday"]
""")
    return path


@pytest_asyncio.fixture(loop_scope="module")
async def server(fresh):
    async with FakeDiscord() as fake:
        gm_tuesday_role = fake.add_role("gm-tuesday")
        gm_friday_role = fake.add_role("gm-friday")
        category = fake.add_category("sunday")
        yield Server(
            fake,
            tuesday=fake.add_text_channel("tuesday"),
            friday=fake.add_text_channel("friday"),
            sunday_category=category,
            sunday=fake.add_text_channel("sunday-chat", parent_id=category),
            lobby=fake.add_text_channel("lobby"),
            announce=fake.add_text_channel("friday-news"),
            gm_tuesday=fake.add_member("tess", roles=[gm_tuesday_role, fake.player_role_id]),
            gm_friday=fake.add_member("fred", roles=[gm_friday_role, fake.player_role_id]),
            player=fake.player,
        )
        assert fake.errors == []


@contextlib.asynccontextmanager
async def start(world: World, server: Server, tmp_path: Path, *, watch: bool = False, ingested: bool = True,
                file: Path | None = None, **base_overrides):
    """The bot as `python -m bot` wires it, over a Library of the three campaigns sharing one model
    (those of `campaigns_file`, or of `file`)."""
    settings = world.base(campaigns=file or campaigns_file(world, server, tmp_path), **base_overrides)
    campaigns = Campaigns.from_settings(settings)
    library = Library(settings, campaigns, world.embeddings)
    bot_settings = BotSettings(_env_file=None, token="fake-token", guild_id=server.fake.guild_id, gm_roles=["gm"],
                               flood_seconds=0, stream_edit_seconds=3600)
    history = await ThreadHistory.open(tmp_path / "bot.sqlite3")
    try:
        if ingested:
            for campaign in campaigns:
                report = await ingest(library.index(campaign))
                assert report.skipped == []
            world.ollama.requests.clear()  # the annotations: what the tests count is the questions'
        places = Places.of(campaigns)
        tables = [await open_table(c, places[c.name], library.index(c), default_announce=None) for c in campaigns]
        client = OracleBot(settings=bot_settings, tables=Tables(places, tables, bot_settings), history=history,
                           library=library, watch=watch, guild_ready_timeout=0.05)
        client.completed = []  # type: ignore[attr-defined]

        async def on_app_command_completion(interaction, command) -> None:
            client.completed.append(interaction.id)  # type: ignore[attr-defined]

        client.add_listener(on_app_command_completion)
        async with server.fake.run_client(client):
            yield client
        for table in tables:
            await table.journal.close()
    finally:
        await history.close()
        await library.close()


def bot_said(fake: FakeDiscord, channel_id: int) -> list:
    """The bot's messages in a channel or thread that everyone there reads."""
    return [m for m in fake.messages(channel_id) if m.author_id == fake.app_id and not m.ephemeral]


def answer_labels(request: dict) -> list[str]:
    return [h[0] for h in headers(request)]


async def test_each_channel_thread_and_category_answers_from_its_own_campaign(fresh, server, tmp_path):
    fake = server.fake
    async with start(fresh, server, tmp_path) as client:
        tuesday = await run(fake, client, "oracle ask", {"question": QUESTION}, channel_id=server.tuesday)
        friday = await run(fake, client, "oracle ask", {"question": "What did Orrin Hale charge for lamp oil?"},
                           channel_id=server.friday)
        sunday = await run(fake, client, "oracle ask", {"question": "What did the miller's daughter find?"},
                           channel_id=server.sunday)
        thread_id = int(fake.threads[1]["id"])  # Friday's answer's thread
        await fake.message(thread_id, server.player, "and then what did he do?")
        await fake.wait_until(lambda: len(rows(tmp_path / "bot.sqlite3", "SELECT 1 FROM turns")) == 8, 10,
                              "the follow-up")
        lobby = await fake.interaction("oracle ask", {"question": QUESTION}, channel_id=server.lobby)
        await lobby.settle()
    answers = fresh.requests("answer")
    # Each answer's first source is a session of its own campaign: Tuesday's in its campaign log (a hub,
    # whose sections are labelled as its own), Friday's and Sunday's in notes named "Session N".
    tops = [answer_labels(r)[0] for r in answers]
    assert tops[0] == "campaign-log › Session 1" and all(re.fullmatch(r"Session \d+", t) for t in tops[1:]), tops
    tuesday_text, friday_text, sunday_text, follow_text = (json.dumps(r) for r in answers)
    assert "Lantern Market" in tuesday_text and "Orrin" not in tuesday_text
    assert "Orrin Hale" in friday_text and "Lantern" not in friday_text and "miller" not in friday_text
    assert "miller" in sunday_text and "Orrin" not in sunday_text  # routed by the channel's category
    assert "harbour" in follow_text and "Lantern" not in follow_text  # the thread's campaign
    assert rows(tmp_path / "bot.sqlite3", "SELECT campaign FROM threads ORDER BY rowid") == [
        ("tuesday",), ("friday",), ("sunday",)]
    assert buttons(friday.original)[0].startswith("oracle:sources:friday:")
    for inter in (tuesday, friday, sunday):
        assert not inter.original.ephemeral
    assert (lobby.original.ephemeral, lobby.original.content) == (
        True, f"This channel belongs to no campaign. The Oracle answers in <#{server.tuesday}>, <#{server.friday}>, "
              f"<#{server.sunday_category}>.")
    assert len(fresh.requests("answer")) == 4  # the lobby's question cost nothing


async def test_a_campaigns_secrets_and_game_masters_stay_in_it(fresh, server, tmp_path):
    fake = server.fake
    async with start(fresh, server, tmp_path) as client:
        # Tuesday's game master asking privately in Friday's channel is one of Friday's players there.
        as_player = await run(fake, client, "oracle ask", {"question": "Who is Orrin Hale really?", "private": True},
                              member=server.gm_tuesday, channel_id=server.friday)
        player_requests = json.dumps(fresh.requests())
        fresh.ollama.requests.clear()
        as_gm = await run(fake, client, "oracle ask", {"question": "Who is Orrin Hale really?", "private": True},
                          member=server.gm_friday, channel_id=server.friday)
        gm_requests = json.dumps(fresh.requests())
        fresh.ollama.requests.clear()
        # Friday's game master in Tuesday's channel: a player of Tuesday, never Tuesday's secrets.
        await run(fake, client, "oracle ask", {"question": "Who is Pip really? the lost prince?", "private": True},
                  member=server.gm_friday, channel_id=server.tuesday)
        cross = json.dumps(fresh.requests())
        refused = await fake.interaction("oracle reingest", member=server.gm_friday, channel_id=server.tuesday)
        await refused.settle()
    assert as_player.original.ephemeral and as_gm.original.ephemeral
    assert "SECRET-FRIDAY" not in player_requests and "SECRET-FRIDAY" in gm_requests
    assert not any(s in cross for s in SECRETS)
    assert not any(s in gm_requests for s in SECRETS if s != "SECRET-FRIDAY")  # never another campaign's
    assert refused.original.content == "Only a game master can reingest the notes."


async def test_the_campaign_option_offers_what_a_member_can_see_and_answers_privately_elsewhere(
    fresh, server, tmp_path
):
    fake = server.fake
    view = 1 << 10
    fake.set_overwrite(server.sunday_category, fake.guild_id, deny=view)  # Sunday is hidden from @everyone…
    fake.set_overwrite(server.sunday, fake.guild_id, deny=view)
    async with start(fresh, server, tmp_path) as client:
        offered = await fake.autocomplete("oracle ask", {"question": "x", "campaign": ""}, member=server.player,
                                          channel_id=server.tuesday)
        asked = await run(fake, client, "oracle ask", {"question": "What did Orrin Hale charge for lamp oil?",
                                                       "campaign": "friday"}, channel_id=server.tuesday)
        hidden = await fake.interaction("oracle ask", {"question": "the key?", "campaign": "sunday"},
                                        channel_id=server.tuesday)
        await hidden.settle()
    assert [c["value"] for c in offered] == ["tuesday", "friday"]
    assert asked.response.data == {"flags": EPHEMERAL} and asked.original.ephemeral  # not Tuesday's channel's
    assert "Orrin Hale" in json.dumps(fresh.requests("answer")[0])
    assert fake.threads == []
    assert hidden.original.content == "There is no campaign “sunday” here."


async def test_a_game_master_category_is_no_game_master_channel_in_another_campaigns_channel(fresh, server, tmp_path):
    """Tuesday's game-master category holds a channel of Friday's: there Tuesday's reingest report
    (note paths, secret counts) goes to the game master's direct messages, and a member who sees only
    that channel of the category is offered Friday, not Tuesday."""
    fake = server.fake
    staff = fake.add_category("staff")
    tuesday_gm = fake.add_text_channel("tuesday-gm", parent_id=staff)  # Tuesday's, through the category
    friday_desk = fake.add_text_channel("friday-desk", parent_id=staff)  # Friday's, by its own id
    view = 1 << 10
    for hidden in (server.tuesday, tuesday_gm):  # from all but Tuesday's game master (and the bot)
        fake.set_overwrite(hidden, fake.guild_id, deny=view)
        fake.set_overwrite(hidden, server.gm_tuesday, allow=view)
        fake.set_overwrite(hidden, fake.bot_role_id, allow=view)
    file = campaigns_file(fresh, server, tmp_path, friday=(server.friday, friday_desk), tuesday_gm=(staff,))
    async with start(fresh, server, tmp_path, file=file) as client:
        elsewhere = await run(fake, client, "oracle reingest", {"campaign": "tuesday"}, member=server.gm_tuesday,
                              channel_id=friday_desk)
        at_home = await run(fake, client, "oracle reingest", member=server.gm_tuesday, channel_id=tuesday_gm)
        offered = await fake.autocomplete("oracle ask", {"question": "x", "campaign": ""}, member=server.player,
                                          channel_id=friday_desk)
    assert bot_said(fake, friday_desk) == []
    reports = [m.content for m in fake.dm_messages(server.gm_tuesday)]
    assert reports[-1].startswith("✅ Reingest done in ") and len(reports) == 1
    assert "direct messages" in elsewhere.original.content
    home = [m.content for m in bot_said(fake, tuesday_gm)]
    assert home[-1].startswith("✅ Reingest done in ") and "this channel" in at_home.original.content
    assert [c["value"] for c in offered] == ["friday", "sunday"]


async def test_a_thread_whose_channel_went_to_another_campaign_no_longer_answers_for_its_old_one(
    fresh, server, tmp_path
):
    fake = server.fake
    async with start(fresh, server, tmp_path) as client:
        await run(fake, client, "oracle ask", {"question": QUESTION}, channel_id=server.tuesday)
    thread_id = int(fake.threads[0]["id"])
    swapped = campaigns_file(fresh, server, tmp_path, tuesday=(server.friday,), friday=(server.tuesday,))
    async with start(fresh, server, tmp_path, file=swapped):
        question = await fake.message(thread_id, server.player, "and then what did they find?")
        await fake.wait_until(lambda: bot_said(fake, thread_id), 10, "the reply")
    [reply] = bot_said(fake, thread_id)
    assert reply.content == MOVED and reply.data["message_reference"]["message_id"] == str(question.id)
    assert [] == fresh.requests("answer")  # Friday's players now read it: no Tuesday answer, nor Friday's


async def test_a_reingest_of_one_campaign_does_not_hold_up_another(fresh, server, tmp_path, monkeypatch):
    fake = server.fake
    monkeypatch.setattr(bot.reingest, "PROGRESS_EVERY", 0.1)
    async with start(fresh, server, tmp_path, ingested=False) as client:
        friday = client.tables.get("friday").index
        await ingest(friday)
        fresh.brain.annotate_delay = 0.2  # Tuesday's 12 annotations: a reingest of seconds
        reingest = await fake.interaction("oracle reingest", member=server.gm_tuesday, channel_id=server.tuesday)
        await fake.wait_until(lambda: any("Reingesting" in m.content for m in fake.dm_messages(server.gm_tuesday)),
                              20, "the reingest to run")
        asks = [await fake.interaction("oracle ask", {"question": f"What did Orrin Hale do? ({i})", "private": True},
                                       channel_id=server.friday) for i in range(20)]
        await fake.wait_until(lambda: all(a.id in client.completed for a in asks), 60, lambda: (
            f"twenty answers: {sum(a.id in client.completed for a in asks)} came, the reingest "
            f"{'ended' if reingest.id in client.completed else 'runs'}, Ollama was asked {len(fresh.requests('answer'))}"
            " answers"))
        still_running = reingest.id not in client.completed
        await fake.wait_until(lambda: reingest.id in client.completed, 60, "the reingest")
    assert still_running  # the answers came while Tuesday was being indexed
    for inter in asks:
        assert inter.original.content.startswith("The Candle Monk sold the compass [Session ")
    assert all("Orrin Hale" in json.dumps(r) for r in fresh.requests("answer"))
    assert fake.dm_messages(server.gm_tuesday)[-1].content.startswith("✅ Reingest done in ")


async def test_watching_reingests_a_changed_campaign_once_and_tells_its_players(fresh, server, tmp_path):
    fake = server.fake
    friday_notes = fresh.root / "notes" / "friday"
    async with start(fresh, server, tmp_path, watch=True, watch_quiet=0.5) as client:
        await asyncio.sleep(0.5)  # the watchers are set up
        (friday_notes / "sessions" / "Session 3.md").write_text("## Session 3 — The Storm\nThe storm sank two boats.\n")
        (friday_notes / "gm" / "Session 4.md").write_text("## Session 4 — Plans\nSECRET-FRIDAY the storm was sent.\n")
        await fake.wait_until(lambda: fake.messages(server.announce), 30, "the announcement")
        await asyncio.sleep(1.0)  # nothing more comes
        status = await run(fake, client, "oracle status", member=server.gm_friday, channel_id=server.friday)
        table = client.tables.get("friday")
        async with table.index.snapshot() as store:
            labels = {t.label for t in await store.titles(Clearance.PLAYER)}
    try:
        said = [m.content for m in fake.messages(server.announce)]
        assert said == ["📜 New in the notes: Session 3 — The Storm"]
        assert "**Watching the notes:** yes, since 20" in status.original.content  # the game master's status
        assert "Session 3" in labels and "Session 4" not in labels
    finally:
        (friday_notes / "sessions" / "Session 3.md").unlink()
        (friday_notes / "gm" / "Session 4.md").unlink()


async def test_a_bad_campaigns_file_stops_the_bot_before_anything_starts(tmp_path, caplog):
    caplog.set_level(logging.ERROR)
    bad = tmp_path / "campaigns.toml"
    bad.write_text('[campaigns.tuesday]\nnotes = "notes"\ndiscord.channels = ["general"]\n')
    (tmp_path / "notes").mkdir()
    code = await run_bot(Settings(_env_file=None, campaigns=bad, data_dir=tmp_path / "data"),
                         BotSettings(_env_file=None, token="fake-token"))
    assert code == 2
    [error] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert error.startswith(f"{bad}, line 3: campaign 'tuesday': channels")
    assert not (tmp_path / "data").exists()  # nothing was opened

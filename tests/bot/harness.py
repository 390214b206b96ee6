"""The harness of the Discord bot's tests: the real, unmodified discord.py client (`OracleBot`)
against the fake Discord (testing/discord/), answering from a real index (SQLite, Chroma, the
bundled embedding model) with the fake Ollama over real HTTP recording every request.

The campaign (the mini campaign with its GM secrets, plus a `compendium.yaml` of 40 public names and
one GM-only name, for autocomplete) is ingested once for the module, embedded by `campaign_model`
(the deterministic stand-in of the model unless the module says otherwise). Each test starts its own fake
Discord and its own bot on the module's event loop, with a fresh Oracle and thread history.

The fake Ollama (`Brain`) answers annotation requests (schema with `summary`), rerank requests
(schema with `best`: candidate 1 first) and answers (no schema): by default the answer cites the
first note of the context, `The Candle Monk sold the compass [<label>].`
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from bot.client import OracleBot
from bot.history import ThreadHistory
from bot.places import Places
from bot.settings import BotSettings
from bot.tables import Table, Tables
from oracle.campaigns import Campaigns
from oracle.index.index import Index
from oracle.index.ingest import ingest
from oracle.journal import Journal
from oracle.oracle import Oracle
from oracle.settings import Settings
from testing.discord import (
    FakeDiscord,
    FakeInteraction,
    FakeMember,
)
from testing.ollama_server import FakeOllama
from tests.conftest import MINI_CAMPAIGN, quick_settings, write_notes
from tests.conftest import request_kind as kind

MODEL = "qwen2.5:14b"
SECRETS = ("SECRET-COMPASS", "SECRET-PIP", "SECRET-PLANS", "SECRET-HEIR")
ZARN = (
    "Azure Basalt Cobalt Dagger Falcon Garnet Harrow Indigo Jasper Kestrel Lichen Marble Nettle Onyx "
    "Pewter Quartz Raven Sable Thistle Umber Vellum Willow Yarrow Zircon Auburn Briar Copper Dahlia "
    "Flint Granite Heron Ivory Juniper Kelp Linden Mallow Nimbus Opal Pollen Russet"
).split()
ZARN_GM = "Zarn Basilisk"  # sorts among the first 25 "Zarn" names: a leak would show
COMPENDIUM = [{"name": f"Zarn {w}", "kind": "person"} for w in ZARN] + [
    {"name": ZARN_GM, "kind": "person", "visibility": "gm"}
]
CAMPAIGN = dict(MINI_CAMPAIGN) | {"compendium.yaml": yaml.safe_dump(COMPENDIUM)}
# Players' names come from public text alone: "Dunstan Vale" and "Hollow King" recur only with the
# secrets, and so does "Pip": a player's Compendium has no entry for them (one public mention is
# not a recurring name). `world/GODS.md` is named after what its folder holds: a list of them, no one's name.
MINI_NAMES = ["Brother Aldous", "Mirela Vane", "Saltmarsh", "Teodric"]
PUBLIC_NAMES = sorted(MINI_NAMES + [f"Zarn {w}" for w in ZARN], key=str.casefold)

QUESTION = "Who sold Mirela the brass compass in the Lantern Market?"
ERROR_SENTENCE = "Something went wrong answering that; the game master can find the details in the log."


# ---------------------------------------------------------------------------------------------
# The fake Ollama's script


HEADER = re.compile(
    r"^\[(?P<label>[^\]\n]+)\] \((?P<path>[^\n]+?), lines (?P<start>\d+)–(?P<end>\d+)(?:, part \d+ of \d+)?\)$", re.M
)


def headers(request: dict) -> list[tuple[str, str, int, int]]:
    """(label, path, start, end) of each note in full in an answer request, in order."""
    content = request["messages"][-1]["content"]
    return [(m["label"], m["path"], int(m["start"]), int(m["end"])) for m in HEADER.finditer(content)]


def first_label(request: dict) -> str:
    return headers(request)[0][0]


def cite_first(request: dict) -> str:
    return f"The Candle Monk sold the compass [{first_label(request)}]."


def annotate_reply(request: dict) -> dict:
    content = request["messages"][-1]["content"]
    passage = re.match(r"Passage from .*?:\n\n(.*)\n\nReply in JSON", content, re.S)
    assert passage, content
    return {"summary": "ANNOT-" + hashlib.sha256(passage.group(1).encode()).hexdigest()[:12], "entities": []}


class Brain:
    """The fake Ollama's responder; counts the rerank and answer calls in flight."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.answer: Any = cite_first
        self.rerank: Any = {"best": [1]}
        self.delay = 0.0  # seconds, for rerank and answer calls
        self.answer_delay = 0.0  # seconds more, for answer calls
        self.annotate_delay = 0.0
        self.in_flight = 0
        self.max_in_flight = 0
        self.writing = asyncio.Event()  # set when an answer call arrives

    async def __call__(self, request: dict) -> Any:
        what = kind(request)
        if what == "annotate":
            if self.annotate_delay:
                await asyncio.sleep(self.annotate_delay)
            return annotate_reply(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if what == "answer":
                self.writing.set()
            await asyncio.sleep(self.delay + (self.answer_delay if what == "answer" else 0.0))
            reply = self.rerank if what == "rerank" else self.answer
            return reply(request) if callable(reply) else reply
        finally:
            self.in_flight -= 1


# ---------------------------------------------------------------------------------------------
# The campaign, ingested once; a fake Discord and a bot per test


@dataclass
class Campaign:
    root: Path
    notes: Path
    ollama: FakeOllama
    brain: Brain
    index: Index
    embedder: Any

    @property
    def settings(self) -> Settings:
        return self.index.settings

    def make_settings(self, **overrides) -> Settings:
        return quick_settings(self.notes, self.root / "data", self.ollama.url, **({"model": MODEL} | overrides))

    def requests(self, what: str | None = None) -> list[dict]:
        """The chat requests of questions: the bot's startup load (no messages) is not one."""
        return [r for r in self.ollama.chat_requests() if r.get("messages") and (what is None or kind(r) == what)]


@pytest.fixture(scope="module")
def campaign_model(quick_embedder):
    """The model the module's campaign is embedded with: the deterministic stand-in, since the bot's
    tests judge the bot, not the ranking; a module whose campaign another process ingests with the
    real model overrides it with `embedder` (and is then `integration`)."""
    return quick_embedder


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def campaign(tmp_path_factory, campaign_model):
    root = tmp_path_factory.mktemp("bot-campaign")
    notes = write_notes(root / "notes", CAMPAIGN)
    brain = Brain()
    async with FakeOllama(models=[MODEL]) as ollama:
        ollama.responder = brain
        camp = Campaign(root, notes, ollama, brain, None, campaign_model)  # type: ignore[arg-type]
        camp.index = Index(camp.make_settings(), embedder=campaign_model)
        report = await ingest(camp.index)
        assert (12, 0, "", []) == (report.chunks, report.annotations_missing, report.annotation_note, report.skipped)
        yield camp
        await camp.index.close()


@pytest.fixture
def world(campaign) -> Campaign:
    """The module's campaign, its fake Ollama's recording cleared and its script back to the default."""
    campaign.ollama.requests.clear()
    campaign.brain.reset()
    return campaign


@pytest_asyncio.fixture(loop_scope="module")
async def fake():
    async with FakeDiscord() as discord_fake:
        yield discord_fake
        assert discord_fake.errors == []


@pytest_asyncio.fixture(loop_scope="module")
async def indexes(campaign):
    """Open more Indexes over the module's data (other settings), closed at the end of the test."""
    opened: list[Index] = []

    def open_(**overrides) -> Index:
        index = Index(campaign.make_settings(**overrides), embedder=campaign.embedder)
        opened.append(index)
        return index

    yield open_
    for index in opened:
        with contextlib.suppress(Exception):
            await index.close()


@contextlib.asynccontextmanager
async def start_bot(world: Campaign, fake: FakeDiscord, history_path: Path, *, index: Index | None = None,
                    message_content: bool = True, **overrides):
    """An OracleBot logged in to the fake; `bot.completed` collects the interactions it finished."""
    history = await ThreadHistory.open(history_path)
    journal = await Journal.open(history_path.with_name("journal.sqlite3"))
    index = index or world.index
    # No edit while the model writes unless a test asks for it: the edits a test counts stay the same
    # however fast the machine.
    values: dict[str, Any] = {"token": "fake-token", "guild_id": fake.guild_id, "gm_roles": ["gm"],
                              "gm_channels": [], "flood_seconds": 0, "history_turns": 6,
                              "stream_edit_seconds": 3600}
    values.update(overrides)
    settings = BotSettings(_env_file=None, **values)
    campaigns = Campaigns.single(index.settings)
    places = Places.of(campaigns)
    table = Table(campaigns.campaigns[0], places["default"], index, Oracle(index), journal, settings.announce_channel)
    await table.news()
    client = OracleBot(settings=settings, tables=Tables(places, [table], settings), history=history,
                       message_content=message_content, guild_ready_timeout=0.05)
    client.oracle = table.oracle  # type: ignore[attr-defined]  # the one campaign's, for tests to spy on
    client.completed = []  # type: ignore[attr-defined]

    async def on_app_command_completion(interaction, command) -> None:
        client.completed.append(interaction.id)  # type: ignore[attr-defined]

    client.add_listener(on_app_command_completion)
    try:
        async with fake.run_client(client):
            yield client
    finally:
        await history.close()
        await journal.close()


@pytest_asyncio.fixture(loop_scope="module")
async def oracle_bot(world, fake, tmp_path):
    async with start_bot(world, fake, tmp_path / "bot.sqlite3") as client:
        yield client


# ---------------------------------------------------------------------------------------------
# Helpers


async def until(check: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
    """Poll `check()` (sync or async) until it is truthy."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if loop.time() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


async def run(fake: FakeDiscord, client: OracleBot, command: str, options: dict | None = None, *,
              member: FakeMember | None = None, channel_id: int | None = None, timeout: float = 10.0) -> FakeInteraction:
    """Send a slash command and wait until the bot finished it (successfully)."""
    inter = await fake.interaction(command, options or {}, member=member or fake.player, channel_id=channel_id)
    await fake.wait_until(lambda: inter.id in client.completed, timeout, f"/{command} to complete")
    return inter


def spy(client: OracleBot, method: str) -> list:
    """Every result of the bot's Oracle's `method` ("ask": Answers; "search": Retrievals, whose
    `search_query` is the expanded query), in order."""
    results: list = []
    real = getattr(client.oracle, method)

    async def wrapper(*args, **kwargs):
        result = await real(*args, **kwargs)
        results.append(result)
        return result

    setattr(client.oracle, method, wrapper)
    return results


def source_line(label: str, path: str, start: int, end: int) -> str:
    return f"**{label}** — `{path}` lines {start}–{end}"


def rows(path: Path, sql: str) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute(sql).fetchall()


def bot_messages(fake: FakeDiscord, channel_id: int | None = None) -> list:
    return [m for m in fake.messages(channel_id) if m.author_id == fake.app_id]


def buttons(message) -> list[str]:
    """The custom ids of a message's buttons, in order."""
    return [c["custom_id"] for row in message.components for c in row["components"] if "custom_id" in c]


def no_secret(requests: list[dict]) -> bool:
    dumped = json.dumps(requests)
    return not any(s in dumped for s in SECRETS)

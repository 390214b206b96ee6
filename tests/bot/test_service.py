"""`python -m bot` as a service runs it: its own process, against the fake Discord and the fake
Ollama over sockets, stopped with SIGTERM as `systemctl stop` stops it.

The campaign is ingested once for the module by `oracle ingest` in its own process, so nothing of
the test's own process holds the index open: what is left in the data folder after the bot exits
is what the bot left.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bot.delivery import MOVED_BELOW
from bot.questions import RESTARTING
from testing.discord import FakeDiscord
from testing.ollama_server import FakeOllama
from tests.bot.harness import CAMPAIGN, MODEL, QUESTION, Brain, bot_messages
from tests.conftest import write_notes

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

SHIM = Path(__file__).with_name("run_bot.py")
REPO = Path(__file__).resolve().parents[2]
STARTUP = 180.0  # the bot loads the embedding model before it connects: generous on a loaded machine


class Service:
    """One campaign's notes and index, and the fake Ollama the bot and the ingest talk to."""

    def __init__(self, root: Path, ollama: FakeOllama, brain: Brain) -> None:
        self.root, self.ollama, self.brain = root, ollama, brain
        self.notes = root / "notes"
        self.data = root / "data"
        self.stand_in_data = root / "data-stand-in"  # the same notes indexed by the stand-in model

    def no_model(self) -> dict[str, str]:
        """For the tests that end before any question: the bot loads the hashed stand-in for the
        model (tests/fakes/hashed_cli.py) in seconds, with no embedding worker, and reads the index
        the stand-in built."""
        return {"ORACLE_TEST_STAND_IN": "1", "ORACLE_EMBED_WORKER": "false", "ORACLE_DATA_DIR": str(self.stand_in_data)}

    def env(self, fake_api: str, fake_ws: str, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ORACLE_", "DISCORD_", "OLLAMA_"))}
        return env | {
            "ORACLE_NOTES_DIR": str(self.notes), "ORACLE_DATA_DIR": str(self.data), "OLLAMA_HOST": self.ollama.url,
            "ORACLE_MODEL": MODEL, "ORACLE_GM_ROLES": "gm", "DISCORD_TOKEN": "fake-token",
            "FAKE_DISCORD_API": fake_api, "FAKE_DISCORD_WS": fake_ws, "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": str(REPO), **extra,
        }


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def service(tmp_path_factory) -> AsyncIterator[Service]:
    root = tmp_path_factory.mktemp("service")
    write_notes(root / "notes", CAMPAIGN)
    brain = Brain()
    async with FakeOllama(models=[MODEL]) as ollama:
        ollama.responder = brain
        served = Service(root, ollama, brain)
        ingest = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).with_name("oracle")), "ingest", cwd=root,
            env=served.env("http://127.0.0.1:9/api/v10", "ws://127.0.0.1:9/"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(ingest.communicate(), 300)
        assert ingest.returncode == 0, err.decode()[-2000:]
        stand_in = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.fakes.hashed_cli", "ingest", cwd=REPO,
            env=served.env("http://127.0.0.1:9/api/v10", "ws://127.0.0.1:9/", **served.no_model()),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(stand_in.communicate(), 300)
        assert stand_in.returncode == 0, err.decode()[-2000:]
        yield served


@pytest.fixture
def world(service) -> Service:
    service.brain.reset()
    service.ollama.requests.clear()
    # Each test's fake Discord is a new one: the bot's memory of the commands it registered (and of
    # its threads) belongs to the last test's.
    for data in (service.data, service.stand_in_data):
        for path in data.glob("bot.sqlite3*"):
            path.unlink()
    return service


class Bot:
    """The bot's process and what it wrote to stderr."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stderr is not None
        async for line in self.process.stderr:
            self.lines.append(line.decode(errors="replace").rstrip())

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    async def wait_for_line(self, text: str, timeout: float = STARTUP) -> str:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            found = [line for line in self.lines if text in line]
            if found:
                return found[0]
            if self.process.returncode is not None:
                break
            await asyncio.sleep(0.1)
        raise AssertionError(f"no line with {text!r} in the bot's log:\n{self.log[-3000:]}")

    async def exit_code(self, timeout: float = 60.0) -> int:
        code = await asyncio.wait_for(self.process.wait(), timeout)
        await self.reader
        return code


@contextlib.asynccontextmanager
async def bot_process(world: Service, fake_api: str, fake_ws: str, **env: str) -> AsyncIterator[Bot]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(SHIM), cwd=world.root, env=world.env(fake_api, fake_ws, **env),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    bot = Bot(process)
    try:
        yield bot
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        with contextlib.suppress(Exception):
            await bot.reader


async def ready(fake: FakeDiscord, bot: Bot) -> None:
    await bot.wait_for_line("ready as")
    await fake.wait_until(lambda: fake.commands(fake.guild_id), 10, "the guild's commands")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_sigterm_tells_the_question_under_way_closes_the_gateway_and_exits_0(world, tmp_path):
    world.brain.answer_delay = 120.0  # the model takes minutes: the question is under way at the stop
    async with FakeDiscord() as fake, bot_process(world, fake.api_url, fake.ws_url, DISCORD_GUILD_ID=str(fake.guild_id),
                                                   ORACLE_STOP_SECONDS="1") as bot:
        await ready(fake, bot)
        inter = await fake.interaction("oracle ask", {"question": QUESTION}, member=fake.player)
        await inter.wait_acknowledged(10)
        await fake.wait_until(lambda: world.brain.writing.is_set(), 60, "the answer to be written")
        bot.process.send_signal(signal.SIGTERM)
        assert await bot.exit_code() == 0, bot.log[-3000:]
        await inter.wait(lambda i: i.edits and i.edits[-1].body.get("content") == RESTARTING, 10,
                         "the question to be told")
        (connection,) = fake.gateway_connections
        # A close frame from the bot, not a dropped socket (1006). discord.py asks for 1000; its poll
        # task's close(code=4000) may reach the wire first (as in test_fake_discord).
        assert connection.closed_by_server is None and connection.close_code in (1000, 4000), connection
    assert "Traceback" not in bot.log and "leaked semaphore" not in bot.log, bot.log[-3000:]
    assert "Batches" not in bot.log and "it/s]" not in bot.log  # no progress bars in a service's journal
    assert sorted(world.data.rglob("*-wal")) == [] and sorted(world.data.rglob("*-shm")) == []


async def test_a_server_that_refuses_the_commands_is_one_sentence_with_the_invite_and_exit_2(world):
    async with FakeDiscord() as fake, bot_process(world, fake.api_url, fake.ws_url,
                                                   DISCORD_GUILD_ID=str(fake.guild_id + 999), **world.no_model()) as bot:
        assert await bot.exit_code(STARTUP) == 2, bot.log[-3000:]
    errors = [line for line in bot.lines if " ERROR " in line]
    assert len(errors) == 1, bot.log[-3000:]
    assert f"server {fake.guild_id + 999}" in errors[0] and "Missing Access" in errors[0]
    assert f"https://discord.com/oauth2/authorize?client_id={fake.app_id}" in errors[0]
    assert "scope=bot+applications.commands" in errors[0] and "permissions=" in errors[0]
    assert "Traceback" not in bot.log


async def test_an_answer_that_outlives_the_interaction_token_is_posted_in_the_channel(world):
    world.brain.answer_delay = 3.0
    async with FakeDiscord() as fake, bot_process(world, fake.api_url, fake.ws_url,
                                                   DISCORD_GUILD_ID=str(fake.guild_id)) as bot:
        await ready(fake, bot)
        inter = await fake.interaction("oracle ask", {"question": QUESTION}, member=fake.player)
        await inter.wait_acknowledged(10)
        await fake.wait_until(lambda: world.brain.writing.is_set(), 60, "the answer to be written")
        fake.advance(16 * 60)  # the answer arrives after Discord has dropped the interaction's token
        answers = await fake.wait_until(
            lambda: [m for m in bot_messages(fake, fake.channel_id) if m.source == "channel"], 60,
            "the answer in the channel")
        (original,) = inter.messages
        assert "Candle Monk" in answers[0].content
        assert answers[0].data["message_reference"]["message_id"] == str(original.id)
        (thread,) = await fake.wait_until(lambda: fake.threads, 10, "a thread on the answer, as usual")
        assert thread["id"] == str(answers[0].id)  # a thread opened on a message takes its id
        await fake.wait_until(lambda: original.content == MOVED_BELOW, 10, "the deferred reply to point below")
        bot.process.send_signal(signal.SIGTERM)
        assert await bot.exit_code() == 0
    assert "Traceback" not in bot.log, bot.log[-3000:]


async def test_discord_unreachable_at_start_is_one_line_then_retries(world):
    port = free_port()  # nothing listens there
    async with bot_process(world, f"http://127.0.0.1:{port}/api/v10", f"ws://127.0.0.1:{port}/", **world.no_model()) as bot:
        first = await bot.wait_for_line("cannot reach Discord")
        assert "trying again in 2 s" in first
        await bot.wait_for_line("trying again in 4 s", 30)
        bot.process.send_signal(signal.SIGTERM)
        assert await bot.exit_code() == 0
    assert "Traceback" not in bot.log, bot.log[-3000:]


async def test_a_missing_notes_folder_is_one_sentence_and_exit_2(world, tmp_path):
    async with bot_process(world, "http://127.0.0.1:9/api/v10", "ws://127.0.0.1:9/",
                           ORACLE_NOTES_DIR=str(tmp_path / "vault"), **world.no_model()) as bot:
        assert await bot.exit_code() == 2
    assert [line for line in bot.lines if " ERROR " in line] == [
        line for line in bot.lines if f"the notes folder {tmp_path / 'vault'} does not exist" in line]
    assert "Traceback" not in bot.log


async def test_a_chroma_server_that_starts_late_is_waited_for(world, tmp_path):
    """At boot the Chroma server (ORACLE_CHROMA_URL) may answer after the bot starts: the bot waits
    for it as for Discord, then serves, instead of exiting 2 into a unit that will not restart it."""
    from testing.chroma_server import ChromaServer

    port, stored = free_port(), tmp_path / "chroma-server"
    env = {**world.no_model(), "ORACLE_DATA_DIR": str(tmp_path / "data"), "ORACLE_CHROMA_URL": f"http://127.0.0.1:{port}"}
    with await asyncio.to_thread(ChromaServer, stored, port=port):
        ingest = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.fakes.hashed_cli", "ingest", cwd=REPO,
            env=world.env("http://127.0.0.1:9/api/v10", "ws://127.0.0.1:9/", **env),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(ingest.communicate(), 300)
        assert ingest.returncode == 0, err.decode()[-2000:]
    async with FakeDiscord() as fake, bot_process(world, fake.api_url, fake.ws_url,
                                                   DISCORD_GUILD_ID=str(fake.guild_id), **env) as bot:
        first = await bot.wait_for_line("does not answer")
        assert f"the Chroma server at http://127.0.0.1:{port} does not answer" in first
        assert "trying again in 2 s" in first
        await bot.wait_for_line("trying again in 4 s", 30)
        with await asyncio.to_thread(ChromaServer, stored, port=port):
            await ready(fake, bot)
            bot.process.send_signal(signal.SIGTERM)
            assert await bot.exit_code() == 0, bot.log[-3000:]
    assert "Traceback" not in bot.log, bot.log[-3000:]

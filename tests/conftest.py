"""Shared fixtures: the real bundled model (loaded once), a deterministic stand-in for it, campaigns
ingested once per session and copied per test, settings in temporary folders, a fake Ollama.

The folders mirror the code: notes/, index/, retrieve/ and answer/ for the core's layers, bot/ for the
Discord layer (and the fake Discord it runs against), secrets/ for the secrets kept from players; the
tests that cross every layer (bad input, faults, kills, load, eval, layers, the context window, the
base modules) sit here at the top. The folders have no `__init__.py`: every test file's name must be
unique, and a folder named like a package (bot/, secrets/) never shadows that package, because a
folder without `__init__.py` yields to a real module of the same name.

The markers (pyproject.toml): a test is `integration` when it loads the real embedding model. Tests
that take it through a fixture (`embedder`, or any fixture built on it: `open_index`,
`real_mini_campaign`, the module campaigns of the retrieval and secrets tests...) are marked here,
at collection, from their fixture closure (`REAL_MODEL_FIXTURES`); a test that loads it another
way (the command line in process or in a subprocess) carries the marker itself, and one that loads
it in this process unmarked fails (`_model_loads_only_when_marked`). A test that judges no retrieval
takes `quick_embedder` (tests/fakes/embedder.py) and stays in the quick suite.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import socket
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from bench.common import EVAL_DIR
from oracle.index import embed as embed_module
from oracle.index.embed import Embedder
from oracle.index.index import Index
from oracle.index.ingest import ingest
from oracle.settings import Settings
from oracle.types import IngestReport
from testing.ollama_server import FakeOllama
from tests.fakes import hashed_cli
from tests.fakes.embedder import HashEmbedder

REPO = Path(__file__).resolve().parent.parent
SAMPLE_NOTES = REPO / "notes"


# The shared evaluation corpora, from the one setting the benchmarks read (ORACLE_EVAL_DIR, else beside
# the checkout as CI lays it out). Tests that need them fail when they are missing: they are not optional.
SHARED_EVAL = EVAL_DIR


def request_kind(request: dict) -> str:
    """annotate | rerank | answer: what the Oracle asked in an /api/chat request, from its `format`."""
    fmt = request.get("format")
    if isinstance(fmt, dict) and "summary" in fmt.get("properties", {}):
        return "annotate"
    if isinstance(fmt, dict) and "best" in fmt.get("properties", {}):
        return "rerank"
    assert fmt is None, fmt
    return "answer"


# Bound and never listening, for as long as the tests run: a port only picked and let go could be
# bound by another worker's fake Ollama meanwhile, which then answered (seen beside a CPU burner).
_RESERVED: list[socket.socket] = []


def closed_port_url() -> str:
    """An address where nothing listens: connection refused, at once."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _RESERVED.append(s)
    return f"http://127.0.0.1:{s.getsockname()[1]}"


# ---------------------------------------------------------------------------------------------
# The markers


# Fixtures that load the real model; any test whose fixture closure holds one is `integration`.
REAL_MODEL_FIXTURES = frozenset({"embedder", "multilingual_model"})

# The files that take longest (`--durations`), longest first. xdist hands out whole files
# (`--dist loadfile`) in collection order (`--no-loadscope-reorder`): started first, the long ones do
# not end the run alone on one worker while the others wait. Only the order changes: a file's tests
# stay together and in their order.
LONGEST_FIRST = (  # measured on two cores, the whole suite on three workers (CONTRIBUTING.md)
    "tests/answer/test_deadline.py",  # about a minute: deadlines of 30 s waited out
    "tests/bot/test_service.py",  # a bot process per test
    "tests/index/test_worker.py",
    "tests/secrets/test_adversary.py",
    "tests/answer/test_ask.py",
    "tests/test_kill.py",
    "tests/test_eval_answers.py",
    "tests/test_eval.py",
    "tests/test_watch.py",
    "tests/bot/test_bot.py",
    "tests/secrets/test_gm_vault.py",
    "tests/index/test_vectors.py",
    "tests/bot/test_table.py",
    "tests/test_processes.py",
    "tests/bot/test_several_campaigns.py",
    "tests/index/test_query_encoder.py",
    "tests/bot/test_bot_deadline.py",
    "tests/index/test_ingest.py",
    "tests/retrieve/test_search.py",
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: a worker per core and one more. Much of the suite waits (on the fakes' delays and
    deadlines, on processes starting), so a third worker on two cores took the quick suite from about
    110 s to 90 s and the integration tests from 415 s to 377 s; a fourth gained nothing. A file is
    never split between workers (`--dist loadfile`): named files get a worker each at most, and one
    file or test runs in this process, as it would without xdist."""
    workers = len(os.sched_getaffinity(0)) + 1
    named = config.option.file_or_dir or []
    if named and all(arg.split("::")[0].endswith(".py") for arg in named):
        workers = min(workers, len({arg.split("::")[0] for arg in named}))
    return 0 if workers < 2 else workers


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if REAL_MODEL_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("integration") is None:
            item.add_marker(pytest.mark.integration)
    rank = {path: n for n, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable


_real_loads = [0]  # real models built in this process
_real_init = Embedder.__init__


def _counting_init(self, *args, **kwargs) -> None:
    if type(self) is Embedder:
        _real_loads[0] += 1
    _real_init(self, *args, **kwargs)


Embedder.__init__ = _counting_init  # type: ignore[method-assign]  # counts, changes nothing
assert embed_module.Embedder is Embedder


@pytest.fixture(autouse=True)
def _model_loads_only_when_marked(request):
    """A test that loads the real model in this process without the `integration` marker fails:
    the quick suite (`-m "not slow and not integration"`) must never load it."""
    before = _real_loads[0]
    yield
    if _real_loads[0] != before and request.node.get_closest_marker("integration") is None:
        pytest.fail("this test loaded the real embedding model without the `integration` marker: take the "
                    "`embedder` fixture, or `quick_embedder` if it judges no retrieval, or mark it", pytrace=False)


# ---------------------------------------------------------------------------------------------
# The embedding models


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real bundled model, loaded once per process; its tests are `integration`."""
    return Embedder()


@pytest.fixture(scope="session")
def multilingual_model(tmp_path_factory) -> Path:
    """A small multilingual model built and trained here (tests/fakes/multilingual_model.py), once
    per process: its folder, for ORACLE_EMBED_MODEL. Its tests are `integration`."""
    from tests.fakes.multilingual_model import build

    return build(tmp_path_factory.mktemp("multilingual") / "multilingual-model")


@pytest.fixture(scope="session")
def quick_embedder() -> HashEmbedder:
    """The deterministic stand-in (tests/fakes/embedder.py): for tests that judge no retrieval."""
    return HashEmbedder()


@pytest.fixture
def quick_command_line(monkeypatch) -> None:
    """The command line run in this process (`oracle.cli.main`) loads the stand-in instead of the
    model, as `python -m tests.fakes.hashed_cli` does in a process of its own."""
    for module in hashed_cli.LOADERS:
        monkeypatch.setattr(module, "load_embedder", hashed_cli.load_stand_in)


@pytest.fixture
def make_settings(tmp_path):
    """`quick_settings` with the test's own data folder and no Ollama (a closed port) unless told."""

    def make(notes: Path, **overrides) -> Settings:
        return quick_settings(notes, tmp_path / "data", closed_port_url(), **overrides)

    return make


@pytest_asyncio.fixture
async def fake_ollama():
    async with FakeOllama(models=["qwen2.5:14b"]) as fake:
        yield fake


def _index_opener(model: Embedder):
    opened: list[Index] = []

    def open_(settings: Settings) -> Index:
        index = Index(settings, embedder=model)
        opened.append(index)
        return index

    return opened, open_


@pytest_asyncio.fixture
async def open_index(embedder):
    """Open an Index sharing the session's real model; closed at the end of the test."""
    opened, open_ = _index_opener(embedder)
    yield open_
    for index in opened:
        await index.close()


@pytest_asyncio.fixture
async def open_quick_index(quick_embedder):
    """`open_index` with the deterministic stand-in of the model, for tests that judge no retrieval."""
    opened, open_ = _index_opener(quick_embedder)
    yield open_
    for index in opened:
        await index.close()


def quick_settings(notes: Path, data: Path, ollama_host: str, /, **overrides) -> Settings:
    """A campaign's settings for a test: no `.env` read, against a fake Ollama, with timeouts short
    enough for a failing test; `overrides` win."""
    values = {"notes_dir": notes, "data_dir": data, "ollama_host": ollama_host, "ollama_probe_timeout": 2.0,
              "ollama_timeout": 10.0, "answer_timeout": 10.0, "first_words": 10.0}
    return Settings(_env_file=None, **(values | overrides))


def write_notes(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
    return root


# A campaigns file of two campaigns, one Discord table written as a table and one as dotted keys
# (tests/test_campaigns.py reads it as the core does, tests/bot/test_places.py as the bot does).
TWO_CAMPAIGNS = """
    # Two tables, one server.
    [campaigns.tuesday]
    notes = "notes/tuesday"
    data = "var/tuesday"
    model = "qwen2.5:7b"

    [campaigns.tuesday.discord]
    channels = [1234, 5678]
    gm_roles = ["GM", "dm"]
    gm_channels = [9012]
    announce_channel = 4444

    [campaigns.friday]
    notes = "{friday}"
    discord.channels = [
        2222,
        3333,
    ]
    discord.gm_roles = []         # run from the command line only
"""


MINI_CAMPAIGN = {
    "sessions/campaign-log.md": """
        # The Ember Road — log

        ## Session 1 — The Lantern Market
        The party met Brother Aldous, the Candle Monk, in the Lantern Market of Greyhaven.
        Aldous sold [[Mirela_Vane|Mirela]] a brass compass that always points at the drowned bell.
        %% SECRET-COMPASS: the compass belongs to the Hollow King %%

        **Session 2**
        Mirela and Teodric rode north to the Saltmarsh. Captain Dunstan Vale ambushed them at the ford.
        Back in session 1 the monk had warned them about Vale.

        # Sesión 3 — El puente
        The party crossed the Weeping Bridge. Teodric's half-elf cousin joined: "call me Pip".
        > [!secret] What Pip hides
        > SECRET-PIP works for Dunstan Vale.
    """,
    "sessions/Session 4.md": """
        Old Wick lit every candle in the chapel while Mirela read the Saltmarsh ledger (entry 4:12).
        The ledger named the Hollow King's tax collector.
    """,
    "sheets/Mirela_Vane.md": """
        ---
        aliases: [Mira, the Compass Witch]
        tags: [pc]
        ---
        # Mirela Vane
        A wandering cartographer who trusts maps more than people.
    """,
    "npcs/Brother_Aldous.md": """
        ---
        aliases: [the Candle Monk, Old Wick]
        ---
        An elderly monk of the chapel of Greyhaven.
    """,
    "world/GODS.md": """
        # Gods of the Ember Road
        The Drowned Bell rings for the dead of the Saltmarsh.
    """,
    "gm/Plans.md": """
        SECRET-PLANS: Dunstan Vale will betray the Hollow King in act two.
    """,
    "world/The_True_Heir.md": """
        ---
        visibility: gm
        aliases: [the Lost Prince]
        ---
        SECRET-HEIR: Pip is the lost prince.
    """,
    ".obsidian/workspace.md": "ignored",
    "map.png": b"\x89PNG\r\n\x1a\n\x00\x00",
}


@pytest.fixture
def mini_notes(tmp_path) -> Path:
    return write_notes(tmp_path / "notes", MINI_CAMPAIGN)


# ---------------------------------------------------------------------------------------------
# Campaigns ingested once per session (per xdist worker), copied into each test's tmp_path


@dataclass(frozen=True)
class Ingested:
    """A campaign's notes and data folders, ingested, and the report of that ingest."""

    notes: Path
    data: Path
    report: IngestReport


class IngestedCampaigns:
    """Each (campaign, model, annotated) ingested at its first use in the session, then only copied.

    `annotated`: the ingest ran against a fake Ollama with its default responder (every chunk
    annotated, as a test ingesting against the `fake_ollama` fixture gets); else against a closed
    port (every annotation missing, as with `make_settings`' default). The stores are closed before
    anything is copied."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._done: dict[tuple[str, str, bool], Ingested] = {}
        self._lock = threading.Lock()

    def get(self, name: str, files: dict[str, str | bytes], model: Embedder, *, annotated: bool) -> Ingested:
        key = (name, model.fingerprint, annotated)
        with self._lock:
            if key not in self._done:
                where = self.root / f"{name}-{model.fingerprint}-{'annotated' if annotated else 'bare'}"
                notes = write_notes(where / "notes", files)
                # Its own thread and event loop: a session fixture may be set up inside a test's loop.
                result: list = []
                thread = threading.Thread(target=lambda: result.append(
                    _run_catching(_ingest_once(notes, where / "data", model, annotated))))
                thread.start()
                thread.join()
                if isinstance(result[0], BaseException):
                    raise result[0]
                self._done[key] = Ingested(notes, where / "data", result[0])
            return self._done[key]

    def copy(self, name: str, files: dict[str, str | bytes], model: Embedder, into: Path, *, annotated: bool) -> Ingested:
        """The campaign's notes and data, copied to `into`/notes and `into`/data."""
        done = self.get(name, files, model, annotated=annotated)
        notes = Path(shutil.copytree(done.notes, into / "notes", symlinks=True))
        data = Path(shutil.copytree(done.data, into / "data", symlinks=True))
        return Ingested(notes, data, done.report)


def _run_catching(coro) -> object:
    try:
        return asyncio.run(coro)
    except BaseException as exc:  # handed to the test's thread
        return exc


async def _ingest_once(notes: Path, data: Path, model: Embedder, annotated: bool) -> IngestReport:
    async def run(host: str) -> IngestReport:
        index = Index(quick_settings(notes, data, host), embedder=model)
        try:
            return await ingest(index)
        finally:
            await index.close()

    if not annotated:
        return await run(closed_port_url())
    async with FakeOllama(models=["qwen2.5:14b"]) as fake:
        return await run(fake.url)


@pytest.fixture(scope="session")
def ingested_campaigns(tmp_path_factory) -> IngestedCampaigns:
    return IngestedCampaigns(tmp_path_factory.mktemp("ingested"))


@pytest.fixture
def quick_mini_campaign(ingested_campaigns, quick_embedder, tmp_path) -> Ingested:
    """The mini campaign ingested by the stand-in model (Ollama down: no annotation), copied to
    tmp_path/notes and tmp_path/data, where `make_settings` looks; open it with `open_quick_index`."""
    return ingested_campaigns.copy("mini", MINI_CAMPAIGN, quick_embedder, tmp_path, annotated=False)


@pytest.fixture
def quick_mini_campaign_annotated(ingested_campaigns, quick_embedder, tmp_path) -> Ingested:
    """`quick_mini_campaign`, ingested against a fake Ollama: every chunk annotated by its default
    responder, as an ingest against `fake_ollama` leaves it."""
    return ingested_campaigns.copy("mini", MINI_CAMPAIGN, quick_embedder, tmp_path, annotated=True)


@pytest.fixture
def real_mini_campaign(ingested_campaigns, embedder, tmp_path) -> Ingested:
    """The mini campaign ingested by the real model (Ollama down), copied like `quick_mini_campaign`;
    open it with `open_index`."""
    return ingested_campaigns.copy("mini", MINI_CAMPAIGN, embedder, tmp_path, annotated=False)

"""Shared fixtures: the real bundled model (loaded once), settings in temporary folders, a fake Ollama.

The folders mirror the code: notes/, index/, retrieve/ and answer/ for the core's layers, bot/ for the
Discord layer (and the fake Discord it runs against), secrets/ for the secrets kept from players; the
tests that cross every layer (bad input, faults, kills, load, eval, layers, the context window, the
base modules) sit here at the top. The folders have no `__init__.py`: every test file's name must be
unique, and a folder named like a package (bot/, secrets/) never shadows that package, because a
folder without `__init__.py` yields to a real module of the same name.
"""
from __future__ import annotations

import socket
import textwrap
from pathlib import Path

import pytest
import pytest_asyncio

from oracle.index.embed import Embedder
from oracle.index.index import Index
from oracle.settings import Settings
from tests.fakes.ollama_server import FakeOllama

REPO = Path(__file__).resolve().parent.parent
SAMPLE_NOTES = REPO / "notes"


def _shared_eval() -> Path:
    """The shared evaluation corpora: beside the checkout (as CI lays it out), else where the
    workplace keeps them. Tests that need them fail when neither holds them: they are not optional."""
    for root in (REPO.parent / "shared", Path("/work/shared")):
        if (root / "eval").is_dir():
            return root / "eval"
    return REPO.parent / "shared" / "eval"


SHARED_EVAL = _shared_eval()


def request_kind(request: dict) -> str:
    """annotate | rerank | answer: what the Oracle asked in an /api/chat request, from its `format`."""
    fmt = request.get("format")
    if isinstance(fmt, dict) and "summary" in fmt.get("properties", {}):
        return "annotate"
    if isinstance(fmt, dict) and "best" in fmt.get("properties", {}):
        return "rerank"
    assert fmt is None, fmt
    return "answer"


def closed_port_url() -> str:
    """An address where nothing listens: connection refused, at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture
def make_settings(tmp_path):
    def make(notes: Path, **overrides) -> Settings:
        values = {
            "notes_dir": notes,
            "data_dir": tmp_path / "data",
            "ollama_host": closed_port_url(),
            "ollama_probe_timeout": 2.0,
            "ollama_timeout": 10.0,
        }
        values.update(overrides)
        return Settings(_env_file=None, **values)

    return make


@pytest_asyncio.fixture
async def fake_ollama():
    async with FakeOllama(models=["qwen2.5:14b"]) as fake:
        yield fake


@pytest_asyncio.fixture
async def open_index(embedder):
    """Open an Index sharing the session's model; closed at the end of the test."""
    opened: list[Index] = []

    def open_(settings: Settings) -> Index:
        index = Index(settings, embedder=embedder)
        opened.append(index)
        return index

    yield open_
    for index in opened:
        await index.close()


def quick_settings(notes: Path, data: Path, ollama_host: str, **overrides) -> Settings:
    """A campaign's settings against a fake Ollama, with timeouts short enough for a failing test."""
    return Settings(
        _env_file=None, notes_dir=notes, data_dir=data, ollama_host=ollama_host, ollama_probe_timeout=2.0,
        ollama_timeout=10.0, answer_timeout=10.0, first_words=10.0, **overrides,
    )


def write_notes(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content).lstrip("\n"), encoding="utf-8")
    return root


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

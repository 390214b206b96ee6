"""Several campaigns in one process: one model and one Ollama client shared, an index each, secrets
that never cross, and a reingest of one campaign while another answers. Real SQLite, Chroma and model."""
from __future__ import annotations

import asyncio

import pytest

from oracle.campaigns import Campaign, Campaigns, CampaignsError
from oracle.index.ingest import ingest
from oracle.index.library import Library
from oracle.index.lock import IngestBusy
from oracle.oracle import Oracle
from oracle.types import Clearance
from tests.conftest import MINI_CAMPAIGN, write_notes

# Campaign B: its own world, its own secret.
HARBOUR = {
    "sessions/Session 1.md": """
        The crew of the Gull docked at Port Vessery and sold salted eel to the harbourmaster Odile Marsh.
    """,
    "sessions/Session 2.md": """
        A storm drove the Gull onto the Teeth. Captain Ysolde Brann lost two fingers to the anchor chain.
    """,
    "sessions/Session 3.md": """
        The crew found a drowned lighthouse keeper's journal describing a green flame under the water.
        %% SECRET-KRAKEN: the green flame is the kraken's eye %%
    """,
    "npcs/Odile_Marsh.md": """
        ---
        aliases: [the Harbourmaster]
        ---
        Odile Marsh keeps the tide tables of Port Vessery.
    """,
}

# (question, the label its answer must cite) for campaign B.
B_QUESTIONS = [
    ("Who lost two fingers to the anchor chain?", "Session 2"),
    ("Who bought the salted eel at Port Vessery?", "Session 1"),
    ("What did the lighthouse keeper's journal describe?", "Session 3"),
    ("What does Odile Marsh keep?", "Sheet: Odile_Marsh"),
]
SECRETS_OF_A = ["SECRET-COMPASS", "SECRET-PIP", "SECRET-PLANS", "SECRET-HEIR"]


@pytest.fixture
def two_campaigns(tmp_path):
    a = write_notes(tmp_path / "ember", MINI_CAMPAIGN)
    b = write_notes(tmp_path / "harbour", HARBOUR)
    return Campaigns((
        Campaign("ember", a, tmp_path / "var" / "ember"),
        Campaign("harbour", b, tmp_path / "var" / "harbour", model="qwen2.5:7b"),
    ), source=tmp_path / "campaigns.toml")


async def open_library(two_campaigns, make_settings, model, tmp_path):
    settings = make_settings(tmp_path / "unused", reranker="none")
    return await Library.open(settings, two_campaigns, embedder=model, worker=False)


@pytest.fixture
async def library(two_campaigns, make_settings, embedder, tmp_path):
    """Over the real model: for the tests that judge what a search finds."""
    library = await open_library(two_campaigns, make_settings, embedder, tmp_path)
    yield library
    await library.close()


@pytest.fixture
async def quick_library(two_campaigns, make_settings, quick_embedder, tmp_path):
    """Over the deterministic stand-in of the model: for the tests that judge no retrieval."""
    library = await open_library(two_campaigns, make_settings, quick_embedder, tmp_path)
    yield library
    await library.close()


def texts(retrieval) -> str:
    hits = [h for hits in retrieval.paths.values() for h in hits] + retrieval.fused + retrieval.linked
    return " ".join(h.chunk.text for h in hits)


async def test_campaigns_share_the_model_and_ollama_but_not_the_index(quick_library):
    library = quick_library
    ember, harbour = library.index("ember"), library.index("harbour")
    assert await ember.embedder() is await harbour.embedder()
    assert ("qwen2.5:14b", "qwen2.5:7b") == (ember.llm.model, harbour.llm.model)
    assert ember.llm._client is harbour.llm._client  # one Ollama client, each campaign its own model
    assert Oracle(ember).llm_slots is Oracle(harbour).llm_slots is library.llm_slots
    assert Oracle(ember).search_slots is Oracle(harbour).search_slots is library.search_slots
    assert ember.settings.sqlite_path != harbour.settings.sqlite_path
    assert library.index(Campaign("harbour", harbour.settings.notes_dir)) is harbour
    with pytest.raises(CampaignsError, match="no campaign 'sunday'.*ember, harbour"):
        library.index("sunday")


async def test_a_campaigns_secrets_never_reach_another_campaign(library):
    await asyncio.gather(ingest(library.index("ember")), ingest(library.index("harbour")))
    ember, harbour = Oracle(library.index("ember")), Oracle(library.index("harbour"))
    for question in ["Who will Dunstan Vale betray?", "Who is the lost prince?", "SECRET-PLANS SECRET-HEIR Pip"]:
        # Campaign B's game master (and so B's players) search B's index alone: nothing of A.
        b_gm = texts(await harbour.search(question, clearance=Clearance.GM))
        assert [] == [s for s in SECRETS_OF_A if s in b_gm]
        assert "Dunstan" not in b_gm and "Mirela" not in b_gm
        # A's players never read A's secrets; A's game master does (the check can fail).
        assert [] == [s for s in SECRETS_OF_A if s in texts(await ember.search(question, clearance=Clearance.PLAYER))]
    assert "SECRET-PLANS" in texts(await ember.search("Who will Dunstan Vale betray?", clearance=Clearance.GM))
    assert "SECRET-KRAKEN" not in texts(await ember.search("green flame kraken eye", clearance=Clearance.GM))
    assert "SECRET-KRAKEN" in texts(await harbour.search("green flame kraken eye", clearance=Clearance.GM))
    dossier = await harbour.dossiers.who("Dunstan Vale", clearance=Clearance.GM)
    assert dossier is None  # A's names are not in B's Compendium


async def test_a_reingest_of_one_campaign_while_another_answers_twenty_questions(library):
    await ingest(library.index("harbour"))
    harbour = Oracle(library.index("harbour"))
    asked = [B_QUESTIONS[i % len(B_QUESTIONS)] for i in range(20)]

    async def ask(question: str):
        return await harbour.ask(question)

    report, *answers = await asyncio.gather(
        ingest(library.index("ember"), by="the test"), *(ask(q) for q, _ in asked)
    )
    assert 7 == len(report.added)  # a full first ingest of A
    for (question, label), answer in zip(asked, answers, strict=False):
        cited = [c.label for c in answer.citations]
        assert label in cited, (question, cited)
        assert not any(s in answer.text for s in SECRETS_OF_A)
        assert all(c.path in {p for p in HARBOUR} for c in answer.citations), answer.citations


async def test_one_ingest_per_campaign_at_a_time_and_campaigns_side_by_side(quick_library):
    library = quick_library
    ember, harbour = library.index("ember"), library.index("harbour")
    results = await asyncio.gather(ingest(ember), ingest(ember), ingest(harbour), return_exceptions=True)
    busy = [r for r in results[:2] if isinstance(r, IngestBusy)]
    done = [r for r in results if not isinstance(r, BaseException)]
    assert (1, 2) == (len(busy), len(done)), results
    assert "an ingest is already running" in str(busy[0])

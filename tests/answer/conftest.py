"""The harbour campaign (harbour.py), ingested once per test module that asks for it, and its fake Ollama."""
from __future__ import annotations

import pytest
import pytest_asyncio

from oracle.index.index import Index
from oracle.index.ingest import ingest
from testing.ollama_server import FakeOllama
from tests.answer.harbour import HARBOUR, MODEL, Campaign, annotation_rows, chunk_rows, script, settings_for
from tests.conftest import write_notes


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def campaign(tmp_path_factory, quick_embedder):
    root = tmp_path_factory.mktemp("harbour")
    notes = write_notes(root / "notes", HARBOUR)
    async with FakeOllama(models=[MODEL]) as fake:  # on the module's loop, like every test here
        fake.responder = script()
        settings = settings_for(notes, root / "data", fake.url)
        index = Index(settings, embedder=quick_embedder)
        report = await ingest(index)
        assert (0, "") == (report.annotations_missing, report.annotation_note)
        yield Campaign(notes, root / "data", fake, index, chunk_rows(settings), annotation_rows(settings))
        await index.close()


@pytest.fixture
def fake(campaign) -> FakeOllama:
    """The module's fake, its recording cleared, answering annotations, rerank [1] and a plain answer."""
    campaign.fake.reset()
    campaign.fake.responder = script()
    return campaign.fake

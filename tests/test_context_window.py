"""No request the Oracle sends is cut by the server: a sweep of real questions over real campaigns.

The fake Ollama serves each request with its `num_ctx` (2,048 when it sets none), counts the prompt
with its own tokenizer, and cuts an oversized prompt from the front as the real runner does. Two
campaigns, each ingested once and answered end to end (embedded by the deterministic stand-in of the
model, tests/fakes/embedder.py: what is judged is every request's size, not which passages rank first):
- the sample campaign (`notes/`) with every question of its bank, at the default window;
- the first 30 sessions of the Critical Role log with the dev bank's questions about them, served by
  a model whose own context is 4,096 tokens, so the window is lowered and the prompt must shrink.
Every request (the ingest's annotations, each rerank, each answer) must carry the same `num_ctx`,
fit it with its reply budget, and leave the model loaded once.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import ollama
import pytest
import pytest_asyncio

from oracle.answer.budget import fit_answer_prompt
from oracle.answer.prompt import SYSTEM, Turn
from oracle.index.index import Index
from oracle.index.ingest import ingest
from oracle.oracle import Oracle
from testing.ollama_server import FakeModel, FakeOllama, tokenize
from tests.conftest import REPO, SAMPLE_NOTES, SHARED_EVAL, quick_settings
from tests.conftest import request_kind as kind

module_loop = pytest.mark.asyncio(loop_scope="module")

# Every test here reads one of two sweeps (an ingest, then every question of a bank): a few seconds
# each with the stand-in model, so the module is in the quick suite.

MODEL = "qwen2.5:14b"
CRD3_LOG = SHARED_EVAL / "crd3" / "notes" / "campaign-log.md"
CRD3_SESSIONS = 30  # the slice ingested (one real-embedder ingest of the whole log took minutes)


def bank(path: Path, last_session: int | None = None) -> list[dict]:
    questions = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if last_session is None:
        return questions
    return [q for q in questions
            if all(int(label.split()[-1]) <= last_session for label in q["relevant"])]


def history_of(question: dict) -> list[Turn]:
    """The bank's earlier questions, each with an answer as long as a real one, so history counts too."""
    turns = []
    for earlier in question.get("history", []):
        turns += [Turn("user", earlier), Turn("assistant", "An earlier answer from the notes. " * 40)]
    return turns


def cite_first(request: dict) -> str:
    """What the fake model answers: one claim citing the first note in full, or a plain refusal."""
    content = request["messages"][-1]["content"]
    start = content.find("\n\n---\n\n[")
    if start < 0:
        return "The notes do not say."
    label = content[start + 7 :].split("]", 1)[0]
    return f"The notes tell of it [{label}]."


def responder(request: dict):
    from testing.ollama_server import default_responder

    return cite_first(request) if kind(request) == "answer" and request.get("messages") else default_responder(request)


@dataclass
class Swept:
    fake: FakeOllama
    index: Index
    questions: list[dict]
    answers: list  # Answer per question, in order
    num_ctx: int


async def sweep(notes: Path, data: Path, questions: list[dict], embedder, model: FakeModel) -> Swept:
    fake = FakeOllama(models=[model])
    await fake.start()
    fake.responder = responder
    settings = quick_settings(notes, data, fake.url, model=MODEL, ollama_timeout=30.0, first_words=30.0,
                              answer_timeout=30.0)
    index = Index(settings, embedder=embedder)
    report = await ingest(index)
    assert report.annotations_missing == 0
    oracle = Oracle(index)
    answers = [await oracle.ask(q["question"], history=history_of(q)) for q in questions]
    window = await index.llm.window()
    return Swept(fake, index, questions, answers, window.num_ctx)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sample(tmp_path_factory, quick_embedder):
    swept = await sweep(SAMPLE_NOTES, tmp_path_factory.mktemp("sample") / "data", bank(SAMPLE_NOTES / "questions.jsonl"),
                        quick_embedder, FakeModel(MODEL))
    yield swept
    await swept.index.close()
    await swept.fake.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def crd3(tmp_path_factory, quick_embedder):
    if not CRD3_LOG.exists():
        pytest.skip(f"{CRD3_LOG} is not on this machine")
    root = tmp_path_factory.mktemp("crd3")
    log = CRD3_LOG.read_text(encoding="utf-8")
    (root / "notes").mkdir()
    (root / "notes" / "campaign-log.md").write_text(log.split(f"\n## Session {CRD3_SESSIONS + 1} ")[0], encoding="utf-8")
    questions = bank(REPO / "bench" / "data" / "crd3_dev.jsonl", CRD3_SESSIONS)
    swept = await sweep(root / "notes", root / "data", questions, quick_embedder, FakeModel(MODEL, context_length=4096))
    yield swept
    await swept.index.close()
    await swept.fake.stop()


@pytest.fixture(params=["sample", "crd3"])
def swept(request) -> Swept:
    return request.getfixturevalue(request.param)


@module_loop
async def test_the_sweep_asked_every_question_and_the_model_answered(swept):
    assert len(swept.questions) >= (50 if swept.index.settings.notes_dir == SAMPLE_NOTES else 15)
    modes = [a.mode for a in swept.answers]
    assert modes.count("llm") == len(modes), [(q["id"], a.reason) for q, a in zip(swept.questions, swept.answers, strict=False)
                                              if a.mode != "llm"]
    kinds = [kind(r) for r in swept.fake.chat_requests()]
    assert kinds.count("answer") == len(swept.questions)
    assert kinds.count("rerank") >= len(swept.questions) - 2 and kinds.count("annotate") > 10


@module_loop
async def test_no_request_was_cut_and_every_one_had_room_for_its_reply(swept):
    served = swept.fake.served()
    assert len(served) == len(swept.fake.chat_requests())
    assert swept.fake.truncations == []
    assert [s for s in served if not s.fits] == []
    assert all(s.prompt_tokens == s.evaluated for s in served)


@module_loop
async def test_every_request_carried_the_same_window_and_the_model_loaded_once(swept):
    windows = {json.dumps(r.get("options", {}).get("num_ctx")) for r in swept.fake.chat_requests()}
    assert windows == {str(swept.num_ctx)}
    assert swept.fake.loads == [(MODEL, swept.num_ctx)]
    assert all(r["options"]["num_predict"] > 0 for r in swept.fake.chat_requests())


@module_loop
async def test_the_estimate_was_never_below_what_the_server_counted(swept):
    for question, answer in zip(swept.questions, swept.answers, strict=False):
        tokens = answer.trace.tokens.to_json()
        assert tokens["num_ctx"] == swept.num_ctx
        assert tokens["total"] <= tokens["budget"] == swept.num_ctx - swept.index.settings.answer_tokens
        assert tokens["prompt_eval_count"] <= tokens["total"], question["id"]
        assert tokens["eval_count"] >= 1


@module_loop
async def test_a_model_with_a_small_context_lowers_the_window_and_the_prompts_shrink(crd3):
    window = await crd3.index.llm.window()
    assert (window.num_ctx, window.configured, window.model_limit) == (4096, 16384, 4096)
    assert window.reason == f"lowered from ORACLE_NUM_CTX=16384: {MODEL} serves at most 4096 tokens"
    dropped = [a.trace.tokens.dropped for a in crd3.answers]
    assert any(d.headlines for d in dropped) and any(d.fragments for d in dropped)
    # What was dropped is not in the context the answer cites from.
    for answer in crd3.answers:
        kept = {c.label for c in answer.fragments}
        assert not kept & set(answer.trace.tokens.dropped.fragments)


@module_loop
async def test_the_same_prompt_without_num_ctx_loses_its_rules(crd3):
    """The check above can fail: unfitted, sent as Ollama's clients send by default, the prompt is cut."""
    oracle = Oracle(crd3.index)
    question = crd3.questions[0]["question"]
    selection = await oracle.select(await oracle.search(question))
    fitted = fit_answer_prompt(question, selection.context, [], num_ctx=100_000, reply_tokens=1024)
    async with FakeOllama(models=[MODEL]) as fake, ollama.AsyncClient(host=fake.url) as client:
        await client.chat(model=MODEL, messages=fitted.messages)

    [served] = fake.served()
    assert served.num_ctx == 2048 and served.truncated is not None
    assert " ".join(tokenize(SYSTEM)[:40]) not in served.seen  # the citation rules never reach the model
    assert served.seen.endswith(" ".join(tokenize(f"Question: {question}")) + " <|im_end|> \n <|im_start|> assistant \n")

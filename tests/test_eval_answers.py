"""`oracle eval --answers`: each answer-layer metric against hand-computed values, then the command
end to end over the sample bank, with the fake Ollama answering with citations from its context."""
from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from oracle.answer.budget import Dropped, PromptTokens
from oracle.answer.citations import Citation
from oracle.answer.context import Headline
from oracle.answer.results import Answer
from oracle.answer.trace import CitationRecord, Trace
from oracle.cli import main
from oracle.deadline import Deadline
from oracle.eval_answers import (
    AnswerRecord,
    abstains,
    percentile,
    record,
    summarise_answers,
    supported,
)
from oracle.eval_bank import Question
from oracle.types import Chunk
from testing.ollama_server import FakeOllama, cited_responder
from tests.conftest import REPO, request_kind


def chunk(label: str, path: str, text: str) -> Chunk:
    return Chunk(label, path, label, "session", 1, 1, label, 1, 1, text, "h")


MARKET = chunk("Session 3", "sessions/log.md", "Vex bought a brass lantern from a blind peddler at the Night Market.")
PELL = chunk("Sheet: Pell", "sheets/Pell.md", "Pell keeps a clockwork owl named Tock.")
CHAPEL = chunk("Session 9", "sessions/log.md", "The whole text of session 9, which the model never saw.")


def answer(text: str, mode: str = "llm", trace: dict | None = None, citations: tuple = ()) -> Answer:
    return Answer("q", text, mode, "", citations, (MARKET, PELL), (Headline(CHAPEL, "The party found a coat in a chapel."),),
                  Trace(mode, "", **(trace or {})))  # fmt: skip


@pytest.mark.parametrize(
    "claim, sources, verdict",
    [
        ("Vex bought the lantern from a blind peddler [Session 3].", [MARKET.text], True),  # all 5 key terms
        # {pell, owl, tock, sing, opera, night, market, everi, winter}: 3 of 9 in the cited sheet; the
        # Night Market is in another fragment, which it does not cite.
        ("Pell's owl Tock sings opera at the Night Market every winter [Sheet: Pell].", [PELL.text], False),
        ("Pell's owl Tock sings opera at the Night Market [Sheet: Pell].", [PELL.text, MARKET.text], True),
        ("Tock the owl sings [Sheet: Pell].", [PELL.text], True),  # {tock, owl, sing}: 2 of 3
        ("Tock the dragon sings opera [Sheet: Pell].", [PELL.text], False),  # {tock, dragon, sing, opera}: 1 of 4
        ("Tock is a dragon of Pell [Sheet: Pell].", [PELL.text], True),  # {tock, dragon, pell}: 2 of 3
        ("It was so [Sheet: Pell].", [PELL.text], None),  # no key term: not a claim
    ],
)
def test_a_claim_is_supported_when_its_cited_text_holds_half_its_key_terms(claim, sources, verdict):
    assert verdict is supported(claim, sources)


@pytest.mark.parametrize(
    "text, mode, expected",
    [
        ("The notes do not say who her mother was.", "llm", True),
        ("The notes don't mention Sefa's mother.", "llm", True),
        ("There is nothing in the notes about it.", "llm", True),
        ("The notes hold nothing on that.", "not_found", True),
        ("The notes say the archduke woke [Session 32].", "llm", False),
        ("Sefa's notes do not burn [Session 3].", "llm", False),
        ("The notes do not say. Here are passages.", "passages", False),  # passages answer with text
    ],
)
def test_abstention(text, mode, expected):
    assert expected is abstains(answer(text, mode))


def test_percentiles_are_nearest_rank():
    assert (20, 40, 10, 40) == (percentile([40, 10, 30, 20], 50), percentile([40, 10, 30, 20], 95),
                                percentile([40, 10, 30, 20], 1), percentile([40, 10, 30, 20], 100))  # fmt: skip
    assert (5, None) == (percentile([5], 95), percentile([], 50))


FULL = answer(
    "Vex bought the lantern from a blind peddler [Session 3]. Pell's owl Tock sings opera at the Night Market "
    "every winter [Sheet: Pell]. The coat was found in a chapel [Session 9]. Nobody knows where the peddler went now.",
    trace={
        "citations": CitationRecord([], ["Session 99", "Session 99"], 0),
        "tokens": PromptTokens(16384, 15360, 0, 0, 0, 0, 0, 900, Dropped([], [], None), prompt_eval_count=1000),
        "timings_ms": {"rerank": 120.0, "answer": 800.0, "first_words": 750.0},
    },
    citations=(
        Citation("Session 3", "sessions/log.md", 1, 1),
        Citation("Sheet: Pell", "sheets/Pell.md", 1, 1),
        Citation("Session 9", "sessions/log.md", 1, 1),
    ),
)


def test_a_record_counts_citations_claims_gold_and_costs():
    question = Question("q1", "Who sold Vex the lantern?", ("Session 3", "sheets/Pell.md", "Session 4"), "entity",
                        answer="a blind peddler")  # fmt: skip
    # Claims: the peddler (supported by Session 3), the owl (3 of 9 terms: not), the coat (supported by
    # the headline of Session 9); "Nobody knows …" cites nothing. Gold: Session 3 by label, the sheet
    # by path, Session 4 not cited: 2 of 3. "Session 99" twice is one unknown label.
    assert AnswerRecord(
        "q1", "entity", True, "llm", False, 3, 1, 3, 2, 1, 2 / 3, 1.0, 900, 1000, 120.0, 800.0, 750.0, False
    ) == record(question, FULL)
    passages = answer("… passages …", "passages", {"timings_ms": {"rerank": 40.0}}, FULL.citations[:1])
    assert AnswerRecord(
        "q1", "entity", True, "passages", False, 0, 0, 0, 0, 0, 1 / 3, 0.0, None, None, 40.0, None, None, False
    ) == record(question, passages)  # citations and claims count model answers only
    # The passages because the model did not start answering in time (or was still loading then): late.
    late = replace(passages, reason=Deadline(30, 20, 300).missed, cause="late")
    assert record(question, late).late
    assert record(question, replace(late, cause="loading")).late
    assert not record(question, replace(late, cause="unavailable")).late


def rec(answerable, mode, abstained, cited=0, unknown=0, claims=0, backed=0, uncited=0, gold=None, terms=None,
        tokens=None, evals=None, rerank=None, answer_ms=None, first_words=None,
        late=False) -> AnswerRecord:  # fmt: skip
    return AnswerRecord("q", "k", answerable, mode, abstained, cited, unknown, claims, backed, uncited, gold, terms,
                        tokens, evals, rerank, answer_ms, first_words, late)  # fmt: skip


def test_the_summary_of_four_answers():
    records = [
        rec(True, "llm", False, 3, 1, 3, 2, 1, 2 / 3, 1.0, 900, 1000, 120.0, 800.0, 600.0),
        rec(True, "passages", False, gold=1.0, terms=0.5, rerank=40.0, answer_ms=10000.0, late=True),
        rec(False, "llm", True, uncited=1, tokens=500, evals=600, rerank=100.0, answer_ms=300.0, first_words=300.0),
        rec(False, "not_found", True),
    ]
    result = summarise_answers(records)
    del result["per_question"]
    assert {
        "questions": 4,
        "answerable": 2,
        "unanswerable": 2,
        "modes": {"llm": 0.5, "passages": 0.25, "not_found": 0.25},
        "citation_validity": 0.75,  # 3 valid of 4
        "citations": {"valid": 3, "unknown": 1},
        "citation_support": 0.6667,
        "claims": {"cited": 3, "supported": 2},
        "gold_citation_recall": 0.8333,  # (2/3 + 1) / 2
        "correct_abstention": 1.0,
        "false_abstention": 0.0,
        "uncited_sentences": {"total": 2, "per_answer": 1.0},  # over the 2 model answers
        "tokens_per_request": {
            "total": {"n": 2, "mean": 700, "p50": 500, "p95": 900},
            "prompt_eval_count": {"n": 2, "mean": 800, "p50": 600, "p95": 1000},
        },
        "latency_ms": {
            "rerank": {"n": 3, "mean": 86.7, "p50": 100.0, "p95": 120.0},
            "answer": {"n": 3, "mean": 3700.0, "p50": 800.0, "p95": 10000.0},
            "first_words": {"n": 2, "mean": 450.0, "p50": 300.0, "p95": 600.0},
        },
        "late": 0.25,  # the passages: no first words within the deadline
        "answers": 2,
        "answer_shown": 0.5,
        "answer_terms_shown": 0.75,
    } == result


def test_without_token_counts_or_answers_the_metrics_say_none():
    result = summarise_answers([rec(False, "not_found", True)])
    assert (None, None) == (result["tokens_per_request"]["total"], result["tokens_per_request"]["prompt_eval_count"])
    assert (None, None, None, None) == (result["citation_validity"], result["citation_support"],
                                        result["gold_citation_recall"], result["answer_shown"])  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The command, end to end, over the sample bank

SCRIPTED = {
    # unanswerable: the one correct abstention
    "What is the name of Sefa's mother?": "The notes do not say.",
    # answerable: the one false abstention
    "What did Abbot Fenwick Tallow give the wedding guests who lost their voices?": "The notes do not say anything about that.",
    # the one unknown label, removed from what is shown: its sentence is left uncited
    "What did we find in the chapel on Knell Isle?": "The coat was found by the harbour wall [Session 99].",
}
UNSUPPORTED = "What is Pell Ambergast's familiar?"


def scripted(request: dict):
    """The fake's cited answers, except four questions answered by hand."""
    if request_kind(request) == "answer":
        user = request["messages"][-1]["content"]
        question = user.rsplit("Question: ", 1)[1]
        if question in SCRIPTED:
            return SCRIPTED[question]
        if question == UNSUPPORTED:  # cites the first fragment for a claim it does not hold
            first = re.search(r"^\[([^\]\n]+)\] \(", user, re.M)[1]
            return f"Zog the purple dragon sings opera [{first}]."
    return cited_responder(request)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The sample campaign's index, built (and annotated by the fake) by the first test that runs."""
    return tmp_path_factory.mktemp("answers") / "data"


@pytest.mark.integration  # the command line loads the real model
@pytest.mark.slow  # ingests, annotates and answers the whole sample bank: about 30 s
def test_eval_answers_over_the_sample_bank_against_the_fake(data, monkeypatch, capsys):
    with FakeOllama(models=["qwen2.5:14b"], responder=scripted) as fake:
        monkeypatch.setenv("OLLAMA_HOST", fake.url)
        code = main(["eval", str(REPO / "notes" / "questions.jsonl"), "--notes", str(REPO / "notes"),
                     "--data", str(data), "--answers", "--json"])  # fmt: skip
        stdout = capsys.readouterr().out
    assert 0 == code
    result = json.loads(stdout)
    rows = {r["id"]: r for r in result["per_question"]}

    assert {
        "questions", "answerable", "unanswerable", "modes", "citation_validity", "citations", "citation_support",
        "claims", "gold_citation_recall", "correct_abstention", "false_abstention", "uncited_sentences",
        "tokens_per_request", "latency_ms", "late", "answers", "answer_shown", "answer_terms_shown", "per_question",
        "model",
    } == set(result)  # fmt: skip
    assert (52, 45, 7, 45, "qwen2.5:14b") == (
        result["questions"], result["answerable"], result["unanswerable"], result["answers"], result["model"])
    assert {"llm": 1.0, "passages": 0.0, "not_found": 0.0} == result["modes"]  # every question found passages

    # Every other answer quotes its fragments and cites them: all valid and supported.
    valid = result["citations"]["valid"]
    assert 1 == result["citations"]["unknown"]
    assert result["citation_validity"] == round(valid / (valid + 1), 4)
    assert (0, 1) == (rows["s-003"]["cited"], rows["s-003"]["unknown"])
    claims = result["claims"]["cited"]
    assert claims - 1 == result["claims"]["supported"]  # Zog
    assert (1, 0) == (rows["s-002"]["claims"], rows["s-002"]["supported"])
    assert (round(1 / 7, 4), round(1 / 45, 4)) == (result["correct_abstention"], result["false_abstention"])
    assert [("s-001", True), ("s-046", False)] == [(r["id"], r["answerable"]) for r in rows.values() if r["abstained"]]
    # "The notes do not say.", "… anything about that." and the harbour wall's sentence.
    assert {"total": 3, "per_answer": round(3 / 52, 4)} == result["uncited_sentences"]
    golds = [r["gold_recall"] for r in rows.values() if r["answerable"]]
    assert result["gold_citation_recall"] == round(sum(golds) / 45, 4)
    assert 0.0 == rows["s-001"]["gold_recall"]  # it cited nothing
    assert 52 == result["latency_ms"]["rerank"]["n"] == result["latency_ms"]["answer"]["n"]
    assert (52, 0.0) == (result["latency_ms"]["first_words"]["n"], result["late"])  # every answer began in time
    assert {"total", "prompt_eval_count"} == set(result["tokens_per_request"])


@pytest.mark.integration  # the command line loads the real model
def test_eval_answers_prints_its_table(data, tmp_path, monkeypatch, capsys):
    bank = tmp_path / "bank.jsonl"
    bank.write_text(
        json.dumps({"id": "u1", "question": "What is the name of Sefa's mother?", "relevant": [], "kind": "unanswerable"})
        + "\n",
        encoding="utf-8",
    )
    with FakeOllama(models=["qwen2.5:14b"], responder=scripted) as fake:
        monkeypatch.setenv("OLLAMA_HOST", fake.url)
        code = main(["eval", str(bank), "--notes", str(REPO / "notes"), "--data", str(data), "--answers"])
        stdout = " ".join(capsys.readouterr().out.split())
    assert 0 == code
    assert "answers to 1 questions, model qwen2.5:14b" in stdout
    assert re.search(r"correct abstention \(1 unanswerable\) │ 1\.000", stdout)
    assert re.search(r"false abstention \(0 answerable\) │ —", stdout)

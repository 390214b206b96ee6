"""One deadline per question: the first words within ORACLE_FIRST_WORDS_SECONDS of the question (the
rerank, its wait for the model and for a model slot included), else the passages at once; once words
flow, a pause of ORACLE_TOKEN_GAP_SECONDS or the end of ORACLE_ANSWER_TIMEOUT ends the answer on its
last whole sentence.

Against the fake Ollama over real HTTP, in its slow mode (nothing at all for minutes, as an
overloaded GPU or a CPU-only box) and its stalls, with the deadline set low: a test proves the
deadline by what the fake saw (the client went away before the reply) and by the answer, never by
the wall clock. The harbour campaign and its fixtures are `test_ask`'s.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oracle import cli
from oracle.deadline import Deadline
from oracle.llm import LLM
from oracle.llm_errors import LLMError, StreamCut
from oracle.texts import texts
from oracle.types import Clearance
from testing.ollama_server import FakeModel, FakeOllama, Reply, Stall
from tests.answer.harbour import (
    CLI_NOTES,
    MODEL,
    PASSAGES_PREFIX,
    QUESTION,
    fragment_headers,
    module_loop,
    requests_of,
    script,
)
from tests.conftest import request_kind as kind
from tests.conftest import write_notes

ROOT = Path(__file__).resolve().parents[2]
SLOW = texts().model_too_slow  # what a player is told when the first words did not come in time

MINUTES = 600.0  # the slow mode's wait before the first byte: ten minutes
ASK = [{"role": "user", "content": "What happened to the archduke?"}]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def left(fake: FakeOllama, count: int) -> list[dict]:
    """The requests whose client went away before the reply's end, once the fake has seen `count`
    of them (a hang-up reaches the server a moment after the client made it)."""
    for _ in range(500):
        if len(fake.abandoned) >= count:
            break
        await asyncio.sleep(0.01)
    return list(fake.abandoned)


def left_from_a_thread(fake: FakeOllama, count: int) -> list[dict]:
    for _ in range(500):
        if len(fake.abandoned) >= count:
            break
        time.sleep(0.01)
    return list(fake.abandoned)


def sentences(label: str, count: int) -> str:
    return " ".join(f"Orrin Hale, in sentence {n}, kept the harbour ledger [{label}]." for n in range(count))


# ---------------------------------------------------------------------------------------------
# The deadline itself, on a clock of the test's own


def test_the_deadline_counts_from_the_question_and_gives_the_rerank_half():
    clock = Clock()
    deadline = Deadline(30, 20, 300, clock)
    assert (30, 15, 300) == (deadline.left(), deadline.rerank_left(), deadline.whole_left())
    clock.now += 12  # the search and the rerank took 12 s
    assert (18, 3, 288) == (deadline.left(), deadline.rerank_left(), deadline.whole_left())
    clock.now += 20
    assert (0, 0, 268) == (deadline.left(), deadline.rerank_left(), deadline.whole_left())
    assert deadline.missed == "the model did not start answering within 30 s (ORACLE_FIRST_WORDS_SECONDS)"
    short = Deadline(30, 20, 10, clock)  # the whole answer's bound is shorter: the first words' too
    assert (10, 5, "the model did not start answering within 10 s (ORACLE_ANSWER_TIMEOUT)") == (
        short.left(), short.rerank_left(), short.missed)


# ---------------------------------------------------------------------------------------------
# The client's bounds, request by request


@pytest.mark.asyncio
async def test_the_client_waits_for_the_first_text_then_for_each_piece():
    async with FakeOllama(models=[MODEL]) as slow:
        llm = LLM(slow.url, MODEL, timeout=30)
        try:
            slow.slow = MINUTES
            with pytest.raises(LLMError) as nothing:
                await llm.stream_chat(ASK, first_text=0.3, token_gap=5)
            assert nothing.value.timed_out and not isinstance(nothing.value, StreamCut)

            slow.slow = 0
            slow.responder = lambda request: Stall("One whole sentence. And half", after=4, seconds=MINUTES)
            with pytest.raises(StreamCut) as cut:
                await llm.stream_chat(ASK, first_text=5, token_gap=0.3)
            assert ("gap", "One whole sentence. And") == (cut.value.bound, cut.value.partial)
            assert str(cut.value) == f"Ollama at {slow.url} sent nothing for 0.3 s mid-reply"

            slow.responder = lambda request: Reply("word " * 40, chunk_delay=0.05)  # two seconds of words
            with pytest.raises(StreamCut) as late:
                await llm.stream_chat(ASK, timeout=0.5, first_text=5, token_gap=5)
            assert "whole" == late.value.bound and late.value.partial.startswith("word word")
            # Pieces a tenth of a second apart, longer in all than the wait for the first text: whole.
            slow.responder = lambda request: Reply("word " * 10, chunk_delay=0.1)
            reply = await llm.stream_chat(ASK, timeout=30, first_text=0.5, token_gap=5)
            assert reply.text == "word " * 10
            # Each bound that passed closed its request at once: Ollama stops writing for nobody.
            assert 3 == len(await left(slow, 3))
        finally:
            await llm.close()


# ---------------------------------------------------------------------------------------------
# A question against a slow Ollama


@module_loop
async def test_an_ollama_that_answers_after_minutes_gives_the_passages_at_the_deadline(campaign, fake, caplog):
    fake.slow = MINUTES
    async with campaign.oracle(first_words=2.0) as oracle:
        with caplog.at_level("WARNING", logger="oracle.oracle"):
            player = await oracle.ask(QUESTION)
            gm = await oracle.ask(QUESTION, clearance=Clearance.GM)

    reason = "the model did not start answering within 2 s (ORACLE_FIRST_WORDS_SECONDS)"
    assert ("passages", reason, "passages", reason) == (player.mode, player.reason, gm.mode, gm.reason)
    # The rerank was skipped at its share, the answer at the deadline: the fake saw both clients leave
    # before its reply, minutes away.
    asked = [r for r in fake.chat_requests() if r["messages"]]
    assert ["rerank", "answer"] * 2 == [kind(r) for r in asked] and asked == await left(fake, 4)
    rerank = player.trace.rerank.reason
    # Half of what is left of the 2 s when the rerank starts: 1.0 s, less on a loaded machine.
    within = re.match(rf"off: Ollama at {re.escape(fake.url)} did not answer in time \(within (\d\.\d) s", rerank)
    assert within and 0.5 <= float(within.group(1)) <= 1.0, rerank
    # A player reads the passages, marked as passages, and no host; the game master and the log, why.
    assert player.text.startswith(f"{PASSAGES_PREFIX} ({SLOW}). The most relevant passages")
    assert fake.url not in json.dumps(player.to_json()) and SLOW == player.to_json()["reason"]
    assert gm.text.startswith(f"{PASSAGES_PREFIX} ({reason}).")
    assert 2 == sum(f"without the LLM: {reason}" in r.getMessage() for r in caplog.records)
    assert "first_words" not in player.trace.timings_ms


@module_loop
async def test_in_the_normal_mode_nothing_changes(campaign, fake):
    async with campaign.oracle() as oracle:
        answer = await oracle.ask(QUESTION)
    assert ("llm", "", True) == (answer.mode, answer.reason, answer.trace.rerank.used)
    assert ["rerank", "answer"] == [kind(r) for r in fake.chat_requests()] and [] == fake.abandoned
    timings = answer.trace.timings_ms
    assert timings["rerank"] <= timings["first_words"] <= timings["total"]  # the trace says when it began


@module_loop
async def test_a_stream_that_stalls_mid_answer_is_cut_after_the_token_gap_with_its_whole_sentences(campaign, fake):
    def stalled(request: dict) -> Stall:
        whole = sentences(fragment_headers(request)[0][0], 5)
        return Stall(f"{whole} Then he sank the Gull and", after=len(whole.split()) + 3, seconds=MINUTES)

    fake.responder = script(answer=stalled)
    async with campaign.oracle(token_gap=1.0) as oracle:
        player = await oracle.ask(QUESTION)
        gm = await oracle.ask(QUESTION, clearance=Clearance.GM)

    players, gms = requests_of(fake, "answer")
    label = fragment_headers(players)[0][0]
    assert ("llm", "llm") == (player.mode, gm.mode)
    stopped = "*(The answer stops here: the language model stopped before the end.)*"
    assert player.text == f"{sentences(label, 5)}\n\n{stopped}"
    why = "the model wrote nothing for 1 s (ORACLE_TOKEN_GAP_SECONDS)"
    assert gm.text == f"{sentences(fragment_headers(gms)[0][0], 5)}\n\n*(The answer stops here: {why}.)*"
    # The player's trace says only that it stopped; the game master's, why.
    assert ("the language model stopped before the end", why) == (
        player.to_json()["trace"]["incomplete"], gm.to_json()["trace"]["incomplete"])
    assert [players, gms] == await left(fake, 2)  # the client hung up after the gap


@module_loop
async def test_once_words_flow_the_answer_may_take_longer_than_the_deadline(campaign, fake):
    def slow_writer(request: dict) -> Reply:
        return Reply(sentences(fragment_headers(request)[0][0], 3), chunk_delay=0.1)  # 30 pieces: 3 s

    fake.responder = script(answer=slow_writer)
    async with campaign.oracle(first_words=2.0, token_gap=5.0) as oracle:
        answer = await oracle.ask(QUESTION)

    [request] = requests_of(fake, "answer")
    assert ("llm", sentences(fragment_headers(request)[0][0], 3), None) == (
        answer.mode, answer.text, answer.trace.incomplete)
    assert [] == fake.abandoned


@module_loop
async def test_the_whole_answer_ends_at_the_answer_timeout_on_a_whole_sentence(campaign, fake):
    def endless(request: dict) -> Reply:
        return Reply(sentences(fragment_headers(request)[0][0], 40), chunk_delay=0.02)  # 400 pieces: 8 s

    fake.responder = script(answer=endless)
    async with campaign.oracle(first_words=1.0, token_gap=5.0, answer_timeout=3.0) as oracle:
        answer = await oracle.ask(QUESTION, clearance=Clearance.GM)

    [request] = requests_of(fake, "answer")
    label = fragment_headers(request)[0][0]
    why = "the answer was still being written 3 s after the question (ORACLE_ANSWER_TIMEOUT)"
    written, marker = answer.text.split("\n\n")
    assert ("llm", why, f"*(The answer stops here: {why}.)*") == (answer.mode, answer.trace.incomplete, marker)
    assert written.endswith(f"[{label}].") and sentences(label, 40).startswith(written)
    assert [request] == await left(fake, 1)


@module_loop
async def test_the_wait_for_a_model_slot_counts_against_the_deadline(campaign, fake):
    async with campaign.oracle(first_words=1.0) as oracle:
        for _ in range(2):  # both slots (ORACLE_LLM_CONCURRENCY) held by questions that never end
            await oracle.llm_slots.acquire()
        try:
            answer = await oracle.ask(QUESTION, clearance=Clearance.GM)
        finally:
            for _ in range(2):
                oracle.llm_slots.release()

    assert answer.reason == ("the model did not start answering within 1 s (ORACLE_FIRST_WORDS_SECONDS): "
                             "no model slot came free (ORACLE_LLM_CONCURRENCY=2)")
    assert answer.trace.rerank.reason.startswith("off: no model slot was free (ORACLE_LLM_CONCURRENCY) within ")
    assert ("passages", []) == (answer.mode, [r for r in fake.chat_requests() if r["messages"]])


@module_loop
async def test_a_recap_keeps_the_same_deadline(campaign, fake):
    fake.slow = MINUTES
    async with campaign.oracle(first_words=1.0) as oracle:
        player = await oracle.recap("12")
        gm = await oracle.recap("12", clearance=Clearance.GM)
    reason = "the model did not start answering within 1 s (ORACLE_FIRST_WORDS_SECONDS)"
    assert ("passages", "passages", reason) == (player.mode, gm.mode, gm.reason)
    assert player.text.startswith(f"The Oracle could not write the recap ({SLOW}). Session 12 in the notes:")
    assert gm.text.startswith(f"The Oracle could not write the recap ({reason}). Session 12 in the notes:")
    assert [r for r in fake.chat_requests() if r["messages"]] == await left(fake, 2)


# ---------------------------------------------------------------------------------------------
# The command line


# The command line on the hashed stand-in for the model (tests/fakes/hashed_cli.py): what is judged
# is when the passages come instead of an answer, not which ones.


def cli_env(host: str, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORACLE_", "OLLAMA_"))}
    return env | {"OLLAMA_HOST": host, "ORACLE_MODEL": MODEL, "HF_HUB_OFFLINE": "1",
                  "ORACLE_OLLAMA_PROBE_TIMEOUT": "2", "PYTHONPATH": str(ROOT), **settings}


@pytest.mark.parametrize(
    "first_words",
    [pytest.param("2", id="first_words=2"),
     pytest.param(None, marks=pytest.mark.slow, id="defaults")],  # the defaults: a 30-second wait
)
def test_oracle_ask_against_a_slow_ollama_gives_the_passages_at_the_deadline(tmp_path, first_words):
    write_notes(tmp_path / "notes", CLI_NOTES)
    where = ["--notes", str(tmp_path / "notes"), "--data", str(tmp_path / "data")]
    settings = {"ORACLE_FIRST_WORDS_SECONDS": first_words} if first_words else {}
    fake = FakeOllama(models=[MODEL]).run_in_thread()
    try:
        fake.responder = script()
        env = cli_env(fake.url, **settings)
        subprocess.run([sys.executable, "-m", "tests.fakes.hashed_cli", "ingest", *where], cwd=tmp_path, env=env, check=True,
                       capture_output=True, timeout=300)
        fake.slow = MINUTES  # from now on, nothing for ten minutes
        done = subprocess.run([sys.executable, "-m", "tests.fakes.hashed_cli", "ask", QUESTION, *where, "--json"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300, check=False)
        asked = [r for r in fake.chat_requests() if r["messages"] and kind(r) != "annotate"]
        abandoned = left_from_a_thread(fake, 2)
    finally:
        fake.stop_thread()
    assert 0 == done.returncode, done.stderr
    data = json.loads(done.stdout)
    assert ("passages", SLOW) == (data["mode"], data["reason"])
    assert data["answer"].startswith(f"{PASSAGES_PREFIX} ({SLOW}).") and 5 == len(data["citations"])
    seconds = first_words or "30"
    assert f"the model did not start answering within {seconds} s (ORACLE_FIRST_WORDS_SECONDS)" in done.stderr
    # The rerank skipped at its share, the answer at the deadline: both clients left before the reply.
    assert (["rerank", "answer"], asked) == ([kind(r) for r in asked], abandoned), data["trace"]["rerank"]


def test_oracle_ask_prints_that_the_model_is_still_loading(tmp_path, monkeypatch, capfd, quick_command_line):
    write_notes(tmp_path / "notes", CLI_NOTES)
    monkeypatch.chdir(tmp_path)  # no developer .env read
    for name in [k for k in os.environ if k.startswith(("ORACLE_", "OLLAMA_"))]:
        monkeypatch.delenv(name)
    fake = FakeOllama(models=[MODEL]).run_in_thread()
    try:
        fake.responder = script()
        monkeypatch.setenv("OLLAMA_HOST", fake.url)
        monkeypatch.setenv("ORACLE_MODEL", MODEL)
        args = ["--notes", str(tmp_path / "notes"), "--data", str(tmp_path / "data")]
        assert 0 == cli.main(["ingest", *args])
        capfd.readouterr()
        fake.add_model(FakeModel(MODEL, load_seconds=MINUTES))  # out of memory, and it loads for minutes
        fake.loaded.clear()
        monkeypatch.setenv("ORACLE_FIRST_WORDS_SECONDS", "1")
        assert 0 == cli.main(["ask", QUESTION, *args])
        out = capfd.readouterr().out
    finally:
        fake.stop_thread()
    assert "Passages, not an answer" in out
    assert "The model is still loading; here are the passages meanwhile." in " ".join(out.split())

"""Answering end to end: `Oracle.ask` over real SQLite, Chroma and the bundled model, with the fake
Ollama over real HTTP recording every request.

The harbour campaign (`harbour.py`) is ingested once for the module (`campaign`, in this folder's
conftest.py), with the fake answering the annotation requests. Each test then scripts the rerank and
answer requests (`script`).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from oracle.answer.prompt import SYSTEM, Turn
from oracle.answer.trace import PLAYER_REASON
from oracle.index.index import Index
from oracle.index.ingest import ingest
from oracle.index.status import index_status
from oracle.llm import Loaded
from oracle.oracle import Oracle
from oracle.types import GM, PUBLIC, Clearance
from testing.ollama_server import (
    EMPTY,
    CutStream,
    Delay,
    FakeModel,
    FakeOllama,
    HttpError,
    ModelNotFound,
    RawBody,
    TruncatedJson,
    split_tokens,
)
from tests.answer.harbour import (
    CLI_NOTES,
    DEFAULT_ANSWER,
    EN,
    HEADER,
    HEADLINES,
    KEEP_ALIVE,
    MODEL,
    PASSAGES_PREFIX,
    QUESTION,
    Campaign,
    annotation_of,
    expected_headlines,
    flat,
    fragment_headers,
    header_of,
    headlines,
    module_loop,
    pool_ids,
    requests_of,
    script,
    settings_for,
    word_runs,
)
from tests.conftest import MINI_CAMPAIGN, closed_port_url, write_notes
from tests.conftest import request_kind as kind


@module_loop
async def test_the_campaign_is_big_enough_and_fully_annotated(campaign):
    rows = campaign.chunks.values()
    assert len(rows) >= 25
    assert len({r["label"] for r in rows if r["kind"] == "session"}) >= 20
    assert all(r["text_hash"] in campaign.annotations for r in rows)
    assert [1, 2, 3] == sorted(r["part"] for r in rows if r["label"] == "Session 20")
    for row in rows:  # no annotation repeats its chunk's text
        assert campaign.annotations[row["text_hash"]] == annotation_of(row["text"])


# ---------------------------------------------------------------------------------------------
# The rerank request


@module_loop
async def test_the_rerank_request_holds_annotations_and_no_raw_text(campaign, fake):
    async with campaign.oracle() as oracle:
        answer = await oracle.ask(QUESTION)

    [rerank] = requests_of(fake, "rerank")
    pool = pool_ids(answer)
    assert len(pool) > 8
    # The same window as every request, and a small reply budget: the reply is a list of numbers.
    assert (MODEL, KEEP_ALIVE, False, {"temperature": 0, "num_ctx": 16384, "num_predict": 256}) == (
        rerank["model"], rerank["keep_alive"], rerank["stream"], rerank["options"])
    assert ["best"] == rerank["format"]["required"]
    # Every candidate, numbered in fused order, by its label and annotation.
    user = rerank["messages"][-1]["content"]
    listed = re.findall(r"^(\d+)\. \((.+?)\) (.*)$", user, re.M)
    expected = [
        (str(i), campaign.chunks[cid]["label"], campaign.annotations[campaign.chunks[cid]["text_hash"]])
        for i, cid in enumerate(pool, 1)
    ]
    assert expected == listed
    assert user.startswith(f"Question: {QUESTION}\n")
    # Not one 8-word run of any chunk's text (the pool's or any other's).
    messages = flat(rerank["messages"])
    for cid, row in campaign.chunks.items():
        leaked = [run for run in word_runs(row["text"]) if run in messages]
        assert [] == leaked, (row["label"], cid)
    # The same check finds the raw text where it belongs: in the answer request.
    [request] = requests_of(fake, "answer")
    for chunk in answer.fragments:
        assert word_runs(chunk.text)[0] in flat(request["messages"])


@module_loop
async def test_the_rerankers_choice_is_honoured_and_filled_from_the_fused_order(campaign, fake):
    fake.responder = script(rerank={"best": [3, 1]})
    async with campaign.oracle() as oracle:
        answer = await oracle.ask(QUESTION)

    pool = pool_ids(answer)
    final = [pool[2], pool[0]] + [cid for cid in pool if cid not in (pool[2], pool[0])]
    [request] = requests_of(fake, "answer")
    assert [header_of(campaign.chunks[cid]) for cid in final[:8]] == fragment_headers(request)
    assert final[:8] == [c.id for c in answer.fragments]
    assert {"mode": "llm", "used": True, "reason": "chose 2, filled 6 from the fused order",
            "chosen": [pool[2], pool[0]]} == answer.trace.rerank.to_json()
    assert [[cid, campaign.chunks[cid]["label"]] for cid in final[:8]] == answer.trace.packed["fragments"]


# ---------------------------------------------------------------------------------------------
# The answer request


@module_loop
async def test_the_answer_request_holds_eight_fragments_then_the_headlines(campaign, fake):
    fake.responder = script(rerank={"best": [3, 1]})
    async with campaign.oracle() as oracle:
        answer = await oracle.ask(QUESTION)

    [request] = requests_of(fake, "answer")
    pool = pool_ids(answer)
    final = [pool[2], pool[0]] + [cid for cid in pool if cid not in (pool[2], pool[0])]
    headers = fragment_headers(request)
    assert 8 == len(headers)
    shown = headlines(request)
    assert expected_headlines(campaign, final) == shown
    assert 1 <= len(shown) <= 16
    labels = [label for label, _ in shown]
    assert len(set(labels)) == len(labels)  # one per session label
    assert set() == set(labels) & {label for label, _, _ in headers}  # none for a label in full
    assert [s.chunk.label for s in answer.headlines] == labels
    # The blocks in order: fragments, then headlines, then the question.
    content = request["messages"][-1]["content"]
    assert content.startswith("NOTES IN FULL (cite by label):\n\n---\n\n")
    assert content.index(HEADLINES) > max(m.start() for m in HEADER.finditer(content))
    assert content.endswith(f"\n\n---\n\nQuestion: {QUESTION}")
    # The citation instructions, with no example label to copy: not a digit in them.
    assert [("system", SYSTEM), ("user", content)] == [(m["role"], m["content"]) for m in request["messages"]]
    assert [] == re.findall(r"\d", SYSTEM)
    assert (MODEL, KEEP_ALIVE, True) == (request["model"], request["keep_alive"], request["stream"])
    assert {"temperature": 0, "num_ctx": 16384, "num_predict": 1024} == request["options"]


@module_loop
async def test_headlines_are_capped_by_max_headlines(campaign, fake):
    async with campaign.oracle(max_headlines=4) as oracle:
        answer = await oracle.ask(QUESTION)
    [request] = requests_of(fake, "answer")
    pool = pool_ids(answer)  # the reranker chose [1]: the fused order
    assert len(expected_headlines(campaign, pool)) > 4
    assert expected_headlines(campaign, pool, cap=4) == headlines(request)


@module_loop
async def test_a_label_in_parts_gets_one_headline(campaign, fake):
    """Session 20 comes in three parts; left out of the fragments, it is one headline."""
    question = "Orrin Hale in the storm, the wreck of the cog and the reckoning with the merchants"
    async with campaign.oracle() as oracle:
        retrieval = await oracle.search(question)
    pool = [h.chunk.id for h in retrieval.fused]
    parts = [i for i, cid in enumerate(pool, 1) if campaign.chunks[cid]["label"] == "Session 20"]
    assert len(parts) >= 2
    others = [i for i in range(1, len(pool) + 1) if i not in parts][:8]
    fake.responder = script(rerank={"best": others})  # every part of Session 20 left out

    async with campaign.oracle() as oracle:
        answer = await oracle.ask(question)
    [request] = requests_of(fake, "answer")
    shown = headlines(request)
    assert "Session 20" not in {label for label, _, _ in fragment_headers(request)}
    first_part = pool[parts[0] - 1]
    assert 1 == [label for label, _ in shown].count("Session 20")
    assert ("Session 20", campaign.annotations[campaign.chunks[first_part]["text_hash"]]) in shown
    assert [s.chunk.label for s in answer.headlines] == [label for label, _ in shown]


@module_loop
async def test_the_question_is_the_users_words_and_history_comes_as_messages(campaign, fake):
    history = [
        Turn("user", "Who is Orrin Hale?"),
        Turn("assistant", "He is the harbourmaster of Greyhaven."),
        Turn("user", "   "),  # an empty turn is not sent
    ]
    async with campaign.oracle() as oracle:
        answer = await oracle.ask("  and   why? ", history=history)

    assert "Who is Orrin Hale? and why?" == answer.trace.search_query  # searched with the turn before
    [rerank] = requests_of(fake, "rerank")
    assert rerank["messages"][-1]["content"].startswith("Question: and why?\n")
    [request] = requests_of(fake, "answer")
    assert [
        ("system", SYSTEM),
        ("user", "Who is Orrin Hale?"),
        ("assistant", "He is the harbourmaster of Greyhaven."),
    ] == [(m["role"], m["content"]) for m in request["messages"][:-1]]
    assert request["messages"][-1]["content"].endswith("\n\nQuestion: and why?")
    assert "llm" == answer.mode


@module_loop
async def test_and_then_what_is_answered_in_the_notes_order_with_no_rerank(campaign, fake):
    history = [Turn("user", "Who is Orrin Hale?"), Turn("assistant", "He is the harbourmaster of Greyhaven.")]
    async with campaign.oracle() as oracle:
        asked = await oracle.search("Who is Orrin Hale?")
        answer = await oracle.ask("and then what?", history=history)

    assert [] == requests_of(fake, "rerank")
    assert "what came next" in answer.trace.rerank.reason and not answer.trace.rerank.used
    assert asked.fused[0].chunk.id == answer.fragments[0].id  # the passage told last, read first
    [request] = requests_of(fake, "answer")
    assert request["messages"][-1]["content"].endswith("\n\nQuestion: and then what?")


@module_loop
async def test_and_then_what_goes_on_from_the_passage_the_answer_before_cited(campaign, fake):
    # The reranker put the search's third passage first, and the answer cites it: that passage is
    # what the player was told, and the thread goes on from it.
    fake.responder = script(rerank={"best": [3]}, answer=lambda request: f"So it went [{fragment_headers(request)[0][0]}].")
    async with campaign.oracle() as oracle:
        answer = await oracle.ask("Who is Orrin Hale?")
        third = pool_ids(answer)[2]
        assert third == answer.told == answer.fragments[0].id
        history = [Turn("user", "Who is Orrin Hale?"), Turn("assistant", answer.text, answer.told)]
        went_on = await oracle.ask("and then what?", history=history)
        after = (await oracle.search("and then what?", history=["Who is Orrin Hale?"], told=third)).fused[1].chunk.id

    assert [third, after] == [c.id for c in went_on.fragments[:2]]
    assert after == went_on.told  # the next "and then?" goes on from the passage this one went to


@module_loop
async def test_an_answer_that_cites_nothing_leaves_the_passage_told_last_as_it_was(campaign, fake):
    async with campaign.oracle() as oracle:
        third = pool_ids(await oracle.ask("Who is Orrin Hale?"))[2]
        history = [Turn("user", "Who is Orrin Hale?"), Turn("assistant", "He runs the harbour.", third),
                   Turn("user", "and why?"), Turn("assistant", "The notes do not say.")]
        went_on = await oracle.ask("and then what?", history=history)
    assert third == went_on.fragments[0].id


@module_loop
async def test_an_answer_in_passages_told_the_first_passage_shown(campaign, fake):
    fake.responder = script(answer=CutStream(after=0))
    async with campaign.oracle() as oracle:
        answer = await oracle.ask("Who is Orrin Hale?")
    assert "passages" == answer.mode
    assert answer.fragments[0].id == answer.told


# ---------------------------------------------------------------------------------------------
# Rerank fallbacks: the fused order is kept and the answer still written


def assert_fused_order_kept(campaign: Campaign, answer, request: dict) -> None:
    pool = pool_ids(answer)
    assert pool[:8] == [c.id for c in answer.fragments]
    assert [header_of(campaign.chunks[cid]) for cid in pool[:8]] == fragment_headers(request)
    assert (False, []) == (answer.trace.rerank.used, answer.trace.rerank.chosen)


@module_loop
async def test_a_candidate_without_annotation_turns_reranking_off(campaign, fake):
    async with campaign.oracle() as oracle:
        retrieval = await oracle.search(QUESTION)
        missing = retrieval.fused[10].chunk  # among the headlines-to-be
        with sqlite3.connect(campaign.index.settings.sqlite_path) as db:
            saved = db.execute("SELECT * FROM annotations WHERE text_hash = ?", (missing.text_hash,)).fetchall()
            db.execute("DELETE FROM annotations WHERE text_hash = ?", (missing.text_hash,))
        try:
            answer = await oracle.ask(QUESTION)
        finally:
            with sqlite3.connect(campaign.index.settings.sqlite_path) as db:
                db.executemany(f"INSERT INTO annotations VALUES ({','.join('?' * len(saved[0]))})", saved)

    assert [] == requests_of(fake, "rerank")  # no rerank call at all
    [request] = requests_of(fake, "answer")
    assert_fused_order_kept(campaign, answer, request)
    reason = answer.trace.rerank.reason
    assert reason.startswith("off: 1 of ") and "no annotation" in reason
    assert ("llm", 1, 1) == (answer.mode, answer.trace.llm_calls, len(fake.chat_requests()))
    assert missing.id not in [s.chunk.id for s in answer.headlines]  # no headline without a note


@module_loop
async def test_a_rerank_timeout_keeps_the_fused_order(campaign, fake):
    async with campaign.oracle(first_words=4.0) as oracle:  # the rerank's share: 2 s
        assert await oracle.index.llm.load() is None  # the model is loaded: a timeout is the reranker's own
        fake.reset()
        fake.responder = script(rerank=Delay(30, {"best": [3, 1]}))
        answer = await oracle.ask(QUESTION)

    # The reason proves the rerank's share cut the call: the 30-second reply never arrived.
    [rerank, request] = [r for r in fake.chat_requests() if r["messages"]]
    assert [rerank] == fake.abandoned
    assert_fused_order_kept(campaign, answer, request)
    reason = answer.trace.rerank.reason
    assert reason.startswith(f"off: Ollama at {fake.url} did not answer in time (within ")
    assert reason.endswith(" s, the rerank's share of ORACLE_FIRST_WORDS_SECONDS)")
    assert ("llm", DEFAULT_ANSWER, 2, 2) == (
        answer.mode, answer.text, answer.trace.llm_calls, len(fake.chat_requests()))


@contextlib.contextmanager
def unloaded(fake: FakeOllama, load_seconds: float):
    """The model out of the fake's memory, and loading it takes `load_seconds`."""
    fake.add_model(FakeModel(MODEL, load_seconds=load_seconds))
    fake.loaded.pop(MODEL, None)
    try:
        yield
    finally:
        fake.add_model(FakeModel(MODEL))


@module_loop
async def test_while_the_model_loads_the_rerank_is_asked_once_it_is_loaded(campaign, fake):
    fake.responder = script(rerank={"best": [3, 1]})
    with unloaded(fake, 1.0):
        async with campaign.oracle() as oracle:  # a fresh process: nothing answered yet
            answer = await oracle.ask(QUESTION)

    # One load, a request of its own: the rerank waited for it, then was asked once.
    assert [[], "rerank", "answer"] == [r["messages"] and kind(r) for r in fake.chat_requests()]
    assert ([(MODEL, 16384)], [], []) == (fake.loads, fake.aborted_loads, fake.abandoned)
    assert answer.trace.rerank.used is True
    assert answer.trace.rerank.reason == "chose 2, asked once the model had loaded, filled 6 from the fused order"
    assert "llm" == answer.mode


@module_loop
async def test_a_model_loading_past_the_deadline_gives_the_passages_and_goes_on_loading(campaign, fake):
    with unloaded(fake, 3.0):
        async with campaign.oracle(first_words=1.0) as oracle:
            player = await oracle.ask(QUESTION)
            assert oracle.index.llm.loading
            assert await oracle.index.llm.load() is None  # the same load, still running: now done
            later = await oracle.ask(QUESTION)

    reason = "the model did not start answering within 1 s (ORACLE_FIRST_WORDS_SECONDS): the model is still loading"
    assert ("passages", reason) == (player.mode, player.reason)
    assert player.text.startswith("The model is still loading; here are the passages meanwhile.\n\n[")
    assert EN.model_loading == player.to_json()["reason"] and fake.url not in json.dumps(player.to_json())
    assert re.fullmatch(r"off: the model was still loading after 0\.\d s, the rerank's share of "
                        r"ORACLE_FIRST_WORDS_SECONDS", player.trace.rerank.reason)
    # The load was never abandoned: the answer request that waited behind it was, at the deadline.
    [load, first_answer, rerank, answer] = fake.chat_requests()
    assert ([], ["answer", "rerank", "answer"]) == (load["messages"], [kind(r) for r in (first_answer, rerank, answer)])
    assert ([(MODEL, 16384)], [], [first_answer]) == (fake.loads, fake.aborted_loads, fake.abandoned)
    assert ("llm", True) == (later.mode, later.trace.rerank.used)


@module_loop
@pytest.mark.parametrize(
    "reply, reason",
    [
        (RawBody(b"{this is not json"), "off: Ollama call failed: "),
        (RawBody("<html>bad gateway</html>", status=200, content_type="text/html"), "off: Ollama call failed: "),
        (TruncatedJson(), "off: the model's reply is not the JSON asked for: "),
        ("the best ones are three and one", "off: the model's reply is not the JSON asked for: "),
        ({"best": "three"}, "off: the model's reply is not the JSON asked for: "),
        ({"chosen": [3]}, "off: the model's reply is not the JSON asked for: "),
        ({"best": [0, -1, 99]}, "off: the reply named no known candidate (3 unknown)"),
        ({"best": []}, "off: the reply named no known candidate (0 unknown)"),
    ],
    ids=["raw-garbage", "html", "truncated", "prose", "wrong-type", "wrong-key", "all-unknown", "empty-list"],
)
async def test_an_unusable_rerank_reply_keeps_the_fused_order(campaign, fake, reply, reason):
    fake.responder = script(rerank=reply)
    async with campaign.oracle() as oracle:
        answer = await oracle.ask(QUESTION)

    [request] = requests_of(fake, "answer")
    assert_fused_order_kept(campaign, answer, request)
    assert answer.trace.rerank.reason.startswith(reason)
    assert ("llm", 2, 2) == (answer.mode, answer.trace.llm_calls, len(fake.chat_requests()))


@module_loop
async def test_unknown_candidates_are_dropped_and_the_rest_filled(campaign, fake):
    fake.responder = script(rerank={"best": [99, 2, 2, 0]})
    async with campaign.oracle() as oracle:
        answer = await oracle.ask(QUESTION)

    pool = pool_ids(answer)
    final = [pool[1], pool[0]] + pool[2:]
    [request] = requests_of(fake, "answer")
    assert [header_of(campaign.chunks[cid]) for cid in final[:8]] == fragment_headers(request)
    assert {"mode": "llm", "used": True, "reason": "chose 1, dropped 2 unknown, filled 7 from the fused order",
            "chosen": [pool[1]]} == answer.trace.rerank.to_json()


# ---------------------------------------------------------------------------------------------
# Answer fallbacks: passages, never an exception


def assert_passages(campaign: Campaign, answer, why: str = PLAYER_REASON) -> None:
    assert "passages" == answer.mode
    # A player reads what happened to the model (`why`), never the reason's host, model name or error.
    assert answer.text.startswith(f"{PASSAGES_PREFIX} ({why}). The most relevant passages from the notes:")
    assert answer.reason and answer.reason not in answer.text
    best = list(answer.fragments[:5])
    assert 5 == len(best)
    assert [(c.label, c.path) for c in best] == [(c.label, c.path) for c in answer.citations]
    # Each passage is cited by the lines of the sentences it shows, within its chunk's lines.
    for chunk, cited, shown in zip(best, answer.citations, [e.to_json() for e in answer.trace.excerpts], strict=True):
        assert chunk.start_line <= cited.start_line <= cited.end_line <= chunk.end_line
        assert (chunk.label, [cited.start_line, cited.end_line]) == (shown["label"], [shown["lines"][0][0], shown["lines"][-1][1]])
        assert f"[{cited.label}] ({cited.path}, lines {cited.start_line}–{cited.end_line})\n> " in answer.text
    data = answer.to_json()
    assert [{"label": c.label, "path": c.path, "lines": [c.start_line, c.end_line]} for c in answer.citations] == data["citations"]
    # The answer keeps why (the journal, the log); a player's JSON says only that there is no answer.
    assert answer.reason == answer.trace.reason
    assert (why, why) == (data["reason"], data["trace"]["reason"])


@module_loop
@pytest.mark.parametrize(
    "reply, reason, why",
    [
        (ModelNotFound(), f"Ollama does not have the model {MODEL!r} (run: ollama pull {MODEL})", EN.no_model_running),
        (HttpError(500, "boom"), "Ollama answered 500: boom", PLAYER_REASON),
        (EMPTY, "the model gave an empty answer", PLAYER_REASON),
        ("  \n ", "the model gave an empty answer", PLAYER_REASON),
        (Delay(30, "too late"), "the model did not start answering within 3 s (ORACLE_FIRST_WORDS_SECONDS)",
         EN.model_too_slow),
    ],
    ids=["404", "500", "empty", "blank", "timeout"],
)
async def test_when_the_answer_call_fails_the_passages_are_shown(campaign, fake, reply, reason, why):
    fake.responder = script(rerank={"best": [3, 1]}, answer=reply)
    async with campaign.oracle(first_words=3.0) as oracle:
        answer = await oracle.ask(QUESTION)

    assert reason in answer.reason  # for "timeout": the 3-second deadline cut a 30-second reply
    assert_passages(campaign, answer, why)
    pool = pool_ids(answer)
    assert [pool[2], pool[0]] == [c.id for c in answer.fragments[:2]]  # still the reranked order
    assert (2, 2) == (answer.trace.llm_calls, len(fake.chat_requests()))


@module_loop
async def test_passages_show_the_sentences_that_answer_with_their_own_lines(campaign, fake):
    async with campaign.oracle(ollama_host=closed_port_url()) as oracle:
        answer = await oracle.ask("Who fined the captain twenty crowns?")

    assert_passages(campaign, answer, EN.no_model_running)
    # The third part of the long session, from its heading (line 9) to its end: the sentence that
    # answers is shown, cited by the lines it spans, not by the part's heading.
    first = answer.fragments[0]
    assert ("Session 20", 9, 11) == (first.label, first.start_line, first.end_line)
    assert ("Session 20", "sessions/Session 20.md", 10, 11, (20,)) == tuple(vars(answer.citations[0]).values())
    shown = answer.text.split("[Session 20] (sessions/Session 20.md, lines 10–11)\n> ", 1)[1].split("\n\n")[0]
    assert "He showed them the harbour ledger, proved the cog had ignored his warning flags, and fined the captain" \
           " twenty crowns." in shown


@module_loop
async def test_a_refused_connection_gives_passages(campaign, fake):
    host = closed_port_url()
    async with campaign.oracle(ollama_host=host) as oracle:
        answer = await oracle.ask(QUESTION)

    assert f"Ollama is not reachable at {host}" == answer.reason  # refused, not timed out
    assert f"off: Ollama is not reachable at {host}" == answer.trace.rerank.reason
    assert_passages(campaign, answer, EN.no_model_running)  # a player is told no model runs, not where
    assert pool_ids(answer)[:8] == [c.id for c in answer.fragments]
    assert [] == fake.requests


@module_loop
async def test_a_players_json_names_no_host_and_the_game_masters_keeps_it(campaign, fake):
    """`Answer.to_json()` decides: for a player, no host, port or error, on any field of the answer
    or its trace; for the game master, the reason as it was."""
    host = closed_port_url()
    async with campaign.oracle(ollama_host=host) as oracle:
        player = await oracle.ask(QUESTION)
        gm = await oracle.ask(QUESTION, clearance=Clearance.GM)
    port = host.rsplit(":", 1)[1]
    shown = json.dumps(player.to_json())
    assert [] == re.findall(rf"127\.0\.0\.1|http|localhost|(?<!\d){port}(?!\d)|reachable|Ollama", shown)
    data = player.to_json()
    assert (EN.no_model_running, EN.no_model_running, "off") == (
        data["reason"], data["trace"]["reason"], data["trace"]["rerank"]["reason"])
    assert (f"Ollama is not reachable at {host}", False) == (player.reason, player.clearance.gm)  # kept for the log, the journal
    data = gm.to_json()
    assert (f"Ollama is not reachable at {host}",) * 2 == (data["reason"], data["trace"]["reason"])
    assert f"off: Ollama is not reachable at {host}" == data["trace"]["rerank"]["reason"]
    assert gm.clearance.gm and host in gm.text  # the game master reads the reason in the answer too


@module_loop
async def test_the_deadline_not_the_ingest_timeout_bounds_the_answer(campaign, fake):
    """The transport's own timeout must not cut an answer the question's deadline still allows."""
    fake.responder = script(rerank={"best": [3, 1]}, answer=Delay(2, "Orrin Hale runs the harbour."))
    async with campaign.oracle(ollama_timeout=1.0, answer_timeout=10.0) as oracle:
        answer = await oracle.ask(QUESTION)
    assert ("llm", "", "Orrin Hale runs the harbour.") == (answer.mode, answer.reason, answer.text)


# ---------------------------------------------------------------------------------------------
# Citations in the answer


@module_loop
async def test_invented_citations_are_removed(campaign, fake):
    def answer_citing(request: dict) -> str:
        label = fragment_headers(request)[0][0]
        return f"Orrin Hale kept the harbour ledger [{label}]. He sank the Gull at dawn [Session 999]."

    fake.responder = script(answer=answer_citing)
    async with campaign.oracle() as oracle:
        answer = await oracle.ask(QUESTION)

    first = answer.fragments[0]
    assert f"Orrin Hale kept the harbour ledger [{first.label}]. He sank the Gull at dawn." == answer.text
    assert {"shown": [first.label], "unknown": ["Session 999"], "uncited_sentences": 1} == answer.trace.citations.to_json()
    assert [{"label": first.label, "path": first.path, "lines": [first.start_line, first.end_line]}] == (
        answer.to_json()["citations"])
    assert ("llm", "") == (answer.mode, answer.reason)


# ---------------------------------------------------------------------------------------------
# How many calls a question costs


@module_loop
@pytest.mark.parametrize("reranker, calls", [("llm", 2), ("none", 1)])
async def test_calls_per_question(campaign, fake, reranker, calls):
    async with campaign.oracle(reranker=reranker) as oracle:
        answer = await oracle.ask(QUESTION)
    assert (calls, calls) == (len(fake.chat_requests()), answer.trace.llm_calls)
    assert 1 == len(requests_of(fake, "answer"))
    assert "llm" == answer.mode
    if reranker == "none":
        assert {"mode": "none", "used": False, "reason": "off: ORACLE_RERANKER=none", "chosen": []} == (
            answer.trace.rerank.to_json())


@module_loop
async def test_the_stages_are_reported_in_order(campaign, fake):
    stages: list[str] = []

    async def on_stage(name: str) -> None:
        stages.append(name)

    async with campaign.oracle() as oracle:
        answer = await oracle.ask(QUESTION, on_stage=on_stage)
    assert ["searching", "ranking", "writing"] == stages
    assert "llm" == answer.mode


@module_loop
@pytest.mark.parametrize("question", ["", "   \n\t "])
async def test_an_empty_question_costs_no_call(campaign, fake, question):
    # Every non-empty question reaches some chunk on the semantic path; only an empty one finds nothing.
    async with campaign.oracle() as oracle:
        answer = await oracle.ask(question)
    assert ("not_found", "empty question", 0) == (answer.mode, answer.reason, answer.trace.llm_calls)
    assert ([], [], []) == (fake.requests, list(answer.fragments), list(answer.citations))


@module_loop
async def test_a_question_that_finds_nothing_costs_no_call(tmp_path, quick_embedder, campaign, fake):
    """Every note is the GM's: a player's search finds nothing, so no LLM call; the GM's finds it."""
    notes = write_notes(tmp_path / "notes", {"gm/Plans.md": MINI_CAMPAIGN["gm/Plans.md"]})
    index = Index(settings_for(notes, tmp_path / "data", fake.url), embedder=quick_embedder)
    try:
        await ingest(index)
        fake.reset()
        fake.responder = script()
        oracle = Oracle(index)
        answer = await oracle.ask("Who will betray the Hollow King?")
        assert ("not_found", "no passage matched", 0) == (answer.mode, answer.reason, answer.trace.llm_calls)
        assert "The notes hold nothing on that." == answer.text
        assert ([], []) == (fake.requests, answer.trace.fused)

        answer = await oracle.ask("Who will betray the Hollow King?", clearance=Clearance.GM)
        # One candidate: nothing to rerank, one call.
        assert ("llm", 1, 1) == (answer.mode, answer.trace.llm_calls, len(fake.chat_requests()))
        assert "nothing to rerank" == answer.trace.rerank.reason
    finally:
        await index.close()


# ---------------------------------------------------------------------------------------------
# Game-master secrets

PROBES = [
    "Who does the compass belong to?",
    "What does Pip hide?",
    "Who will betray the Hollow King?",
    "Who is the lost prince?",
    "secret plans of the true heir and the hollow king's compass",
]


@module_loop
@pytest.mark.parametrize("failure", [False, True], ids=["answered", "passages"])
async def test_a_player_question_never_sends_a_secret(campaign, fake, failure):
    fake.responder = script(answer=HttpError(500, "down") if failure else DEFAULT_ANSWER)
    async with campaign.oracle() as oracle:
        for question in PROBES:
            answer = await oracle.ask(question)
            assert {PUBLIC} == {c.visibility for c in answer.fragments} | {s.chunk.visibility for s in answer.headlines}
            assert "SECRET-" not in json.dumps(answer.to_json()), question
            assert ("passages" if failure else "llm") == answer.mode
    requests = fake.chat_requests()
    assert ["rerank", "answer"] * len(PROBES) == [kind(r) for r in requests]
    assert "SECRET-" not in json.dumps(requests)


@module_loop
@pytest.mark.parametrize("question, marker", [("What does Pip hide?", "SECRET-PIP"),
                                              ("Who does the compass belong to?", "SECRET-COMPASS")])
async def test_the_gm_gets_the_secret_in_context(campaign, fake, question, marker):
    async with campaign.oracle() as oracle:
        answer = await oracle.ask(question, clearance=Clearance.GM)
    [request] = requests_of(fake, "answer")
    assert marker in request["messages"][-1]["content"]
    secret = [c for c in answer.fragments if marker in c.text]
    assert [GM] == [c.visibility for c in secret]


# ---------------------------------------------------------------------------------------------
# The command line


JSON_KEYS = {"version", "answer", "mode", "reason", "citations", "fragments", "headlines", "trace", "language"}


def start_cli(root: Path, host: str, question: str) -> subprocess.Popen:
    """`oracle ask --json` in a fresh process, with no index yet (it ingests first)."""
    write_notes(root / "notes", CLI_NOTES)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORACLE_", "OLLAMA_"))}
    env |= {"OLLAMA_HOST": host, "ORACLE_MODEL": MODEL, "HF_HUB_OFFLINE": "1", "ORACLE_OLLAMA_PROBE_TIMEOUT": "2"}
    return subprocess.Popen(
        [sys.executable, "-m", "oracle.cli", "ask", question,
         "--notes", str(root / "notes"), "--data", str(root / "data"), "--json"],
        cwd=root,  # no developer .env read
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen) -> tuple[int, dict, str]:
    stdout, stderr = process.communicate(timeout=180)
    assert 0 == process.returncode, stderr
    return process.returncode, json.loads(stdout), stderr


@pytest.mark.integration  # the command line, in a process of its own, loads the real model
def test_oracle_ask_json_on_the_command_line(tmp_path):
    fake = FakeOllama(models=[MODEL]).run_in_thread()
    try:
        fake.responder = script(rerank={"best": [2]}, answer="Orrin Hale runs the harbour [Session 10].")
        # Both at once (each loads the model for seconds): one with the fake, one with Ollama gone.
        up = start_cli(tmp_path / "up", fake.url, QUESTION)
        down = start_cli(tmp_path / "down", closed_port_url(), QUESTION)
        code, data, _ = finish(up)
        kinds = [kind(r) for r in fake.chat_requests()]
    finally:
        fake.stop_thread()
    assert JSON_KEYS == set(data)
    assert ("llm", "") == (data["mode"], data["reason"])
    assert "Orrin Hale runs the harbour [Session 10]." == data["answer"]
    assert [{"label": "Session 10", "path": "sessions/Session 10.md", "lines": [1, 2]}] == data["citations"]
    assert 8 == len(data["fragments"])
    assert data["trace"]["rerank"]["used"] is True
    chunks = kinds.count("annotate")  # no index yet: the command ingested first, one annotation per chunk
    assert chunks > 8 and ["rerank", "answer"] == kinds[chunks:]
    assert 2 == data["trace"]["llm_calls"]

    # Ollama gone: the same command still answers, with passages, and exits 0. A player's JSON names
    # no host: the reason is in the log (stderr) and in `--gm`'s JSON.
    code, data, err = finish(down)
    assert 0 == code
    assert JSON_KEYS == set(data)
    assert "passages" == data["mode"]
    assert (EN.no_model_running, EN.no_model_running) == (data["reason"], data["trace"]["reason"])
    assert "127.0.0.1" not in json.dumps(data) and "Ollama is not reachable at http://127.0.0.1:" in err
    assert data["answer"].startswith(PASSAGES_PREFIX)
    assert 5 == len(data["citations"])
    assert "off" == data["trace"]["rerank"]["reason"]  # no annotations without Ollama


@pytest.mark.integration  # the command line loads the real model
def test_oracle_ask_prints_the_answer_as_the_model_writes_it(tmp_path, monkeypatch, capfd):
    from oracle import cli

    def invented(request: dict) -> str:
        label = fragment_headers(request)[0][0]
        return f"Orrin Hale kept the harbour ledger [{label}]. He sank the Gull at dawn [Session 999]."

    def cut(request: dict) -> CutStream:
        label = fragment_headers(request)[0][0]
        whole = " ".join(f"Orrin Hale, in sentence {n}, kept the harbour ledger [{label}]." for n in range(5))
        return CutStream(whole + " Then he sank the Gull.", after=len(split_tokens(whole)) + 3)  # "Then he sank"

    write_notes(tmp_path / "notes", CLI_NOTES)
    monkeypatch.chdir(tmp_path)  # no developer .env read
    for name in [k for k in os.environ if k.startswith(("ORACLE_", "OLLAMA_"))]:
        monkeypatch.delenv(name)
    fake = FakeOllama(models=[MODEL]).run_in_thread()
    try:
        monkeypatch.setenv("OLLAMA_HOST", fake.url)
        monkeypatch.setenv("ORACLE_MODEL", MODEL)
        args = ["ask", QUESTION, "--notes", str(tmp_path / "notes"), "--data", str(tmp_path / "data")]
        outputs = []
        for answer in (invented, cut):
            fake.responder = script(answer=answer)
            assert 0 == cli.main(args)
            outputs.append(capfd.readouterr().out)
        requests = [r for r in fake.chat_requests() if kind(r) == "answer"]
    finally:
        fake.stop_thread()

    # The model's own words first, as they came; then the text checked against the notes.
    label = fragment_headers(requests[0])[0][0]
    streamed, checked = outputs[0].split("Checked against the notes:\n")
    assert streamed == f"{invented(requests[0])}\n\n"
    assert checked.startswith(f"Orrin Hale kept the harbour ledger [{label}]. He sank the Gull at dawn.\n")

    streamed, checked = outputs[1].split("Checked against the notes:\n")
    assert streamed.startswith("Orrin Hale, in sentence 0, kept the harbour ledger") and "Then he sank" in streamed
    assert "Then he sank" not in checked
    assert f"in sentence 4, kept the harbour ledger [{label}].\n\n*(The answer stops here: the language model stopped" in checked


# ---------------------------------------------------------------------------------------------
# The context window


@module_loop
async def test_the_trace_counts_the_prompt_and_the_server_agrees(campaign, fake):
    history = [Turn("user", "Who is Orrin Hale?"), Turn("assistant", "He is the harbourmaster of Greyhaven.")]
    async with campaign.oracle() as oracle:
        answer = await oracle.ask(QUESTION, history=history)

    tokens = answer.trace.tokens.to_json()
    assert set(tokens) == {"num_ctx", "budget", "system", "question", "history", "fragments", "headlines", "total",
                           "dropped", "prompt_eval_count", "eval_count"}
    assert (tokens["num_ctx"], tokens["budget"]) == (16384, 16384 - 1024)
    assert tokens["dropped"] == {"headlines": [], "fragments": [], "trimmed": None}
    assert min(tokens[p] for p in ("system", "question", "history", "fragments", "headlines")) > 0
    [request] = requests_of(fake, "answer")
    [served] = [r.served for r in fake.requests if r.body is request]
    assert (tokens["prompt_eval_count"], tokens["eval_count"]) == (served.evaluated, len(DEFAULT_ANSWER.split()))
    assert served.evaluated <= tokens["total"] <= tokens["budget"]  # the estimate is the higher count
    assert served.fits and {r.served.num_ctx for r in fake.requests if r.served} == {16384}


@module_loop
async def test_a_small_window_drops_headlines_then_fragments_and_the_trace_names_them(campaign, fake):
    async with campaign.oracle(num_ctx=1024, answer_tokens=384) as oracle:
        answer = await oracle.ask(QUESTION)

    tokens = answer.trace.tokens.to_json()
    dropped = tokens["dropped"]
    [request] = requests_of(fake, "answer")
    assert request["options"]["num_ctx"] == 1024 and tokens["total"] <= tokens["budget"] == 1024 - 384
    assert dropped["headlines"] and not answer.headlines  # every headline went before any fragment
    assert 1 <= len(answer.fragments) < 8 and dropped["fragments"]
    assert [c.label for c in answer.fragments] == [label for label, _, _ in fragment_headers(request)]
    assert not {c.label for c in answer.fragments} & set(dropped["fragments"])
    pool_labels = [campaign.chunks[cid]["label"] for cid in pool_ids(answer)]
    assert dropped["fragments"] == sorted(dropped["fragments"], key=pool_labels.index, reverse=True)  # lowest first
    assert request["messages"][0] == {"role": "system", "content": SYSTEM}
    assert all(r.served.fits for r in fake.requests if r.served)


@module_loop
async def test_status_says_the_window_was_lowered_and_the_model_is_loaded(campaign, fake):
    fake.add_model(FakeModel(MODEL, family="llama", context_length=8192))
    try:
        async with campaign.oracle(keep_alive=KEEP_ALIVE) as oracle:  # a fresh process: the window unread
            before = await index_status(oracle.index)
            assert await oracle.index.llm.load() is None
            after = await index_status(oracle.index)
    finally:
        fake.add_model(FakeModel(MODEL))
    reason = f"lowered from ORACLE_NUM_CTX=16384: {MODEL} serves at most 8192 tokens"
    assert before.context.to_json() == {"num_ctx": 8192, "configured": 16384, "answer_tokens": 1024,
                                         "model_limit": 8192, "reason": reason}
    assert Loaded(True, 8192) == after.model_loaded
    [load] = fake.chat_requests()
    assert (load["messages"], load["options"], load["keep_alive"]) == ([], {"num_ctx": 8192}, KEEP_ALIVE)


@module_loop
async def test_the_text_is_shown_as_it_comes_and_a_failing_display_does_not_stop_the_answer(campaign, fake):
    fake.responder = script(answer="Orrin Hale runs the harbour of Greyhaven and keeps its ledgers.")
    shown: list[str] = []

    async def show(text: str) -> None:
        shown.append(text)

    async def broken(text: str) -> None:
        raise RuntimeError("the message was deleted")

    async with campaign.oracle() as oracle:
        answer = await oracle.ask(QUESTION, on_text=show)
        assert shown[-1] == answer.text and len(shown) == len(answer.text.split())
        assert all(answer.text.startswith(s) for s in shown)
        answer = await oracle.ask(QUESTION, on_text=broken)
    assert ("llm", "Orrin Hale runs the harbour of Greyhaven and keeps its ledgers.") == (answer.mode, answer.text)


@module_loop
async def test_an_answer_that_runs_out_of_its_budget_ends_on_a_whole_sentence_marked(campaign, fake):
    def long_answer(request: dict) -> str:
        label = fragment_headers(request)[0][0]
        return " ".join(f"Orrin Hale, in sentence {n}, kept the harbour ledger [{label}]." for n in range(40))

    fake.responder = script(answer=long_answer)
    async with campaign.oracle(answer_tokens=100) as oracle:
        answer = await oracle.ask(QUESTION)

    [request] = requests_of(fake, "answer")
    assert request["options"]["num_predict"] == 100
    label = fragment_headers(request)[0][0]
    written, marker = answer.text.split("\n\n")
    assert written.endswith(f"kept the harbour ledger [{label}].") and 20 <= len(written.split()) <= 100
    assert long_answer(request).startswith(written)
    assert marker == "*(The answer stops here: it reached its budget of 100 tokens (ORACLE_ANSWER_TOKENS).)*"
    assert answer.trace.incomplete == "it reached its budget of 100 tokens (ORACLE_ANSWER_TOKENS)"
    assert (answer.mode, answer.trace.tokens.eval_count) == ("llm", 100)

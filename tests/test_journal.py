"""oracle/journal.py: the questions asked at the table, in a real SQLite file, and `oracle questions`."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from oracle.answer.citations import Citation
from oracle.answer.results import Answer
from oracle.journal import Asked, Journal
from oracle.types import Clearance

pytestmark = pytest.mark.asyncio


def answer(text: str, mode: str = "llm", labels: tuple[str, ...] = ()) -> Answer:
    citations = tuple(Citation(label, f"sessions/{label}.md", 1, 3) for label in labels)
    return Answer("q", text, mode, "", citations, (), (), {})


async def filled(path) -> tuple[Journal, dict[str, int]]:
    journal = await Journal.open(path)
    ids = {}
    ids["found"] = await journal.record(Asked("ask", "who sold the compass?", 1, "Mira"),
                                        answer("The monk did [Session 1].", labels=("Session 1", "Session 1")))
    ids["dragon1"] = await journal.record(Asked("ask", "what colour is the dragon?", 1, "Mira"),
                                          answer("The notes do not say what colour the dragon is."))
    ids["nothing"] = await journal.record(Asked("ask", "zzqx", 2, "Pip"), answer("The notes hold nothing on that.", "not_found"))
    ids["dragon2"] = await journal.record(Asked("followup", "What colour's the dragon", 2, "Pip", history=("who?",)),
                                          answer("Nothing in the notes about its colour."))
    ids["gm"] = await journal.record(Asked("ask", "who is the true heir?", 3, "GM", clearance=Clearance.GM),
                                     answer("The notes don't say.", "llm"))
    return journal, ids


async def test_unanswered_groups_similar_questions_newest_first(tmp_path):
    journal, ids = await filled(tmp_path / "journal.sqlite3")
    async with journal:
        await journal.vote(ids["found"], 2, -1, gm=False)
        groups = await journal.unanswered()
        players = await journal.unanswered(clearance=Clearance.PLAYER)
    assert [(g.question, g.asked, sorted(g.why)) for g in groups] == [
        ("who is the true heir?", 1, ["abstained"]),
        ("What colour's the dragon", 2, ["abstained"]),
        ("zzqx", 1, ["not_found"]),
        ("who sold the compass?", 1, ["voted_down"]),
    ]
    assert groups[1].ids == [ids["dragon2"], ids["dragon1"]]
    assert "who is the true heir?" not in [g.question for g in players]


async def test_one_vote_per_member_changeable_and_a_gm_thumbs_up_confirms_until_taken_back(tmp_path):
    journal, ids = await filled(tmp_path / "journal.sqlite3")
    async with journal:
        found = ids["found"]
        assert (await journal.vote(found, 1, 1, gm=False)) == (await journal.votes(found))
        votes = await journal.vote(found, 1, -1, gm=False)
        assert (votes.up, votes.down) == (0, 1)
        await journal.vote(found, 9, 1, gm=True, by="GM")
        assert await journal.bank() == [{"id": f"asked-{found}", "question": "who sold the compass?",
                                         "relevant": ["Session 1"], "kind": "asked", "history": []}]
        await journal.vote(found, 9, -1, gm=True)
        assert await journal.bank() == []
        with pytest.raises(ValueError):
            await journal.vote(found, 1, 0, gm=False)


async def test_a_confirmation_by_hand_stands_against_votes(tmp_path):
    journal, ids = await filled(tmp_path / "journal.sqlite3")
    async with journal:
        await journal.confirm(ids["dragon2"], [], by="cli")
        await journal.confirm(ids["found"], ["Session 1", "Sheet: Aldous"], by="cli")
        await journal.vote(ids["found"], 9, 1, gm=True)  # a vote does not overwrite the hand
        await journal.vote(ids["found"], 9, -1, gm=True)  # nor does taking it back remove it
        bank = await journal.bank()
        with pytest.raises(KeyError):
            await journal.confirm(999, [], by="cli")
    assert [(q["question"], q["relevant"], q["kind"], q["history"]) for q in bank] == [
        ("who sold the compass?", ["Session 1", "Sheet: Aldous"], "asked", []),
        ("What colour's the dragon", [], "unanswerable", ["who?"]),
    ]


async def test_the_journal_survives_reopening(tmp_path):
    journal, ids = await filled(tmp_path / "journal.sqlite3")
    await journal.shown_in(ids["found"], 55, 66)
    await journal.close()
    async with await Journal.open(tmp_path / "journal.sqlite3") as again:
        recorded = await again.get(ids["found"])
        assert await again.get(12345) is None
    assert (recorded.channel_id, recorded.message_id, recorded.asker) == (55, 66, "Mira")
    assert [c.label for c in recorded.citations] == ["Session 1", "Session 1"]


def oracle(*args: str, data) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oracle.cli", *args, "--data", str(data)],
                          capture_output=True, text=True, timeout=120)


async def test_oracle_questions_lists_confirms_and_exports_a_bank(tmp_path):
    journal, ids = await filled(tmp_path / "journal.sqlite3")
    await journal.close()
    recent = oracle("questions", "--json", data=tmp_path)
    assert recent.returncode == 0, recent.stderr
    [found] = [q for q in json.loads(recent.stdout)["questions"] if q["id"] == ids["found"]]
    assert [c["label"] for c in found["citations"]] == ["Session 1", "Session 1"]  # as recorded
    listed = oracle("questions", "--unanswered", "--json", data=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [g["question"] for g in json.loads(listed.stdout)["unanswered"]] == [
        "who is the true heir?", "What colour's the dragon", "zzqx"]
    confirmed = oracle("questions", "--confirm", str(ids["found"]), "--label", "Session 1", data=tmp_path)
    assert confirmed.returncode == 0, confirmed.stderr
    bank = tmp_path / "asked.jsonl"
    exported = oracle("questions", "--bank", str(bank), data=tmp_path)
    assert exported.returncode == 0 and "wrote 1 confirmed questions" in exported.stderr
    assert [json.loads(line) for line in bank.read_text().splitlines()] == [
        {"id": f"asked-{ids['found']}", "question": "who sold the compass?", "relevant": ["Session 1"],
         "kind": "asked", "history": []}]
    unknown = oracle("questions", "--confirm", "999", data=tmp_path)
    assert unknown.returncode == 1 and "no question 999" in unknown.stderr

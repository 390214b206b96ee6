"""The harbour campaign the answering tests share: 24 one-session files about Orrin Hale (one long
enough to be split in three parts) plus the mini campaign and its secrets, the fake Ollama's script
for it (every chunk's annotation is `ANNOT-<hash of its text>`, text no chunk contains), and readers
of the requests it records. Its fixtures, `campaign` and `fake`, are in this folder's conftest.py.
"""
from __future__ import annotations

import contextlib
import hashlib
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from oracle.index.index import Index
from oracle.oracle import Oracle
from oracle.settings import Settings
from oracle.texts import texts
from testing.ollama_server import FakeOllama
from tests.conftest import MINI_CAMPAIGN, quick_settings
from tests.conftest import request_kind as kind

module_loop = pytest.mark.asyncio(loop_scope="module")

MODEL = "llama3.1:8b"  # not the default: every request must carry ORACLE_MODEL
KEEP_ALIVE = "17m"  # not the default: the request must carry the setting's value
QUESTION = "What did Orrin Hale do at the harbour?"
SECRETS = ["SECRET-COMPASS", "SECRET-PIP", "SECRET-PLANS", "SECRET-HEIR"]
EN = texts()
PASSAGES_PREFIX = "The Oracle could not write an answer"

EVENTS = [
    "inspected the cargo of lamp oil and charged the party a double tariff",
    "lost a game of knucklebones to Teodric and paid his debt in dried eels",
    "closed the east quay after a storm sank two fishing boats",
    "hired the party to find a smuggler hiding under the fish market",
    "argued with the Salt Guild about the price of mooring rights",
    "hung a lantern on the breakwater to guide a lost galley home",
    "confiscated a crate of black powder from a foreign caravel",
    "told Mirela that the tide tables had been forged by a clerk",
    "fell ill with marsh fever and sent his daughter to keep the ledgers",
    "raised the harbour chain to keep a pirate sloop out of the bay",
    "sold the party an old rowing boat with a cracked keel",
    "paid the crew of the Gull to search the wreck of the Amber Rose",
    "banned the Candle Monk's pilgrims from sleeping on the docks",
    "found a message in a bottle that spoke of a drowned bell",
    "refused to let the prince's barge dock without paying its toll",
    "organised the feast of nets on the longest night of the year",
    "caught Pip stealing coils of rope from the chandler's shop",
    "rebuilt the lighthouse stairs with timber from the old shipyard",
    "drank too much rum at the Anchor tavern and sang about whales",
    "signed a truce with the eel poachers of the southern shoals",
    "lost the harbour seal during a fight on the fish market steps",
    "welcomed a delegation of river dwarves selling iron chains",
    "burned the plague ship Vesper before it could reach the piers",
    "retired and handed his brass whistle to a young sailor named Corra",
]

# Over the module's 50-word session cap: three parts, one label.
LONG_SESSION = """
## The Storm
Orrin Hale climbed the seawall while the storm battered the town. He counted the ships still out at
sea and swore he would ring the alarm bell until dawn if he had to.

## The Wreck
At first light the wreck of a merchant cog lay on the rocks below the lighthouse. Orrin Hale sent
rowers out to pull survivors from the freezing water before the tide turned.

## The Reckoning
Later the merchants blamed Orrin Hale for the lost cargo. He showed them the harbour ledger, proved
the cog had ignored his warning flags, and fined the captain twenty crowns.
"""


def session_file(n: int, event: str) -> str:
    return (
        f"Orrin Hale, the harbourmaster of Greyhaven, {event}.\n"
        f"The party watched from the pier as the gulls circled overhead on day {n}.\n"
    )


HARBOUR = dict(MINI_CAMPAIGN) | {
    f"sessions/Session {n}.md": LONG_SESSION if n == 20 else session_file(n, event)
    for n, event in enumerate(EVENTS, 10)
}


# ---------------------------------------------------------------------------------------------
# The fake's script


def annotation_of(text: str) -> str:
    return "ANNOT-" + hashlib.sha256(text.encode()).hexdigest()[:12]


def annotate_reply(request: dict) -> dict:
    content = request["messages"][-1]["content"]
    passage = re.match(r"Passage from .*?:\n\n(.*)\n\nReply in JSON", content, re.S)
    assert passage, content
    return {"summary": annotation_of(passage.group(1)), "entities": []}


DEFAULT_ANSWER = "Orrin Hale runs the harbour of Greyhaven."


def script(rerank=None, answer=DEFAULT_ANSWER):
    """A responder: annotations always; `rerank` and `answer` replies (or functions of the request)."""
    rerank = {"best": [1]} if rerank is None else rerank

    def responder(request: dict):
        what = kind(request)
        if what == "annotate":
            return annotate_reply(request)
        reply = rerank if what == "rerank" else answer
        return reply(request) if callable(reply) else reply

    return responder


def requests_of(fake: FakeOllama, what: str) -> list[dict]:
    """The chat requests of questions of one kind: a load (no messages) is not one."""
    return [r for r in fake.chat_requests() if r.get("messages") and kind(r) == what]


# ---------------------------------------------------------------------------------------------
# The campaign, ingested once


def settings_for(notes: Path, data: Path, host: str, **overrides) -> Settings:
    return quick_settings(notes, data, host, **({"model": MODEL, "keep_alive": KEEP_ALIVE, "session_max_words": 50}
                                                 | overrides))


@dataclass
class Campaign:
    notes: Path
    data: Path
    fake: FakeOllama
    index: Index
    chunks: dict[str, dict]  # chunk id -> its row
    annotations: dict[str, str]  # text hash -> cached annotation

    def settings(self, **overrides) -> Settings:
        return settings_for(self.notes, self.data, self.fake.url, **overrides)

    @contextlib.asynccontextmanager
    async def oracle(self, **overrides):
        """The module's Oracle, or one over the same index with other settings."""
        if not overrides:
            yield Oracle(self.index)
            return
        index = Index(self.settings(**overrides), embedder=await self.index.embedder())
        try:
            yield Oracle(index)
        finally:
            await index.close()


def chunk_rows(settings: Settings) -> dict[str, dict]:
    with sqlite3.connect(settings.sqlite_path) as db:
        db.row_factory = sqlite3.Row
        return {r["id"]: dict(r) for r in db.execute("SELECT * FROM chunks")}


def annotation_rows(settings: Settings) -> dict[str, str]:
    with sqlite3.connect(settings.sqlite_path) as db:
        return dict(db.execute("SELECT text_hash, summary FROM annotations WHERE model = ?", (MODEL,)))


# ---------------------------------------------------------------------------------------------
# Reading the requests


HEADER = re.compile(r"^\[(?P<label>[^\]\n]+)\] \((?P<path>[^\n]+?), lines (?P<lines>\d+–\d+)(?:, part \d+ of \d+)?\)$", re.M)
HEADLINES = "HEADLINES ONLY (other notes, not shown in full):\n"


def header_of(row: dict) -> tuple[str, str, str]:
    return row["label"], row["path"], f"{row['start_line']}–{row['end_line']}"


def fragment_headers(request: dict) -> list[tuple[str, str, str]]:
    return [(m["label"], m["path"], m["lines"]) for m in HEADER.finditer(request["messages"][-1]["content"])]


def headlines(request: dict) -> list[tuple[str, str]]:
    content = request["messages"][-1]["content"]
    if HEADLINES not in content:
        return []
    block = content.split(HEADLINES, 1)[1].split("\n\n---\n\n", 1)[0]
    return [re.fullmatch(r"\[([^\]]+)\] (.+)", line).groups() for line in block.split("\n")]


def flat(messages: list[dict]) -> str:
    return " ".join(" ".join(m["content"].split()) for m in messages)


def word_runs(text: str, n: int = 8) -> list[str]:
    words = text.split()
    return [" ".join(words[i : i + n]) for i in range(max(1, len(words) - n + 1))]


def pool_ids(answer) -> list[str]:
    return [cid for cid, _, _ in answer.trace.fused]


def expected_headlines(campaign: Campaign, final: list[str], k: int = 8, cap: int = 16) -> list[tuple[str, str]]:
    """The spec of the headlines: leftovers in final order, annotated, one per label, none in full."""
    taken = {campaign.chunks[cid]["label"] for cid in final[:k]}
    out = []
    for cid in final[k:]:
        row = campaign.chunks[cid]
        note = campaign.annotations.get(row["text_hash"])
        if note and row["label"] not in taken and len(out) < cap:
            taken.add(row["label"])
            out.append((row["label"], note))
    return out


# ---------------------------------------------------------------------------------------------
# The campaign itself


# The command line's campaign: the mini campaign and six of the harbour's sessions.
CLI_NOTES = dict(MINI_CAMPAIGN) | {
    f"sessions/Session {n}.md": session_file(n, event) for n, event in enumerate(EVENTS[:6], 10)
}

"""The journal of questions asked at the table: every answer the bot gave, the votes on it, and the
sources a game master confirmed. What the notes could not answer is what to write up next.

One SQLite file beside the index (`DATA_DIR/journal.sqlite3`), never rebuilt by an ingest. The bot
writes it; `oracle questions` and `/oracle unanswered` read it. An answer keeps what it was: the
question, the text, its citations, the clearance it was written with and the index generation
that answered, so a vote stays attached to what was actually shown.

Unanswered: the answer said the notes hold nothing (mode `not_found`, or a model's answer saying
the notes do not say: `answer.results.abstains`), or somebody voted it down. Similar questions are
grouped: their content words (stop words out, accents folded, stemmed) overlap by at least
`SIMILAR` (Jaccard), so "who is the archduke?" and "who's the archduke" count as one, asked twice.

A game master confirms sources either by voting 👍 on an answer (its cited labels become the
question's gold) or with `oracle questions --confirm ID [--label L]…` (no label: the notes do not
hold the answer). Confirmed questions export as a bank in the evaluation format (`--bank FILE`).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite

from .answer.citations import Citation
from .answer.results import Answer, abstains
from .errors import OracleError
from .offload import question_step
from .retrieve.keyword import stem
from .text import STOPWORDS, text_words
from .types import Clearance

SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    id INTEGER PRIMARY KEY,
    created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%S', 'now')),
    kind TEXT NOT NULL,               -- ask | followup | message | recap
    guild_id INTEGER,
    channel_id INTEGER,
    message_id INTEGER,
    asker_id INTEGER,
    asker TEXT NOT NULL DEFAULT '',
    question TEXT NOT NULL,
    history TEXT NOT NULL DEFAULT '[]', -- earlier user turns of the thread, oldest first
    answer TEXT NOT NULL,
    mode TEXT NOT NULL,
    abstained INTEGER NOT NULL,
    citations TEXT NOT NULL,          -- [{"label", "path", "lines": [a, b]}]
    gm INTEGER NOT NULL,              -- written with the game master's clearance
    generation TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS answers_message ON answers(message_id);
CREATE TABLE IF NOT EXISTS votes (
    answer_id INTEGER NOT NULL REFERENCES answers(id),
    user_id INTEGER NOT NULL,
    vote INTEGER NOT NULL CHECK (vote IN (-1, 1)),
    gm INTEGER NOT NULL,
    updated TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%S', 'now')),
    PRIMARY KEY (answer_id, user_id)
);
CREATE TABLE IF NOT EXISTS confirmed (
    answer_id INTEGER PRIMARY KEY REFERENCES answers(id),
    labels TEXT NOT NULL,             -- the gold sources; [] = the notes do not hold the answer
    source TEXT NOT NULL,             -- "vote" (a game master's 👍) or "hand"
    by TEXT NOT NULL,
    updated TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%S', 'now'))
);
"""

SIMILAR = 0.6


class UnknownQuestion(OracleError, KeyError):
    """An id the journal does not hold."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class Asked:
    """Who asked what, where: everything about an answer that is not the answer."""

    kind: str
    question: str
    asker_id: int | None = None
    asker: str = ""
    guild_id: int | None = None
    channel_id: int | None = None
    history: tuple[str, ...] = ()
    clearance: Clearance = Clearance.PLAYER
    generation: str = ""


@dataclass(frozen=True)
class Recorded:
    id: int
    created: str
    kind: str
    question: str
    answer: str
    mode: str
    abstained: bool
    citations: tuple[Citation, ...]
    gm: bool
    generation: str
    asker: str
    asker_id: int | None
    channel_id: int | None
    message_id: int | None
    history: tuple[str, ...]


@dataclass(frozen=True)
class Votes:
    up: int
    down: int


@dataclass
class Unanswered:
    """A group of similar questions the notes did not answer, newest first."""

    question: str  # the newest wording
    asked: int
    last: str
    why: set[str] = field(default_factory=set)  # not_found | abstained | voted_down
    ids: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"question": self.question, "asked": self.asked, "last": self.last, "why": sorted(self.why),
                "ids": self.ids}


_COLUMNS = ("id, created, kind, question, answer, mode, abstained, citations, gm, generation, asker, asker_id,"
            " channel_id, message_id, history")


def _recorded(row: Sequence[Any]) -> Recorded:
    (id_, created, kind, question, answer, mode, abstained, citations, gm, generation, asker, asker_id,
     channel_id, message_id, history) = row
    cited = tuple(Citation.from_json(c) for c in json.loads(citations))
    return Recorded(id_, created, kind, question, answer, mode, bool(abstained), cited, bool(gm), generation, asker,
                    asker_id, channel_id, message_id, tuple(json.loads(history)))


def content_words(question: str) -> frozenset[str]:
    return frozenset(stem([w for w in text_words(question) if w not in STOPWORDS]))


def similar(a: frozenset[str], b: frozenset[str]) -> bool:
    if not a or not b:
        return a == b
    return len(a & b) / len(a | b) >= SIMILAR


async def open_sqlite(path: Path, schema: str) -> aiosqlite.Connection:
    """A small SQLite file of the bot's own (not the index): WAL, foreign keys, its schema made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = await aiosqlite.connect(path)
    await db.execute("PRAGMA journal_mode=WAL")
    await db.execute("PRAGMA foreign_keys=ON")
    await db.executescript(schema)
    await db.commit()
    return db


def group_unanswered(rows: Iterable[Sequence[Any]], limit: int) -> list[Unanswered]:
    """(id, created, question, mode, abstained, voted down) rows, newest first, into groups of similar
    questions, each named by its newest wording."""
    groups: list[tuple[frozenset[str], Unanswered]] = []
    for id_, created, question, mode, abstained, down in rows:
        why = {"not_found"} if mode == "not_found" else {"abstained"} if abstained else set()
        if down:
            why.add("voted_down")
        if not why:
            continue
        words = content_words(question)
        group = next((g for w, g in groups if similar(w, words)), None)
        if group is None:
            groups.append((words, Unanswered(question, 0, created)))
            group = groups[-1][1]
        group.asked += 1
        group.why |= why
        group.ids.append(id_)
    return [g for _, g in groups][:limit]


class Journal:
    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self.db = db
        self.path = path

    @classmethod
    async def open(cls, path: Path) -> Journal:
        return cls(await open_sqlite(path, SCHEMA), path)

    async def close(self) -> None:
        await self.db.close()

    async def __aenter__(self) -> Journal:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- writing -----------------------------------------------------------------------------------

    async def record(self, asked: Asked, answer: Answer) -> int:
        cursor = await self.db.execute(
            "INSERT INTO answers (kind, guild_id, channel_id, asker_id, asker, question, history, answer, mode,"
            " abstained, citations, gm, generation) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (asked.kind, asked.guild_id, asked.channel_id, asked.asker_id, asked.asker, asked.question,
             json.dumps(list(asked.history)), answer.text, answer.mode,
             int(abstains(answer)),
             json.dumps([c.to_json() for c in answer.citations]), int(asked.clearance.gm), asked.generation),
        )
        await self.db.commit()
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    async def shown_in(self, answer_id: int, channel_id: int | None, message_id: int | None) -> None:
        """Where the answer was posted (known only once it is)."""
        await self.db.execute("UPDATE answers SET channel_id = ?, message_id = ? WHERE id = ?",
                              (channel_id, message_id, answer_id))
        await self.db.commit()

    async def vote(self, answer_id: int, user_id: int, vote: int, *, gm: bool, by: str = "") -> Votes:
        """One vote per member, changeable. A game master's 👍 confirms the answer's sources; taking
        it back (👎) withdraws that confirmation, never one made by hand."""
        if vote not in (-1, 1):
            raise ValueError("a vote is 1 or -1")
        await self.db.execute(
            "INSERT INTO votes (answer_id, user_id, vote, gm) VALUES (?,?,?,?) ON CONFLICT (answer_id, user_id)"
            " DO UPDATE SET vote = excluded.vote, gm = excluded.gm,"
            " updated = strftime('%Y-%m-%d %H:%M:%S', 'now')",
            (answer_id, user_id, vote, int(gm)),
        )
        if gm and vote == 1:
            recorded = await self.get(answer_id)
            assert recorded is not None
            labels = list(dict.fromkeys(c.label for c in recorded.citations))
            await self._confirm(answer_id, labels, "vote", by, replace_hand=False)
        elif gm:
            await self.db.execute("DELETE FROM confirmed WHERE answer_id = ? AND source = 'vote'", (answer_id,))
        await self.db.commit()
        return await self.votes(answer_id)

    async def confirm(self, answer_id: int, labels: Sequence[str], by: str) -> None:
        """A game master's own word on the question's sources (no labels: the notes do not hold it)."""
        if await self.get(answer_id) is None:
            raise UnknownQuestion(f"no question {answer_id} in the journal at {self.path} (`oracle questions` lists them)")
        await self._confirm(answer_id, list(labels), "hand", by, replace_hand=True)
        await self.db.commit()

    async def _confirm(self, answer_id: int, labels: list[str], source: str, by: str, *, replace_hand: bool) -> None:
        condition = "" if replace_hand else " WHERE confirmed.source = 'vote'"
        await self.db.execute(
            "INSERT INTO confirmed (answer_id, labels, source, by) VALUES (?,?,?,?) ON CONFLICT (answer_id)"
            f" DO UPDATE SET labels = excluded.labels, source = excluded.source, by = excluded.by,"
            f" updated = strftime('%Y-%m-%d %H:%M:%S', 'now'){condition}",
            (answer_id, json.dumps(labels), source, by),
        )

    # -- reading -----------------------------------------------------------------------------------

    async def get(self, answer_id: int) -> Recorded | None:
        async with self.db.execute(f"SELECT {_COLUMNS} FROM answers WHERE id = ?", (answer_id,)) as cursor:
            row = await cursor.fetchone()
        return _recorded(row) if row else None

    async def votes(self, answer_id: int) -> Votes:
        async with self.db.execute(
            "SELECT COALESCE(SUM(vote = 1), 0), COALESCE(SUM(vote = -1), 0) FROM votes WHERE answer_id = ?",
            (answer_id,),
        ) as cursor:
            row = await cursor.fetchone()
        assert row is not None  # an aggregate without GROUP BY answers one row
        up, down = row
        return Votes(up, down)

    async def recent(self, limit: int = 50) -> list[Recorded]:
        async with self.db.execute(f"SELECT {_COLUMNS} FROM answers ORDER BY id DESC LIMIT ?", (limit,)) as cursor:
            return [_recorded(r) for r in await cursor.fetchall()]

    async def unanswered(self, *, clearance: Clearance = Clearance.GM, limit: int = 25) -> list[Unanswered]:
        """Groups of similar questions the notes did not answer, the most recently asked first.
        A player's clearance leaves out questions answered with the game master's."""
        async with self.db.execute(
            "SELECT id, created, question, mode, abstained, down FROM (SELECT a.*,"
            " EXISTS (SELECT 1 FROM votes v WHERE v.answer_id = a.id AND v.vote = -1) AS down FROM answers a"
            " WHERE a.kind != 'recap' AND (? OR a.gm = 0))"
            " WHERE mode = 'not_found' OR abstained OR down ORDER BY id DESC",
            (int(clearance.gm),),
        ) as cursor:
            rows = await cursor.fetchall()
        return await question_step(group_unanswered, rows, limit)  # stemming every question is CPU work

    async def bank(self) -> list[dict[str, Any]]:
        """Confirmed questions in the evaluation bank format (`shared/eval/README.md`), oldest first."""
        async with self.db.execute(
            "SELECT a.id, a.question, a.history, a.kind, c.labels FROM answers a JOIN confirmed c ON c.answer_id = a.id"
            " ORDER BY a.id"
        ) as cursor:
            rows = await cursor.fetchall()
        out = []
        for id_, question, history, _kind, labels in rows:
            relevant = json.loads(labels)
            history = json.loads(history)
            out.append({
                "id": f"asked-{id_}", "question": question, "relevant": relevant,
                "kind": "unanswerable" if not relevant else "followup" if history else "asked",
                "history": history,
            })
        return out

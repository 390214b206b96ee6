"""What the store counts for `oracle status` and `/oracle status`, and the answers withheld from
players that the game master's status lists.

A player's counts (`Clearance.PLAYER`) are of public text alone and carry no GM-only count: the
game master's part of `StoreStats` is `None` in them, so it cannot be shown by mistake."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...notes.names import number_ranges
from ...types import GM, PUBLIC, Clearance
from .connection import now
from .entities import EntityReads


@dataclass(frozen=True)
class GMStats:
    """The counts only the game master's status holds."""

    sessions_gm_only: int  # sessions whose every chunk is the game master's
    chunks_by_visibility: dict[str, int]
    windows: int
    entities_gm: int  # entries in the game master's Compendium

    def to_json(self) -> dict[str, Any]:
        return {
            "sessions_gm_only": self.sessions_gm_only,
            "chunks_by_visibility": self.chunks_by_visibility,
            "windows": self.windows,
            "entities_gm": self.entities_gm,
        }


@dataclass(frozen=True)
class StoreStats:
    """Counts of what is indexed, as one reader counts them."""

    files: int
    files_skipped: int
    sessions: int  # sessions a player can read something of
    session_numbers: str  # "1–12, 14": the reader's numbered sessions
    chunks: int
    chunks_by_kind: dict[str, int]
    entities: int  # entries in the players' Compendium
    annotated: int
    gm: GMStats | None = None  # the game master's alone: None in a player's

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "files_skipped": self.files_skipped,
            "sessions": self.sessions,
            "session_numbers": self.session_numbers,
            "chunks": self.chunks,
            "chunks_by_kind": self.chunks_by_kind,
            "entities": self.entities,
            "annotated": self.annotated,
            **(self.gm.to_json() if self.gm is not None else {}),
        }


@dataclass(frozen=True)
class WithheldAnswer:
    at: str  # when, ISO 8601 UTC
    question: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"at": self.at, "question": self.question, "reason": self.reason}


@dataclass(frozen=True)
class Withheld:
    """How many answers were withheld from players, and the last few, newest first."""

    count: int
    last: tuple[WithheldAnswer, ...]

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "last": [w.to_json() for w in self.last]}


class StatusReads(EntityReads):
    async def stats(self, model: str, prompt_version: str, *, clearance: Clearance = Clearance.GM) -> StoreStats:
        """Counts of what is indexed. A player's (`Clearance.PLAYER`) count public text only."""
        gm = clearance.gm
        only = "" if gm else f"WHERE {clearance.sql()}"  # the game master counts every row
        by_kind = dict(await self._all(f"SELECT kind, count(*) FROM chunks {only} GROUP BY kind ORDER BY kind"))
        # A session is its number (what several notes may record), or an unnumbered session note's label.
        readers: dict[object, bool] = {}
        for label, numbers, visibility in await self._all(
            "SELECT DISTINCT label, sessions, visibility FROM chunks WHERE kind = 'session'"
        ):
            for session in json.loads(numbers) or [label]:
                readers[session] = readers.get(session, False) or visibility == PUBLIC
        annotated = await self._count(
            "SELECT count(*) FROM chunks c JOIN annotations a ON a.text_hash = c.text_hash"
            " AND a.model = ? AND a.prompt_version = ?" + ("" if gm else f" WHERE {clearance.sql('c.visibility')}"),
            (model, prompt_version),
        )
        files = dict(await self._all(f"SELECT status, count(*) FROM files {only} GROUP BY status"))
        gm_stats = None
        if gm:
            gm_stats = GMStats(
                sessions_gm_only=sum(not public for public in readers.values()),  # every chunk the GM's
                chunks_by_visibility=dict(await self._all("SELECT visibility, count(*) FROM chunks GROUP BY visibility")),
                windows=await self._count("SELECT count(*) FROM windows"),
                entities_gm=await self.entity_count(GM),
            )
        return StoreStats(
            files=files.get("ok", 0),
            files_skipped=files.get("skipped", 0),
            sessions=sum(readers.values()),
            session_numbers=number_ranges(n for n, public in readers.items() if isinstance(n, int) and (gm or public)),
            chunks=sum(by_kind.values()),
            chunks_by_kind=by_kind,
            entities=await self.entity_count(PUBLIC),
            annotated=annotated,
            gm=gm_stats,
        )

    # -- answers withheld from players (read by the game master's status) -------------------------

    async def record_withheld(self, question: str, reason: str) -> None:
        await self.db.execute("INSERT INTO withheld (at, question, reason) VALUES (?, ?, ?)", (now(), question, reason))
        await self.db.commit()

    async def withheld(self, last: int = 5) -> Withheld:
        count = await self._count("SELECT count(*) FROM withheld")
        rows = await self._all("SELECT at, question, reason FROM withheld ORDER BY rowid DESC LIMIT ?", (last,))
        return Withheld(count, tuple(WithheldAnswer(*r) for r in rows))

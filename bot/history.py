"""The bot's memory of the threads it opened, in SQLite, so a restart does not forget a thread."""
from __future__ import annotations

from pathlib import Path

import aiosqlite

from oracle.answer.prompt import Turn
from oracle.journal import open_sqlite

SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    thread_id INTEGER PRIMARY KEY,
    guild_id INTEGER,
    channel_id INTEGER NOT NULL,
    owner_id INTEGER NOT NULL,
    created TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY,
    thread_id INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE INDEX IF NOT EXISTS turns_thread ON turns(thread_id, id);
"""


class ThreadHistory:
    def __init__(self, db: aiosqlite.Connection) -> None:
        self.db = db

    @classmethod
    async def open(cls, path: Path) -> ThreadHistory:
        return cls(await open_sqlite(path, SCHEMA))

    async def close(self) -> None:
        await self.db.close()

    async def add_thread(self, thread_id: int, guild_id: int | None, channel_id: int, owner_id: int) -> None:
        await self.db.execute(
            "INSERT OR IGNORE INTO threads (thread_id, guild_id, channel_id, owner_id) VALUES (?,?,?,?)",
            (thread_id, guild_id, channel_id, owner_id),
        )
        await self.db.commit()

    async def is_oracle_thread(self, thread_id: int) -> bool:
        async with self.db.execute("SELECT 1 FROM threads WHERE thread_id = ?", (thread_id,)) as cursor:
            return await cursor.fetchone() is not None

    async def add_turns(self, thread_id: int, turns: list[Turn]) -> None:
        await self.db.executemany(
            "INSERT INTO turns (thread_id, role, content) VALUES (?,?,?)",
            [(thread_id, t.role, t.content) for t in turns],
        )
        await self.db.commit()

    async def turns(self, thread_id: int, limit: int) -> list[Turn]:
        """The last `limit` turns, oldest first."""
        async with self.db.execute(
            "SELECT role, content FROM turns WHERE thread_id = ? ORDER BY id DESC LIMIT ?", (thread_id, limit)
        ) as cursor:
            rows = await cursor.fetchall()
        return [Turn(role, content) for role, content in reversed(rows)]

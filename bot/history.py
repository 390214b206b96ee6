"""The bot's memory of the threads it opened, in SQLite, so a restart does not forget a thread, and
of what it last told Discord (the commands it registered)."""
from __future__ import annotations

from pathlib import Path

import aiosqlite

from oracle import Turn, open_sqlite

SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    thread_id INTEGER PRIMARY KEY,
    guild_id INTEGER,
    channel_id INTEGER NOT NULL,
    owner_id INTEGER NOT NULL,
    created TEXT NOT NULL DEFAULT (datetime('now')),
    campaign TEXT NOT NULL DEFAULT 'default'  -- the campaign its answers come from
);
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY,
    thread_id INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created TEXT NOT NULL DEFAULT (datetime('now')),
    told TEXT  -- an answer's: the passage it told, which "and then what?" goes on from
);
CREATE INDEX IF NOT EXISTS turns_thread ON turns(thread_id, id);
CREATE TABLE IF NOT EXISTS kept (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class ThreadHistory:
    def __init__(self, db: aiosqlite.Connection) -> None:
        self.db = db

    @classmethod
    async def open(cls, path: Path) -> ThreadHistory:
        db = await open_sqlite(path, SCHEMA)
        # A history from before campaigns: its threads are the default one's. From before answers kept
        # the passage they told: their follow-ups search the thread's question again.
        for table, column, kind in (("threads", "campaign", "TEXT NOT NULL DEFAULT 'default'"), ("turns", "told", "TEXT")):
            async with db.execute("SELECT name FROM pragma_table_info(?)", (table,)) as cursor:
                columns = {name for (name,) in await cursor.fetchall()}
            if column not in columns:
                await db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                await db.commit()
        return cls(db)

    async def close(self) -> None:
        await self.db.close()

    async def kept(self, key: str) -> str | None:
        async with self.db.execute("SELECT value FROM kept WHERE key = ?", (key,)) as cursor:
            row = await cursor.fetchone()
        return row[0] if row else None

    async def keep(self, key: str, value: str) -> None:
        await self.db.execute("INSERT OR REPLACE INTO kept (key, value) VALUES (?, ?)", (key, value))
        await self.db.commit()

    async def add_thread(self, thread_id: int, guild_id: int | None, channel_id: int, owner_id: int,
                         campaign: str) -> None:
        await self.db.execute(
            "INSERT OR IGNORE INTO threads (thread_id, guild_id, channel_id, owner_id, campaign) VALUES (?,?,?,?,?)",
            (thread_id, guild_id, channel_id, owner_id, campaign),
        )
        await self.db.commit()

    async def campaign_of(self, thread_id: int) -> str | None:
        """The campaign of an Oracle thread; None for any other thread."""
        async with self.db.execute("SELECT campaign FROM threads WHERE thread_id = ?", (thread_id,)) as cursor:
            row = await cursor.fetchone()
        return row[0] if row else None

    async def add_turns(self, thread_id: int, turns: list[Turn]) -> None:
        await self.db.executemany(
            "INSERT INTO turns (thread_id, role, content, told) VALUES (?,?,?,?)",
            [(thread_id, t.role, t.content, t.told) for t in turns],
        )
        await self.db.commit()

    async def turns(self, thread_id: int, limit: int) -> list[Turn]:
        """The last `limit` turns, oldest first."""
        async with self.db.execute(
            "SELECT role, content, told FROM turns WHERE thread_id = ? ORDER BY id DESC LIMIT ?", (thread_id, limit)
        ) as cursor:
            rows = await cursor.fetchall()
        return [Turn(role, content, told) for role, content, told in reversed(list(rows))]

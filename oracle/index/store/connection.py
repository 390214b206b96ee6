"""The connection every part of the store reads and writes through, and what a reader is ranked by.

aiosqlite runs the connection on a thread of its own, so the event loop never waits on the disk;
`_one`, `_all` and `_all_in` are one trip to that thread each. `open` sets the connection up: WAL,
the migrations of `schema`, the `ln` SQL function where SQLite lacks it, and the per-reader FTS5
term counts (`fts_tables`).
"""
from __future__ import annotations

import logging
import math
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self, cast

import aiosqlite

from ...errors import OracleError
from ...offload import off_loop
from ...types import GM, PUBLIC, Clearance
from .. import schema

log = logging.getLogger(__name__)


class StoreError(OracleError, RuntimeError):
    pass


# Per Compendium view: the FTS5 table whose statistics rank the reader's keyword search, and its term
# counts (an fts5vocab made per connection in `Connection.open`).
_FTS = {PUBLIC: (schema.PUBLIC_FTS, "temp.public_fts_terms"), GM: (schema.ALL_FTS, "temp.fts_terms")}


def fts_tables(clearance: Clearance) -> tuple[str, str]:
    """(FTS5 table, its term counts) a reader is ranked by: over the public chunks for a player, over
    every chunk for the game master. Never a count of text the reader cannot read: bm25's document
    frequencies and average lengths, and the keyword path's common terms, would otherwise move a
    player's scores and order for what GM-only notes say."""
    return _FTS[clearance.compendium]


# Ids per statement: SQLite before 3.32 takes at most 999 host parameters.
BATCH = 500


def marks(n: int) -> str:
    """`?,?,…`: the placeholders of `n` parameters."""
    return ",".join("?" * n)


def batches(ids: Sequence[str]) -> Iterator[tuple[list[str], str]]:
    """`ids` in slices of `BATCH`, each with its `?,?,…` placeholders."""
    for i in range(0, len(ids), BATCH):
        batch = list(ids[i : i + BATCH])
        yield batch, marks(len(batch))


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def copy_sqlite(source: Path, target: Path) -> None:
    """One consistent snapshot of `source` into `target` (made or overwritten) through SQLite's backup
    API, while other connections keep reading and writing it (a file copy of a WAL database may miss
    or tear a commit)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()


async def _keep_before_migrating(path: Path, version: int) -> None:
    """The file as the previous Oracle left it, kept beside it: the way back after an upgrade."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    kept = path.parent / "backups" / f"{path.stem}.schema-{version}.{stamp}{path.suffix}"
    await off_loop(copy_sqlite, path, kept)
    log.warning("the index at %s is migrated from schema %d to %d; the file as it was is kept at %s: to go "
                "back to the previous Oracle, stop it and copy that file over the index",
                path, version, schema.SCHEMA_VERSION, kept)


class Connection:
    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self.db = db
        self.path = path

    @classmethod
    async def open(cls, path: Path, *, create: bool = True) -> Self:
        if not create and not path.exists():
            raise StoreError(f"no index at {path}: run `oracle ingest` first")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = await aiosqlite.connect(path, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the index at {path}: {exc}") from exc
        store = cls(db, path)
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA busy_timeout=10000")
            await db.execute("PRAGMA synchronous=NORMAL")
            version = await schema.user_version(db)
            if version > schema.SCHEMA_VERSION:
                raise StoreError(f"the index at {path} was built by a newer Oracle (schema {version})")
            if 0 < version < schema.SCHEMA_VERSION:
                await _keep_before_migrating(path, version)
            await schema.migrate(db, version)
            await store._ensure_ln()
            # Per connection, nothing stored: how many chunks hold each indexed term, per reader.
            for table, terms in _FTS.values():
                await db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {terms} USING fts5vocab(main, {table}, 'row')")
        except sqlite3.DatabaseError as exc:
            await db.close()
            raise StoreError(
                f"the index at {path} is unreadable ({exc}); delete the data folder and run `oracle ingest`"
            ) from exc
        return store

    async def close(self) -> None:
        await self.db.close()

    async def _ensure_ln(self) -> None:
        """SQLite builds without its math functions get Python's `ln` (`mention_scores` sums with it)."""
        try:
            await self._one("SELECT ln(1.0)")
        except sqlite3.OperationalError:
            await self.db.create_function("ln", 1, math.log, deterministic=True)

    # One trip to the connection's thread each: a cursor's execute, fetch and close are three, and
    # each trip costs the loop a wake-up (50 µs idle, more under load; a question makes a dozen reads).
    async def _one(self, sql: str, params: Sequence[object] = ()) -> tuple[Any, ...] | None:
        """The first row of a query that gives at most one."""
        rows = await self._all(sql, params)
        return rows[0] if rows else None

    async def _count(self, sql: str, params: Sequence[object] = ()) -> int:
        """The one number a `SELECT count(*)` gives."""
        row = await self._one(sql, params)
        assert row is not None
        return int(row[0])

    async def _all(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        return cast(list[tuple[Any, ...]], list(await self.db.execute_fetchall(sql, params)))  # no row factory: tuples

    async def _all_in(
        self, sql: str, ids: Sequence[str], before: Sequence[object] = (), after: Sequence[object] = ()
    ) -> list[tuple[Any, ...]]:
        """The rows of `sql` over every batch of `ids`: its `{ids}` is each batch's placeholders, its
        parameters `before`, the batch, then `after`."""
        rows: list[tuple[Any, ...]] = []
        for batch, placeholders in batches(ids):
            rows += await self._all(sql.format(ids=placeholders), (*before, *batch, *after))
        return rows

"""The ingest's side of the store: the manifest and windows it plans a change from, the one
transaction that applies the change, and the generation that tells every process the index changed.

One ingest writes at a time (see `ingest.IngestLock`); WAL lets questions read the previous index
while it does. Chunks are never updated, only inserted and deleted, so the FTS5 triggers stay simple.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ...text import normalize
from ...types import GM, PUBLIC, Chunk, Visibility
from ..compendium import Entity, Mention
from .chunks import CHUNK_COLUMNS, chunk_row
from .connection import Connection, batches, marks

# Whose Compendium an entity belongs to, by its `visibility`: PUBLIC (players') or GM.
Compendium = dict[str, tuple[Sequence[Entity], Sequence[Mention]]]


@dataclass(frozen=True)
class FileRecord:
    path: str
    hash: str
    kind: str = "note"
    title: str = ""
    aliases: tuple[str, ...] = ()
    visibility: Visibility = PUBLIC
    status: str = "ok"  # ok | skipped
    reason: str = ""
    entity: bool = False  # a character, place or thing of its own: the Compendium takes its name
    facts: str = "{}"  # what the ingest report tells of the note (JSON: `index.report.note_facts`)


class Indexed(NamedTuple):
    """A chunk as the index stores it: its head (label, heading path, aliases) and what the keyword
    path searches, head and text as the vault's language stems them (`oracle/stems.py`)."""

    chunk: Chunk
    head: str
    kw_head: str
    kw_text: str


@dataclass(frozen=True)
class Changes:
    """One ingest's edit of the index, applied in a single transaction."""

    remove_chunks: Sequence[str]
    add_chunks: Sequence[Indexed]
    add_windows: Sequence[tuple[str, str]]  # (window id, chunk id)
    add_refs: Sequence[tuple[str, str, str]]  # (chunk id, kind, key): see notes.refs.chunk_refs
    put_files: Sequence[FileRecord]
    remove_files: Sequence[str]
    meta: dict[str, str]


class Writes(Connection):
    # -- what an ingest plans from ---------------------------------------------------------------

    async def manifest(self) -> dict[str, FileRecord]:
        rows = await self._all(
            "SELECT path, hash, kind, title, aliases, visibility, status, reason, entity, facts FROM files"
        )
        return {
            r[0]: FileRecord(r[0], r[1], r[2], r[3], tuple(json.loads(r[4])), r[5], r[6], r[7], bool(r[8]), r[9])
            for r in rows
        }

    async def window_count(self) -> int:
        return await self._count("SELECT count(*) FROM windows")

    async def window_ids(self) -> set[str]:
        return {r[0] for r in await self._all("SELECT id FROM windows")}

    async def generation(self) -> str:
        """Changes whenever an ingest commits a change, in whichever process: caches keyed by it never
        serve a replaced index, and a process's dense index is read again when it changes."""
        row = await self._one("SELECT value FROM meta WHERE key = 'generation'")
        return row[0] if row else "0"

    async def set_meta(self, values: dict[str, str]) -> None:
        await self.db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(values.items()))

    async def meta_value(self, key: str, default: str = "") -> str:
        row = await self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return row[0] if row else default

    async def meta(self) -> dict[str, str]:
        return dict(await self._all("SELECT key, value FROM meta"))

    # -- the one write of an ingest --------------------------------------------------------------

    async def apply(self, changes: Changes, compendium: Compendium | None) -> None:
        """Everything in one transaction; `compendium=None` keeps the Compendium as it is."""
        db = self.db
        await db.execute("BEGIN IMMEDIATE")
        try:
            for batch, placeholders in batches(changes.remove_chunks):
                await db.execute(f"DELETE FROM chunks WHERE id IN ({placeholders})", batch)
                await db.execute(f"DELETE FROM windows WHERE chunk_id IN ({placeholders})", batch)
            await db.executemany(
                f"INSERT INTO chunks ({CHUNK_COLUMNS}, head, words, kw_head, kw_text) VALUES ({marks(18)})",
                [(*chunk_row(a.chunk), a.head, a.chunk.words, a.kw_head, a.kw_text) for a in changes.add_chunks],
            )
            await db.executemany("INSERT OR REPLACE INTO windows (id, chunk_id) VALUES (?, ?)", changes.add_windows)
            await db.executemany("INSERT OR IGNORE INTO refs (chunk_id, kind, key) VALUES (?, ?, ?)", changes.add_refs)
            await db.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in changes.remove_files])
            await db.executemany(
                "INSERT OR REPLACE INTO files (path, hash, kind, title, aliases, visibility, status, reason, entity, facts)"
                " VALUES (?,?,?,?,?,?,?,?,?,?)",
                [
                    (f.path, f.hash, f.kind, f.title, json.dumps(list(f.aliases)), f.visibility, f.status, f.reason,
                     int(f.entity), f.facts)
                    for f in changes.put_files
                ],
            )
            if compendium is not None:
                await self._write_compendium(compendium)
            if compendium is not None or changes.remove_chunks or changes.add_chunks or changes.add_windows:
                await self._next_generation()
            await db.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(changes.meta.items())
            )
            await db.commit()
        except BaseException:
            await db.rollback()
            raise

    async def _next_generation(self) -> None:
        await self.db.execute(
            "INSERT INTO meta (key, value) VALUES ('generation', '1')"
            " ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    async def replace_compendium(self, compendium: Compendium) -> None:
        await self.db.execute("BEGIN IMMEDIATE")
        try:
            await self._write_compendium(compendium)
            await self._next_generation()
            await self.db.commit()
        except BaseException:
            await self.db.rollback()
            raise

    async def _write_compendium(self, compendium: Compendium) -> None:
        """Both Compendiums, each entity row tagged with its reader (`visibility`); ids run on
        across them, so an id never names an entity of the other."""
        db = self.db
        for table in ("mentions", "aliases", "entities"):
            await db.execute(f"DELETE FROM {table}")
        first = 0
        for view in (PUBLIC, GM):
            entities, mentions = compendium[view]
            await db.executemany(
                "INSERT INTO entities (id, name, norm, kind, source, note_path, visibility) VALUES (?,?,?,?,?,?,?)",
                [(first + i, e.name, e.norm, e.kind, e.source, e.note_path, view) for i, e in enumerate(entities)],
            )
            alias_rows: dict[tuple[int, str], tuple[int, str, str, str]] = {}
            for i, e in enumerate(entities):
                for name, visibility in e.names().items():
                    norm = normalize(name)
                    if norm:
                        alias_rows.setdefault((i, norm), (first + i, name, norm, visibility))
            await db.executemany(
                "INSERT INTO aliases (entity_id, alias, norm, visibility) VALUES (?,?,?,?)", alias_rows.values()
            )
            await db.executemany(
                "INSERT INTO mentions (entity_id, chunk_id, count, visibility) VALUES (?,?,?,?)",
                [(first + m.entity, m.chunk_id, m.count, m.visibility) for m in mentions],
            )
            first += len(entities)

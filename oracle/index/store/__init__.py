"""SQLite, the source of truth: chunks, FTS5, windows, manifest, annotation cache, Compendium.

All access goes through aiosqlite, which runs each connection on a thread of its own, so the event
loop never waits on the disk. The FTS5 tables are external-content, kept in sync by triggers (chunks
are never updated, only inserted and deleted): one over every chunk, for the game master, and one
over the public chunks, for players, so that a player's keyword statistics count public text alone
(`fts_tables`). One ingest writes at a time (see `ingest.IngestLock`);
WAL lets questions read the previous index while it does. The tables are made and migrated by
`schema`; the retrievers own how rows are scored and how question words are stemmed: the store runs
the queries they hand it the parameters of.

A reader is one `Clearance`, from the bot and the CLI down to the SQL here: each read a reader makes
is limited by `Clearance.sql`, a constant condition, never a list of visibilities to bind.

One `Store`, made of one part per seam: `connection` (open, close, the one-trip reads), `chunks`
(chunk and retrieval reads), `entities` (the Compendium's reads), `annotations` (the annotation
cache), `writes` (what an ingest plans from and the one write it makes) and `status` (counts, and
answers withheld from players).
"""
from __future__ import annotations

from .annotations import AnnotationCache, CachedAnnotation
from .chunks import CHUNK_COLUMNS, ChunkHash, ChunkPlace, ChunkReads, ChunkScore, Reference, Titled
from .connection import BATCH, StoreError, batches, fts_tables, now
from .entities import EntityName, EntityRecord, MentionWeight, VisibleAlias
from .status import GMStats, StatusReads, StoreStats, Withheld, WithheldAnswer
from .writes import Changes, Compendium, FileRecord, Indexed, Writes


class Store(ChunkReads, StatusReads, AnnotationCache, Writes):
    """The index's SQLite file, opened (`Store.open`) by one process, read and written by its parts."""


__all__ = [
    "BATCH", "CHUNK_COLUMNS", "CachedAnnotation", "Changes", "ChunkHash", "ChunkPlace", "ChunkScore", "Compendium",
    "EntityName", "EntityRecord", "FileRecord", "GMStats", "Indexed", "MentionWeight", "Reference", "Store", "StoreError",
    "StoreStats", "Titled", "VisibleAlias", "Withheld", "WithheldAnswer", "batches", "fts_tables",
    "now",
]

"""The index's schema and its migrations, kept apart from the queries that use the tables.

`migrate` takes a file from the version it records (`PRAGMA user_version`; 0 for a new file) to
`SCHEMA_VERSION` in one transaction: the script steps of `MIGRATIONS`, and the one step SQL alone
cannot take (filling `refs` from the stored chunks, schema 5). A new step is a new entry in
`MIGRATIONS` and a new `SCHEMA_VERSION`; the `SCHEMA` of a new file stays the first version's.
"""
from __future__ import annotations

import json

import aiosqlite

from ..notes.refs import chunk_refs
from ..offload import ingest_step

SCHEMA_VERSION = 10

# FTS5's Porter stemmer over unicode61, so "researching" finds "research" and "camped" finds
# "camping"; terms are still the user's own words, stemmed alike on both sides.
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"

# The FTS5 tables whose statistics (bm25's document frequencies and lengths, the term counts of
# `Store.term_docs`) a reader's ranking is computed from: a player's over public text alone, so that
# no GM-only note can move a player's scores or order (a side channel: a public passage scoring
# lower for a name would tell that the game master writes about it); the game master's over every
# chunk. `public_fts` (schema 7) is external-content over the `public_chunks` view, so FTS5's own
# 'rebuild' and 'integrity-check' see the public rows only; triggers keep it in step with `chunks`.
ALL_FTS = "chunks_fts"
PUBLIC_FTS = "public_fts"

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files (
    path TEXT PRIMARY KEY,
    hash TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'note',
    title TEXT NOT NULL DEFAULT '',
    aliases TEXT NOT NULL DEFAULT '[]',
    visibility TEXT NOT NULL DEFAULT 'public',
    status TEXT NOT NULL DEFAULT 'ok',
    reason TEXT NOT NULL DEFAULT ''
);
CREATE TABLE chunks (
    n INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    path TEXT NOT NULL,
    label TEXT NOT NULL,
    kind TEXT NOT NULL,
    part INTEGER NOT NULL,
    parts INTEGER NOT NULL,
    heading TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    head TEXT NOT NULL,
    text TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    visibility TEXT NOT NULL,
    words INTEGER NOT NULL,
    links TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX chunks_path ON chunks(path);
CREATE INDEX chunks_label ON chunks(label);
-- Schema 4 rebuilds it with FTS_TOKENIZE (stemmed).
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    head, text, content='chunks', content_rowid='n', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, head, text) VALUES (new.n, new.head, new.text);
END;
CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, head, text) VALUES ('delete', old.n, old.head, old.text);
END;
CREATE TABLE windows (id TEXT PRIMARY KEY, chunk_id TEXT NOT NULL);
CREATE INDEX windows_chunk ON windows(chunk_id);
CREATE TABLE annotations (
    text_hash TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    summary TEXT NOT NULL,
    entities TEXT NOT NULL DEFAULT '[]',
    created TEXT NOT NULL,
    PRIMARY KEY (text_hash, model, prompt_version)
);
CREATE TABLE entities (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    norm TEXT NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    note_path TEXT,
    visibility TEXT NOT NULL
);
CREATE TABLE aliases (
    entity_id INTEGER NOT NULL,
    alias TEXT NOT NULL,
    norm TEXT NOT NULL,
    visibility TEXT NOT NULL,
    PRIMARY KEY (entity_id, norm)
);
CREATE INDEX aliases_norm ON aliases(norm);
CREATE TABLE mentions (
    entity_id INTEGER NOT NULL,
    chunk_id TEXT NOT NULL,
    count INTEGER NOT NULL,
    visibility TEXT NOT NULL,
    PRIMARY KEY (entity_id, chunk_id)
);
CREATE INDEX mentions_chunk ON mentions(chunk_id);
"""

# Each step takes the schema from the version before it to its own number.
MIGRATIONS = {
    # Covering indexes: visibility filters and the FTS join no longer read whole chunk rows (text).
    2: """
CREATE INDEX IF NOT EXISTS chunks_visibility ON chunks(visibility, id);
CREATE INDEX IF NOT EXISTS chunks_n_visibility ON chunks(n, visibility, id);
CREATE INDEX IF NOT EXISTS mentions_entity_visibility ON mentions(entity_id, visibility, chunk_id);
""",
    # The entity path's join: a chunk's visibility, note and order without its text.
    3: """
CREATE INDEX IF NOT EXISTS chunks_id_cover ON chunks(id, visibility, path, n);
""",
    # Stemmed keyword search. The triggers name the table, not its tokenizer, so they stay; the
    # external-content table is refilled from the chunks.
    4: f"""
DROP TABLE chunks_fts;
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    head, text, content='chunks', content_rowid='n', tokenize='{FTS_TOKENIZE}'
);
INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild');
""",
    # References between notes (see notes/refs.py): 'name' rows are the keys a chunk is known by, 'to'
    # rows the keys it refers to. Filled from the chunks already stored (`_fill_refs`).
    5: """
CREATE TABLE IF NOT EXISTS refs (
    chunk_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('name', 'to')),
    key TEXT NOT NULL,
    PRIMARY KEY (chunk_id, kind, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS refs_key ON refs(key, kind, chunk_id);
CREATE TRIGGER IF NOT EXISTS chunks_refs_ad AFTER DELETE ON chunks BEGIN
    DELETE FROM refs WHERE chunk_id = old.id;
END;
""",
    # Two Compendiums: an entity's `visibility` is now whose Compendium it belongs to (players' or
    # the game master's; see scan.build_compendium). The old one merged GM names into public
    # entities, so it is kept for the game master only, and the next ingest builds both.
    6: """
UPDATE entities SET visibility = 'gm';
DELETE FROM meta WHERE key = 'compendium';
CREATE TABLE IF NOT EXISTS withheld (at TEXT NOT NULL, question TEXT NOT NULL, reason TEXT NOT NULL);
""",
    # A player's keyword statistics over public text alone (see `PUBLIC_FTS`). Made anew, so a file
    # that already holds some of it (a test's hand-made older schema) is migrated all the same. Chunks
    # are never updated; should one ever be, the update trigger still keeps GM text out of the table.
    7: f"""
DROP TRIGGER IF EXISTS public_fts_ai;
DROP TRIGGER IF EXISTS public_fts_ad;
DROP TRIGGER IF EXISTS public_fts_au;
DROP TABLE IF EXISTS public_fts;
DROP VIEW IF EXISTS public_chunks;
CREATE VIEW public_chunks AS SELECT n, head, text FROM chunks WHERE visibility = 'public';
CREATE VIRTUAL TABLE public_fts USING fts5(
    head, text, content='public_chunks', content_rowid='n', tokenize='{FTS_TOKENIZE}'
);
CREATE TRIGGER public_fts_ai AFTER INSERT ON chunks WHEN new.visibility = 'public' BEGIN
    INSERT INTO public_fts(rowid, head, text) VALUES (new.n, new.head, new.text);
END;
CREATE TRIGGER public_fts_ad AFTER DELETE ON chunks WHEN old.visibility = 'public' BEGIN
    INSERT INTO public_fts(public_fts, rowid, head, text) VALUES ('delete', old.n, old.head, old.text);
END;
CREATE TRIGGER public_fts_au AFTER UPDATE OF n, head, text, visibility ON chunks
WHEN old.visibility = 'public' OR new.visibility = 'public' BEGIN
    INSERT INTO public_fts(public_fts, rowid, head, text)
        SELECT 'delete', old.n, old.head, old.text WHERE old.visibility = 'public';
    INSERT INTO public_fts(rowid, head, text) SELECT new.n, new.head, new.text WHERE new.visibility = 'public';
END;
INSERT INTO public_fts(rowid, head, text) SELECT n, head, text FROM public_chunks;
""",
    # A chunk's session numbers are metadata beside its label (see notes/names.py). The next ingest
    # re-reads every note; a chunk it keeps (same note, label and text) was labelled "Session N".
    8: """
ALTER TABLE chunks ADD COLUMN sessions TEXT NOT NULL DEFAULT '[]';
UPDATE chunks SET sessions = '[' || CAST(substr(label, 9) AS INTEGER) || ']'
WHERE kind = 'session' AND label GLOB 'Session [0-9]*' AND substr(label, 9) NOT GLOB '*[^0-9]*';
""",
    # What the vault's conventions make of a note (notes/conventions.py) and what the ingest report
    # tells of it (index/report.py). The next ingest re-reads every note and fills both.
    9: """
ALTER TABLE files ADD COLUMN entity INTEGER NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN facts TEXT NOT NULL DEFAULT '{}';
""",
    # The keyword path searches the text as the vault's language stems it (`oracle/stems.py`): a copy
    # of head and text, the same as them in an English vault (which this step keeps: nothing changes
    # for it); the next ingest of a vault in another language writes its stems. Both FTS5 tables, the
    # public view and the triggers are made anew over the copy.
    10: f"""
ALTER TABLE chunks ADD COLUMN kw_head TEXT NOT NULL DEFAULT '';
ALTER TABLE chunks ADD COLUMN kw_text TEXT NOT NULL DEFAULT '';
UPDATE chunks SET kw_head = head, kw_text = text;
DROP TRIGGER IF EXISTS chunks_ai;
DROP TRIGGER IF EXISTS chunks_ad;
DROP TRIGGER IF EXISTS public_fts_ai;
DROP TRIGGER IF EXISTS public_fts_ad;
DROP TRIGGER IF EXISTS public_fts_au;
DROP TABLE IF EXISTS chunks_fts;
DROP TABLE IF EXISTS public_fts;
DROP VIEW IF EXISTS public_chunks;
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    kw_head, kw_text, content='chunks', content_rowid='n', tokenize='{FTS_TOKENIZE}'
);
CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, kw_head, kw_text) VALUES (new.n, new.kw_head, new.kw_text);
END;
CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, kw_head, kw_text) VALUES ('delete', old.n, old.kw_head, old.kw_text);
END;
INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild');
CREATE VIEW public_chunks AS SELECT n, kw_head, kw_text FROM chunks WHERE visibility = 'public';
CREATE VIRTUAL TABLE public_fts USING fts5(
    kw_head, kw_text, content='public_chunks', content_rowid='n', tokenize='{FTS_TOKENIZE}'
);
CREATE TRIGGER public_fts_ai AFTER INSERT ON chunks WHEN new.visibility = 'public' BEGIN
    INSERT INTO public_fts(rowid, kw_head, kw_text) VALUES (new.n, new.kw_head, new.kw_text);
END;
CREATE TRIGGER public_fts_ad AFTER DELETE ON chunks WHEN old.visibility = 'public' BEGIN
    INSERT INTO public_fts(public_fts, rowid, kw_head, kw_text) VALUES ('delete', old.n, old.kw_head, old.kw_text);
END;
CREATE TRIGGER public_fts_au AFTER UPDATE OF n, kw_head, kw_text, visibility ON chunks
WHEN old.visibility = 'public' OR new.visibility = 'public' BEGIN
    INSERT INTO public_fts(public_fts, rowid, kw_head, kw_text)
        SELECT 'delete', old.n, old.kw_head, old.kw_text WHERE old.visibility = 'public';
    INSERT INTO public_fts(rowid, kw_head, kw_text) SELECT new.n, new.kw_head, new.kw_text WHERE new.visibility = 'public';
END;
INSERT INTO public_fts(rowid, kw_head, kw_text) SELECT n, kw_head, kw_text FROM public_chunks;
""",
}


async def user_version(db: aiosqlite.Connection) -> int:
    """The schema version the file records; 0 for a file no Oracle has written yet."""
    async with db.execute("PRAGMA user_version") as cursor:
        row = await cursor.fetchone()
    assert row is not None  # the pragma always answers one row
    return row[0]


async def migrate(db: aiosqlite.Connection, version: int) -> None:
    """Bring a file at schema `version` (at most `SCHEMA_VERSION`) up to `SCHEMA_VERSION`."""
    if version == SCHEMA_VERSION:
        return
    # One transaction: a kill mid-way leaves no half-made schema.
    steps = [SCHEMA] if version == 0 else []
    steps += [MIGRATIONS[v] for v in range(max(version, 1) + 1, SCHEMA_VERSION + 1)]
    script = "\n".join(steps)
    try:
        await db.executescript(f"BEGIN IMMEDIATE;\n{script}")
        if version < 5:
            await _fill_refs(db)
        await db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        await db.commit()
    except BaseException:
        await db.rollback()
        raise


async def _fill_refs(db: aiosqlite.Connection) -> None:
    """Schema 5: the references of the chunks already stored, as an ingest would have written them."""
    async with db.execute("SELECT id, sessions, path, text, links FROM chunks") as cursor:
        rows = await cursor.fetchall()
    refs = await ingest_step(
        chunk_refs, [(r[0], tuple(json.loads(r[1])), r[2], r[3], tuple(json.loads(r[4]))) for r in rows]
    )
    await db.executemany("INSERT OR IGNORE INTO refs (chunk_id, kind, key) VALUES (?, ?, ?)", refs)

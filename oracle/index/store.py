"""SQLite, the source of truth: chunks, FTS5, windows, manifest, annotation cache, Compendium.

All access goes through aiosqlite, which runs each connection on a thread of its own, so the event
loop never waits on the disk. The FTS5 tables are external-content, kept in sync by triggers (chunks
are never updated, only inserted and deleted): one over every chunk, for the game master, and one
over the public chunks, for players, so that a player's keyword statistics count public text alone
(`fts_tables`). One ingest writes at a time (see `ingest.IngestLock`);
WAL lets questions read the previous index while it does. The tables are made and migrated by
`schema`; the retrievers own how rows are scored and how question words are stemmed: the store runs
the queries they hand it the parameters of.
"""
from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import aiosqlite

from ..errors import OracleError
from ..notes.names import number_ranges
from ..text import normalize
from ..types import GM, PUBLIC, Chunk, ChunkText, Mentioned
from . import schema
from .compendium import Entity, Mention

# Whose Compendium an entity belongs to, by its `visibility`: PUBLIC (players') or GM.
Compendium = dict[str, tuple[Sequence[Entity], Sequence[Mention]]]


@dataclass(frozen=True)
class Titled:
    path: str
    label: str
    title: str  # "Session 34 — The Fall": the label and the heading it sits under
    kind: str = "note"
    sessions: tuple[int, ...] = ()


CHUNK_COLUMNS = (
    "id, path, label, kind, part, parts, heading, start_line, end_line, text, text_hash, visibility, links, sessions"
)


def _chunk(row: Sequence) -> Chunk:
    """A `Chunk` from a row that starts with `CHUNK_COLUMNS`."""
    return Chunk(*row[:12], links=tuple(json.loads(row[12])), sessions=tuple(json.loads(row[13])))


def _title(label: str, heading: str) -> str:
    """"Session 34 — The Fall": the label, with its heading when the heading says more."""
    heading = heading.split(" > ")[0].strip()
    name = label.split(": ", 1)[-1].replace("_", " ")
    if not heading or heading.casefold() in (label.casefold(), name.casefold()):
        return label
    hub, _, section = label.rpartition(" › ")
    if hub and heading.casefold().startswith(section.casefold()):
        return f"{hub} › {heading}"
    core = re.sub(r"^\W*\d+\W*", "", name)  # "024 - The Vault Below" under "Session 24 — The Vault Below"
    return heading if (core or label).casefold() in heading.casefold() else f"{label} — {heading}"


def compendium_view(visibilities: Sequence[str]) -> str:
    """The Compendium a reader with these visibilities reads: the game master's, or the players'."""
    return GM if GM in visibilities else PUBLIC


# Per reader (`compendium_view`): the FTS5 table whose statistics rank the reader's keyword search,
# and its term counts (an fts5vocab made per connection in `Store.open`).
_FTS = {PUBLIC: (schema.PUBLIC_FTS, "temp.public_fts_terms"), GM: (schema.ALL_FTS, "temp.fts_terms")}


def fts_tables(visibilities: Sequence[str]) -> tuple[str, str]:
    """(FTS5 table, its term counts) a reader with these visibilities is ranked by: over the public
    chunks for a player, over every chunk for the game master. Never a count of text the reader
    cannot read: bm25's document frequencies and average lengths, and the keyword path's common
    terms, would otherwise move a player's scores and order for what GM-only notes say."""
    return _FTS[compendium_view(visibilities)]


class StoreError(OracleError, RuntimeError):
    pass


@dataclass(frozen=True)
class FileRecord:
    path: str
    hash: str
    kind: str = "note"
    title: str = ""
    aliases: tuple[str, ...] = ()
    visibility: str = "public"
    status: str = "ok"  # ok | skipped
    reason: str = ""


@dataclass(frozen=True)
class Changes:
    """One ingest's edit of the index, applied in a single transaction."""

    remove_chunks: Sequence[str]
    add_chunks: Sequence[tuple[Chunk, str]]  # (chunk, index head)
    add_windows: Sequence[tuple[str, str]]  # (window id, chunk id)
    add_refs: Sequence[tuple[str, str, str]]  # (chunk id, kind, key): see notes.refs.chunk_refs
    put_files: Sequence[FileRecord]
    remove_files: Sequence[str]
    meta: dict[str, str]


# -- what the store is handed ---------------------------------------------------------------


@dataclass(frozen=True)
class MentionWeight:
    """What one entity's mentions add to a chunk's score; the entity path sets the numbers
    (retrieve/entity.py). A mention made `count` times adds `per_mention` · (1 + ln count), and
    `own_bonus` more in a chunk of `own_note`; with `own_only`, mentions elsewhere add nothing."""

    entity_id: int
    per_mention: float
    own_note: str | None
    own_bonus: float
    own_only: bool


# -- rows the store returns ------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkScore:
    """A chunk and what one query scored it; higher is better."""

    chunk_id: str
    score: float


@dataclass(frozen=True)
class ChunkHash:
    chunk_id: str
    text_hash: str
    visibility: str


@dataclass(frozen=True)
class ChunkPlace:
    label: str
    order: int  # the chunk's place in the index (ties are broken by it)


@dataclass(frozen=True)
class Reference:
    """A reference between a seed and another visible chunk, whichever of the two makes it."""

    seed: str
    chunk_id: str
    degree: int  # how many references the chunk making this one makes


@dataclass(frozen=True)
class VisibleAlias:
    """A name (or alias) of an entity, as a reader may match it."""

    entity_id: int
    norm: str  # the name normalized (text.normalize)
    name: str  # the entity's canonical name
    note_path: str | None  # the entity's own note, if it has one


@dataclass(frozen=True)
class EntityName:
    entity_id: int
    alias: str  # a name or alias, as written
    name: str  # the canonical name


@dataclass(frozen=True)
class EntityRecord:
    name: str
    kind: str
    aliases: tuple[str, ...]  # those the reader may see, the name itself left out
    mentions: tuple[Mentioned, ...]  # one per chunk, in index order


@dataclass(frozen=True)
class CachedAnnotation:
    text: str  # the annotation's one- or two-sentence description
    entities: list[dict]  # the names the model found, as it gave them


# Ids per statement: SQLite before 3.32 takes at most 999 host parameters.
BATCH = 500


def batches(ids: Sequence[str]) -> Iterator[tuple[list[str], str]]:
    """`ids` in slices of `BATCH`, each with its `?,?,…` placeholders."""
    for i in range(0, len(ids), BATCH):
        batch = list(ids[i : i + BATCH])
        yield batch, ",".join("?" * len(batch))


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Store:
    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self.db = db
        self.path = path

    @classmethod
    async def open(cls, path: Path, *, create: bool = True) -> Store:
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
    async def _one(self, sql: str, params: Sequence = ()) -> tuple | None:
        """The first row of a query that gives at most one."""
        rows = await self.db.execute_fetchall(sql, params)
        return rows[0] if rows else None

    async def _all(self, sql: str, params: Sequence = ()) -> list[tuple]:
        return list(await self.db.execute_fetchall(sql, params))

    async def _all_in(self, sql: str, ids: Sequence[str], before: Sequence = (), after: Sequence = ()) -> list[tuple]:
        """The rows of `sql` over every batch of `ids`: its `{ids}` is each batch's placeholders, its
        parameters `before`, the batch, then `after`."""
        rows: list[tuple] = []
        for batch, marks in batches(ids):
            rows += await self._all(sql.format(ids=marks), (*before, *batch, *after))
        return rows

    # -- manifest ------------------------------------------------------------------------------

    async def manifest(self) -> dict[str, FileRecord]:
        rows = await self._all("SELECT path, hash, kind, title, aliases, visibility, status, reason FROM files")
        return {
            r[0]: FileRecord(r[0], r[1], r[2], r[3], tuple(json.loads(r[4])), r[5], r[6], r[7]) for r in rows
        }

    async def chunk_ids(self) -> set[str]:
        return {r[0] for r in await self._all("SELECT id FROM chunks")}

    async def chunk_ids_for(self, paths: Iterable[str]) -> set[str]:
        ids: set[str] = set()
        for path in paths:
            ids.update(r[0] for r in await self._all("SELECT id FROM chunks WHERE path = ?", (path,)))
        return ids

    async def chunks_missing_windows(self, stored: set[str], exclude: set[str]) -> list[Chunk]:
        """Chunks with a window SQLite names but the vector store lacks."""
        rows = await self._all("SELECT id, chunk_id FROM windows")
        missing = sorted({chunk for wid, chunk in rows if wid not in stored and chunk not in exclude})
        return await self.chunks_by_ids(missing)

    async def entity_count(self, view: str = PUBLIC) -> int:
        """Entities in the players' (`public`) or the game master's (`gm`) Compendium."""
        return (await self._one("SELECT count(*) FROM entities WHERE visibility = ?", (view,)))[0]

    async def mention_count(self) -> int:
        """Rows of both Compendiums' mentions: (entity, chunk) pairs."""
        return (await self._one("SELECT count(*) FROM mentions"))[0]

    async def window_count(self) -> int:
        return (await self._one("SELECT count(*) FROM windows"))[0]

    async def window_ids(self) -> set[str]:
        return {r[0] for r in await self._all("SELECT id FROM windows")}

    async def chunk_texts(self) -> list[ChunkText]:
        rows = await self._all("SELECT id, head, text, visibility, links FROM chunks ORDER BY n")
        return [ChunkText(r[0], r[1], r[2], r[3], tuple(json.loads(r[4]))) for r in rows]

    async def chunk_hashes(self) -> list[ChunkHash]:
        """Every chunk's text hash, in index order."""
        return [ChunkHash(*r) for r in await self._all("SELECT id, text_hash, visibility FROM chunks ORDER BY n")]

    async def chunks_by_ids(self, ids: Sequence[str]) -> list[Chunk]:
        return (await self.chunks_and_rowids(ids))[0]

    async def chunks_and_rowids(self, ids: Sequence[str]) -> tuple[list[Chunk], dict[str, int]]:
        """The chunks of `ids` in that order, and each one's rowid (what FTS5 names it by: see
        `matching_chunks`), read together."""
        rows = await self._all_in(
            f"SELECT {CHUNK_COLUMNS}, n FROM chunks WHERE id IN ({{ids}})",
            ids,
        )
        out = [_chunk(r) for r in rows]
        order = {cid: i for i, cid in enumerate(ids)}
        return sorted(out, key=lambda c: order[c.id]), {r[0]: r[-1] for r in rows}

    async def chunks_at(self, path: str, start: int, end: int, visibilities: Sequence[str]) -> list[Chunk]:
        """The chunks of `path` readable by `visibilities` whose lines overlap `start`–`end`, in note order:
        what a citation points at, read again from the index as it is now."""
        marks = ",".join("?" * len(visibilities))
        rows = await self._all(
            f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE path = ? AND start_line <= ? AND end_line >= ?"
            f" AND visibility IN ({marks}) ORDER BY start_line, part",
            (path, end, start, *visibilities),
        )
        return [_chunk(r) for r in rows]

    async def titles(self, visibilities: Sequence[str], *, kind: str | None = None) -> list[Titled]:
        """Each note's labels readable by `visibilities` (of one `kind`, if given), with their titles,
        in note order: what a reingest summary names ("Session 34 — The Fall"), what players are told
        is new, and the sessions a recap offers."""
        marks = ",".join("?" * len(visibilities))
        rows = await self._all(
            f"SELECT path, label, heading, kind, sessions FROM chunks WHERE visibility IN ({marks})"
            + (" AND kind = ?" if kind else "") + " ORDER BY path, start_line, part",
            (*visibilities, *([kind] if kind else [])),
        )
        seen: dict[tuple[str, str], Titled] = {}
        for path, label, heading, kind_, sessions in rows:
            seen.setdefault((path, label), Titled(path, label, _title(label, heading), kind_, tuple(json.loads(sessions))))
        return list(seen.values())

    async def session_chunks(self, visibilities: Sequence[str]) -> list[Chunk]:
        """Every session chunk readable by `visibilities`, in note order."""
        marks = ",".join("?" * len(visibilities))
        rows = await self._all(
            f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE kind = 'session' AND visibility IN ({marks})"
            " ORDER BY path, start_line, part",
            tuple(visibilities),
        )
        return [_chunk(r) for r in rows]

    # -- retrieval reads -------------------------------------------------------------------------

    async def keyword_search(
        self, match: str, visibilities: Sequence[str], limit: int, weights: tuple[float, float]
    ) -> list[ChunkScore]:
        """Chunks by FTS5 bm25, best first; higher is better. `match` must be pre-quoted. Scored by
        the reader's FTS5 table (`fts_tables`): a player's bm25 counts public text alone."""
        if not match:
            return []
        fts, _ = fts_tables(visibilities)
        marks = ",".join("?" * len(visibilities))
        rows = await self._all(
            # The planner prefers the rowid lookup, which reads whole chunk rows (text and all) for every
            # match; the covering index halves the query on a 25k-chunk index.
            f"SELECT c.id, -bm25({fts}, ?, ?) AS score FROM {fts}"
            f" JOIN chunks c INDEXED BY chunks_n_visibility ON c.n = {fts}.rowid"
            f" WHERE {fts} MATCH ? AND c.visibility IN ({marks}) ORDER BY score DESC, c.n LIMIT ?",
            (*weights, match, *visibilities, limit),
        )
        return [ChunkScore(r[0], float(r[1])) for r in rows]

    async def references(self, seeds: Sequence[str], visibilities: Sequence[str]) -> list[Reference]:
        """Each reference from a seed to a visible chunk (forward) and from a visible chunk to a seed
        (backward)."""
        if not seeds:
            return []
        seed_marks = ",".join("?" * len(seeds))
        vis_marks = ",".join("?" * len(visibilities))
        degree = "(SELECT count(*) FROM refs d WHERE d.chunk_id = {} AND d.kind = 'to')"
        rows = await self._all(
            f"SELECT a.chunk_id, b.chunk_id, {degree.format('a.chunk_id')} FROM refs a"
            f" JOIN refs b ON b.key = a.key AND b.kind = 'name'"
            f" JOIN chunks c INDEXED BY chunks_id_cover ON c.id = b.chunk_id AND c.visibility IN ({vis_marks})"
            f" WHERE a.chunk_id IN ({seed_marks}) AND a.kind = 'to'"
            f" UNION ALL"
            f" SELECT a.chunk_id, b.chunk_id, {degree.format('b.chunk_id')} FROM refs a"
            f" JOIN refs b ON b.key = a.key AND b.kind = 'to'"
            f" JOIN chunks c INDEXED BY chunks_id_cover ON c.id = b.chunk_id AND c.visibility IN ({vis_marks})"
            f" WHERE a.chunk_id IN ({seed_marks}) AND a.kind = 'name'",
            (*visibilities, *seeds, *visibilities, *seeds),
        )
        return [Reference(r[0], r[1], int(r[2])) for r in rows]

    async def term_docs(self, terms: Sequence[str], visibilities: Sequence[str] = (PUBLIC,)) -> dict[str, int]:
        """{term: chunks the reader reads holding it} for the index terms (stemmed as FTS_TOKENIZE
        stems) among `terms`; a term no such chunk holds is left out. Their N is
        `count_chunks(visibilities)`. A player's (the default) count public chunks alone."""
        if not terms:
            return {}
        _, vocab = fts_tables(visibilities)
        asked = sorted(set(terms))
        rows = await self._all(f"SELECT term, doc FROM {vocab} WHERE term IN ({','.join('?' * len(asked))})", asked)
        return {r[0]: int(r[1]) for r in rows if r[1]}

    async def matching_chunks(
        self,
        rowids: Sequence[int],
        matches: Sequence[str],
        lookups: Collection[int] = (),
        visibilities: Sequence[str] = (PUBLIC,),
    ) -> list[tuple[int, int]]:
        """(number of the FTS5 query in `matches`, rowid) for each chunk among `rowids` (as
        `chunks_and_rowids` gives them) each query matches. Every query is pre-quoted. A query whose
        number is in `lookups` (a term many chunks hold) is asked chunk by chunk, by rowid, so its cost
        follows the candidates; the others (rarer terms, short posting lists) are read through once,
        which is cheaper than a few dozen lookups: each posting is checked against the candidates'
        rowids, never joined to its chunk. The unary `+` keeps SQLite from turning the candidates into
        rowid lookups there. Read from the reader's FTS5 table (`fts_tables`), as its term counts were."""
        if not rowids or not matches:
            return []
        fts, _ = fts_tables(visibilities)
        asked = [i for i in range(len(matches)) if i in lookups]
        ctes = [f"d(n) AS (VALUES {','.join('(?)' for _ in rowids)})"]
        params: list = [*rowids]
        if asked:
            ctes.append(f"q(i, m) AS (VALUES {','.join('(?, ?)' for _ in asked)})")
            params += [v for i in asked for v in (i, matches[i])]
        parts = []
        for i in range(len(matches)):
            if i not in lookups:
                parts.append(f"SELECT {i}, f.rowid FROM {fts} f WHERE f.{fts} MATCH ? AND +f.rowid IN d")
                params.append(matches[i])
        if asked:
            parts.append(
                "SELECT q.i, d.n FROM d, q"
                f" WHERE EXISTS (SELECT 1 FROM {fts} f WHERE f.{fts} MATCH q.m AND f.rowid = d.n)"
            )
        return await self._all(f"WITH {', '.join(ctes)} " + " UNION ALL ".join(parts), params)

    async def visible_chunk_ids(self, ids: Sequence[str], visibilities: Sequence[str]) -> set[str]:
        vmarks = ",".join("?" * len(visibilities))
        rows = await self._all_in(
            f"SELECT id FROM chunks WHERE id IN ({{ids}}) AND visibility IN ({vmarks})", ids, after=visibilities
        )
        return {r[0] for r in rows}

    async def visible_aliases(self, visibilities: Sequence[str]) -> list[VisibleAlias]:
        """The names a reader may match against."""
        marks = ",".join("?" * len(visibilities))
        rows = await self._all(
            f"SELECT a.entity_id, a.norm, e.name, e.note_path FROM aliases a JOIN entities e ON e.id = a.entity_id"
            f" WHERE e.visibility = ? AND a.visibility IN ({marks})",
            (compendium_view(visibilities), *visibilities),
        )
        return [VisibleAlias(*r) for r in rows]

    async def mention_scores(
        self, weights: Sequence[MentionWeight], visibilities: Sequence[str], limit: int
    ) -> list[ChunkScore]:
        """Visible chunks mentioning the weighted entities, best first (ties in index order), each
        scored the sum of what its mentions add (see `MentionWeight`). Summed here, in SQL, so a
        common entity's thousands of mentions never cross into Python."""
        if not weights:
            return []
        values = ",".join("(?, ?, ?, ?, ?)" for _ in weights)
        vmarks = ",".join("?" * len(visibilities))
        rows = await self._all(
            f"WITH w(entity_id, per_mention, own, own_bonus, own_only) AS (VALUES {values})"
            " SELECT c.id, sum(w.per_mention * (1 + ln(max(m.count, 1)))"
            "  + CASE WHEN c.path = w.own THEN w.own_bonus ELSE 0 END) AS score, c.n"
            " FROM w JOIN mentions m ON m.entity_id = w.entity_id"
            " JOIN chunks c INDEXED BY chunks_id_cover ON c.id = m.chunk_id"
            f" WHERE m.visibility IN ({vmarks}) AND c.visibility IN ({vmarks}) AND (w.own_only = 0 OR c.path = w.own)"
            " GROUP BY c.id ORDER BY score DESC, c.n LIMIT ?",
            (
                *[v for w in weights for v in (w.entity_id, w.per_mention, w.own_note, w.own_bonus, int(w.own_only))],
                *visibilities,
                *visibilities,
                limit,
            ),
        )
        return [ChunkScore(r[0], float(r[1])) for r in rows]

    async def mention_counts(self, entity_ids: Sequence[int], visibilities: Sequence[str]) -> dict[int, int]:
        """How many visible chunks mention each entity (its document frequency)."""
        emarks = ",".join("?" * len(entity_ids))
        vmarks = ",".join("?" * len(visibilities))
        rows = await self._all(
            f"SELECT m.entity_id, count(*) FROM mentions m JOIN chunks c INDEXED BY chunks_id_cover ON c.id = m.chunk_id"
            f" WHERE m.entity_id IN ({emarks}) AND m.visibility IN ({vmarks}) AND c.visibility IN ({vmarks})"
            f" GROUP BY m.entity_id",
            (*entity_ids, *visibilities, *visibilities),
        )
        return dict(rows)

    async def chunk_places(self, ids: Sequence[str]) -> dict[str, ChunkPlace]:
        """Where each chunk is: its label and its place in the index."""
        rows = await self._all_in("SELECT id, label, n FROM chunks WHERE id IN ({ids})", ids)
        return {r[0]: ChunkPlace(r[1], r[2]) for r in rows}

    async def count_chunks(self, visibilities: Sequence[str]) -> int:
        """The chunks a reader reads: the N of its keyword statistics (`term_docs`) and of the
        entity path's rarity weights."""
        marks = ",".join("?" * len(visibilities))
        return (await self._one(f"SELECT count(*) FROM chunks WHERE visibility IN ({marks})", visibilities))[0]

    async def generation(self) -> str:
        """Changes whenever an ingest commits a change, in whichever process: caches keyed by it never
        serve a replaced index, and a process's dense index is read again when it changes."""
        row = await self._one("SELECT value FROM meta WHERE key = 'generation'")
        return row[0] if row else "0"

    async def entity_names(self, visibilities: Sequence[str]) -> list[EntityName]:
        """Every name and alias of every visible entity, for autocomplete."""
        marks = ",".join("?" * len(visibilities))
        rows = await self._all(
            f"SELECT a.entity_id, a.alias, e.name FROM aliases a JOIN entities e ON e.id = a.entity_id"
            f" WHERE e.visibility = ? AND a.visibility IN ({marks}) ORDER BY e.name, a.alias",
            (compendium_view(visibilities), *visibilities),
        )
        return [EntityName(*r) for r in rows]

    async def entity(self, entity_id: int, visibilities: Sequence[str]) -> EntityRecord | None:
        """One entity as a reader may see it: its visible aliases and the visible chunks mentioning it."""
        marks = ",".join("?" * len(visibilities))
        row = await self._one(
            "SELECT name, kind FROM entities WHERE id = ? AND visibility = ?", (entity_id, compendium_view(visibilities))
        )
        if row is None:
            return None
        aliases = tuple(
            r[0]
            for r in await self._all(
                f"SELECT alias FROM aliases WHERE entity_id = ? AND visibility IN ({marks}) ORDER BY alias",
                (entity_id, *visibilities),
            )
            if r[0] != row[0]
        )
        mentions = await self._all(
            "SELECT c.label, c.path, c.start_line, c.end_line, m.count, c.sessions FROM mentions m"
            f" JOIN chunks c ON c.id = m.chunk_id"
            f" WHERE m.entity_id = ? AND m.visibility IN ({marks}) AND c.visibility IN ({marks}) ORDER BY c.n",
            (entity_id, *visibilities, *visibilities),
        )
        return EntityRecord(
            row[0], row[1], aliases, tuple(Mentioned(*r[:5], sessions=tuple(json.loads(r[5]))) for r in mentions)
        )

    # -- the one write of an ingest --------------------------------------------------------------

    async def apply(self, changes: Changes, compendium: Compendium | None) -> None:
        """Everything in one transaction; `compendium=None` keeps the Compendium as it is."""
        db = self.db
        await db.execute("BEGIN IMMEDIATE")
        try:
            for batch, marks in batches(changes.remove_chunks):
                await db.execute(f"DELETE FROM chunks WHERE id IN ({marks})", batch)
                await db.execute(f"DELETE FROM windows WHERE chunk_id IN ({marks})", batch)
            await db.executemany(
                f"INSERT INTO chunks ({CHUNK_COLUMNS}, head, words) VALUES ({','.join('?' * 16)})",
                [
                    (c.id, c.path, c.label, c.kind, c.part, c.parts, c.heading, c.start_line, c.end_line, c.text,
                     c.text_hash, c.visibility, json.dumps(list(c.links)), json.dumps(list(c.sessions)), head, c.words)
                    for c, head in changes.add_chunks
                ],
            )
            await db.executemany("INSERT OR REPLACE INTO windows (id, chunk_id) VALUES (?, ?)", changes.add_windows)
            await db.executemany("INSERT OR IGNORE INTO refs (chunk_id, kind, key) VALUES (?, ?, ?)", changes.add_refs)
            await db.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in changes.remove_files])
            await db.executemany(
                "INSERT OR REPLACE INTO files (path, hash, kind, title, aliases, visibility, status, reason)"
                " VALUES (?,?,?,?,?,?,?,?)",
                [
                    (f.path, f.hash, f.kind, f.title, json.dumps(list(f.aliases)), f.visibility, f.status, f.reason)
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
            alias_rows = {}
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

    # -- annotation cache ----------------------------------------------------------------------

    async def annotations(self, model: str, prompt_version: str) -> dict[str, CachedAnnotation]:
        """The cached annotations of one model and prompt, by text hash."""
        rows = await self._all(
            "SELECT text_hash, summary, entities FROM annotations WHERE model = ? AND prompt_version = ?",
            (model, prompt_version),
        )
        return {r[0]: CachedAnnotation(r[1], json.loads(r[2])) for r in rows}

    async def annotations_of(self, hashes: Sequence[str], model: str, prompt_version: str) -> dict[str, str]:
        """Cached annotations by text hash, for the chunks of one question."""
        rows = await self._all_in(
            "SELECT text_hash, summary FROM annotations"
            " WHERE model = ? AND prompt_version = ? AND text_hash IN ({ids})",
            list(dict.fromkeys(hashes)),
            before=(model, prompt_version),
        )
        return dict(rows)

    async def put_annotation(
        self, text_hash: str, model: str, prompt_version: str, summary: str, entities: list[dict]
    ) -> None:
        await self.db.execute(
            "INSERT OR REPLACE INTO annotations (text_hash, model, prompt_version, summary, entities, created)"
            " VALUES (?,?,?,?,?,?)",
            (text_hash, model, prompt_version, summary, json.dumps(entities), now()),
        )
        await self.db.commit()

    async def forget_orphan_annotations(self) -> int:
        """Drop cached annotations of text no chunk holds any more: a removed secret leaves no trace."""
        cursor = await self.db.execute("DELETE FROM annotations WHERE text_hash NOT IN (SELECT text_hash FROM chunks)")
        await self.db.commit()
        return cursor.rowcount

    # -- status --------------------------------------------------------------------------------

    async def set_meta(self, values: dict[str, str]) -> None:
        await self.db.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(values.items()))

    async def meta(self) -> dict[str, str]:
        return dict(await self._all("SELECT key, value FROM meta"))

    async def stats(self, model: str, prompt_version: str, *, gm: bool = True) -> dict:
        """Counts of what is indexed. A player's (`gm=False`) count public text only."""
        only = "" if gm else "WHERE visibility = 'public'"
        by_kind = dict(await self._all(f"SELECT kind, count(*) FROM chunks {only} GROUP BY kind ORDER BY kind"))
        # A session is its number (what several notes may record), or an unnumbered session note's label.
        readers: dict[object, bool] = {}
        for label, numbers, visibility in await self._all(
            "SELECT DISTINCT label, sessions, visibility FROM chunks WHERE kind = 'session'"
        ):
            for session in json.loads(numbers) or [label]:
                readers[session] = readers.get(session, False) or visibility == PUBLIC
        annotated = (
            await self._one(
                "SELECT count(*) FROM chunks c JOIN annotations a ON a.text_hash = c.text_hash"
                " AND a.model = ? AND a.prompt_version = ?" + ("" if gm else " WHERE c.visibility = 'public'"),
                (model, prompt_version),
            )
        )[0]
        files = dict(await self._all(f"SELECT status, count(*) FROM files {only} GROUP BY status"))
        stats = {
            "files": files.get("ok", 0),
            "files_skipped": files.get("skipped", 0),
            "sessions": sum(readers.values()),  # sessions a player can read something of
            "session_numbers": number_ranges(n for n, public in readers.items() if isinstance(n, int) and (gm or public)),
            "chunks": sum(by_kind.values()),
            "chunks_by_kind": by_kind,
            "entities": await self.entity_count(PUBLIC),
            "annotated": annotated,
        }
        if not gm:
            return stats
        by_visibility = dict(await self._all("SELECT visibility, count(*) FROM chunks GROUP BY visibility"))
        return stats | {
            "sessions_gm_only": sum(not public for public in readers.values()),  # every chunk the GM's
            "chunks_by_visibility": by_visibility,
            "windows": (await self._one("SELECT count(*) FROM windows"))[0],
            "entities_gm": await self.entity_count(GM),
        }

    # -- answers withheld from players (read by the game master's status) -------------------------

    async def record_withheld(self, question: str, reason: str) -> None:
        await self.db.execute("INSERT INTO withheld (at, question, reason) VALUES (?, ?, ?)", (now(), question, reason))
        await self.db.commit()

    async def withheld(self, last: int = 5) -> dict:
        count = (await self._one("SELECT count(*) FROM withheld"))[0]
        rows = await self._all("SELECT at, question, reason FROM withheld ORDER BY rowid DESC LIMIT ?", (last,))
        return {"count": count, "last": [{"at": r[0], "question": r[1], "reason": r[2]} for r in rows]}

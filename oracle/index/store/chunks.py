"""Reads of the chunks: by id and by place, what a reader's keyword search and term counts find,
the references between chunks, and the titles the bot names notes by.

Every read a reader makes is limited to the chunks its `Clearance` may read, by a constant SQL
condition (`Clearance.sql`), and ranked by its own FTS5 table (`fts_tables`)."""
from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ...lexicon import DEFAULT as DEFAULT_LANGUAGE
from ...stems import Stemming
from ...types import Chunk, ChunkText, Clearance
from .connection import Connection, fts_tables, marks

CHUNK_COLUMNS = (
    "id, path, label, kind, part, parts, heading, start_line, end_line, text, text_hash, visibility, links, sessions"
)


def row_chunk(row: Sequence[Any]) -> Chunk:
    """A `Chunk` from a row that starts with `CHUNK_COLUMNS`."""
    id_, path, label, kind, part, parts, heading, start, end, text, text_hash, visibility, links, sessions = row[:14]
    return Chunk(id_, path, label, kind, part, parts, heading, start, end, text, text_hash, visibility,
                 tuple(json.loads(links)), tuple(json.loads(sessions)))


def chunk_row(chunk: Chunk) -> tuple[str | int, ...]:
    """The values of `CHUNK_COLUMNS` for `chunk`: what `row_chunk` reads back."""
    c = chunk
    return (c.id, c.path, c.label, c.kind, c.part, c.parts, c.heading, c.start_line, c.end_line, c.text,
            c.text_hash, c.visibility, json.dumps(list(c.links)), json.dumps(list(c.sessions)))


@dataclass(frozen=True)
class Titled:
    path: str
    label: str
    title: str  # "Session 34 — The Fall": the label and the heading it sits under
    kind: str = "note"
    sessions: tuple[int, ...] = ()


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


class ChunkReads(Connection):
    # -- every chunk (the ingest's and the Compendium's reads) ------------------------------------

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
        rows = await self._all_in(f"SELECT {CHUNK_COLUMNS}, n FROM chunks WHERE id IN ({{ids}})", ids)
        order = {cid: i for i, cid in enumerate(ids)}
        return sorted(map(row_chunk, rows), key=lambda c: order[c.id]), {r[0]: r[-1] for r in rows}

    async def chunk_places(self, ids: Sequence[str]) -> dict[str, ChunkPlace]:
        """Where each chunk is: its label and its place in the index."""
        rows = await self._all_in("SELECT id, label, n FROM chunks WHERE id IN ({ids})", ids)
        return {r[0]: ChunkPlace(r[1], r[2]) for r in rows}

    # -- a reader's chunks -------------------------------------------------------------------------

    async def chunks_at(self, path: str, start: int, end: int, clearance: Clearance) -> list[Chunk]:
        """The chunks of `path` the reader may read whose lines overlap `start`–`end`, in note order:
        what a citation points at, read again from the index as it is now."""
        rows = await self._all(
            f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE path = ? AND start_line <= ? AND end_line >= ?"
            f" AND {clearance.sql()} ORDER BY start_line, part",
            (path, end, start),
        )
        return [row_chunk(r) for r in rows]

    async def titles(self, clearance: Clearance, *, kind: str | None = None) -> list[Titled]:
        """Each note's labels the reader may read (of one `kind`, if given), with their titles, in note
        order: what a reingest summary names ("Session 34 — The Fall"), what players are told is new,
        and the sessions a recap offers."""
        rows = await self._all(
            f"SELECT path, label, heading, kind, sessions FROM chunks WHERE {clearance.sql()}"
            + (" AND kind = ?" if kind else "") + " ORDER BY path, start_line, part",
            [kind] if kind else [],
        )
        seen: dict[tuple[str, str], Titled] = {}
        for path, label, heading, kind_, sessions in rows:
            seen.setdefault((path, label), Titled(path, label, _title(label, heading), kind_, tuple(json.loads(sessions))))
        return list(seen.values())

    async def session_chunks(self, clearance: Clearance) -> list[Chunk]:
        """Every session chunk the reader may read, in note order."""
        rows = await self._all(
            f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE kind = 'session' AND {clearance.sql()}"
            " ORDER BY path, start_line, part"
        )
        return [row_chunk(r) for r in rows]

    async def readable_chunk(self, chunk_id: str, clearance: Clearance) -> Chunk | None:
        """The chunk `chunk_id`, if it is still in the index and the reader may read it."""
        row = await self._one(f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE id = ? AND {clearance.sql()}", (chunk_id,))
        return row_chunk(row) if row else None

    async def chunk_beside(self, chunk: Chunk, clearance: Clearance, *, after: bool = True) -> Chunk | None:
        """The chunk of `chunk`'s note right after it in note order (`after`), or right before it, that
        the reader may read (None: it ends, or opens, the note)."""
        op, order = (">", "") if after else ("<", " DESC")
        row = await self._one(
            f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE path = ? AND (start_line {op} ? OR (start_line = ? AND part {op} ?))"
            f" AND {clearance.sql()} ORDER BY start_line{order}, part{order} LIMIT 1",
            (chunk.path, chunk.start_line, chunk.start_line, chunk.part),
        )
        return row_chunk(row) if row else None

    async def chunks_of_session(self, number: int, clearance: Clearance) -> list[Chunk]:
        """The session chunks recording session `number` the reader may read, in note order."""
        rows = await self._all(
            f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE kind = 'session' AND {clearance.sql()}"
            " AND EXISTS (SELECT 1 FROM json_each(chunks.sessions) WHERE value = ?)"
            " ORDER BY path, start_line, part",
            (number,),
        )
        return [row_chunk(r) for r in rows]

    async def stemming(self) -> Stemming:
        """How the keyword index writes words: in the language the last ingest read the notes in."""
        row = await self._one("SELECT value FROM meta WHERE key = 'language'")
        return Stemming(row[0] if row else DEFAULT_LANGUAGE)

    async def sessions_by_path(self) -> dict[str, set[int]]:
        """The session numbers each note's chunks record (a log's sections too), secrets' included."""
        out: dict[str, set[int]] = {}
        for path, sessions in await self._all("SELECT path, sessions FROM chunks WHERE sessions != '[]'"):
            out.setdefault(path, set()).update(json.loads(sessions))
        return out

    async def visible_chunk_ids(self, ids: Sequence[str], clearance: Clearance) -> set[str]:
        rows = await self._all_in(f"SELECT id FROM chunks WHERE id IN ({{ids}}) AND {clearance.sql()}", ids)
        return {r[0] for r in rows}

    async def count_chunks(self, clearance: Clearance) -> int:
        """The chunks a reader reads: the N of its keyword statistics (`term_docs`) and of the
        entity path's rarity weights."""
        return await self._count(f"SELECT count(*) FROM chunks WHERE {clearance.sql()}")

    # -- retrieval reads -------------------------------------------------------------------------

    async def keyword_search(
        self, match: str, clearance: Clearance, limit: int, weights: tuple[float, float]
    ) -> list[ChunkScore]:
        """Chunks by FTS5 bm25, best first; higher is better. `match` must be pre-quoted. Scored by
        the reader's FTS5 table (`fts_tables`): a player's bm25 counts public text alone."""
        if not match:
            return []
        fts, _ = fts_tables(clearance)
        rows = await self._all(
            # The planner prefers the rowid lookup, which reads whole chunk rows (text and all) for every
            # match; the covering index halves the query on a 25k-chunk index.
            f"SELECT c.id, -bm25({fts}, ?, ?) AS score FROM {fts}"
            f" JOIN chunks c INDEXED BY chunks_n_visibility ON c.n = {fts}.rowid"
            f" WHERE {fts} MATCH ? AND {clearance.sql('c.visibility')} ORDER BY score DESC, c.n LIMIT ?",
            (*weights, match, limit),
        )
        return [ChunkScore(r[0], float(r[1])) for r in rows]

    async def references(self, seeds: Sequence[str], clearance: Clearance) -> list[Reference]:
        """Each reference from a seed to a visible chunk (forward) and from a visible chunk to a seed
        (backward)."""
        if not seeds:
            return []
        seed_marks = marks(len(seeds))
        visible = clearance.sql("c.visibility")
        degree = "(SELECT count(*) FROM refs d WHERE d.chunk_id = {} AND d.kind = 'to')"
        rows = await self._all(
            f"SELECT a.chunk_id, b.chunk_id, {degree.format('a.chunk_id')} FROM refs a"
            f" JOIN refs b ON b.key = a.key AND b.kind = 'name'"
            f" JOIN chunks c INDEXED BY chunks_id_cover ON c.id = b.chunk_id AND {visible}"
            f" WHERE a.chunk_id IN ({seed_marks}) AND a.kind = 'to'"
            f" UNION ALL"
            f" SELECT a.chunk_id, b.chunk_id, {degree.format('b.chunk_id')} FROM refs a"
            f" JOIN refs b ON b.key = a.key AND b.kind = 'to'"
            f" JOIN chunks c INDEXED BY chunks_id_cover ON c.id = b.chunk_id AND {visible}"
            f" WHERE a.chunk_id IN ({seed_marks}) AND a.kind = 'name'",
            (*seeds, *seeds),
        )
        return [Reference(r[0], r[1], int(r[2])) for r in rows]

    async def term_docs(self, terms: Sequence[str], clearance: Clearance = Clearance.PLAYER) -> dict[str, int]:
        """{term: chunks the reader reads holding it} for the index terms (stemmed as FTS_TOKENIZE
        stems) among `terms`; a term no such chunk holds is left out. Their N is
        `count_chunks(clearance)`. A player's (the default) count public chunks alone."""
        if not terms:
            return {}
        _, vocab = fts_tables(clearance)
        asked = sorted(set(terms))
        rows = await self._all(f"SELECT term, doc FROM {vocab} WHERE term IN ({marks(len(asked))})", asked)
        return {r[0]: int(r[1]) for r in rows if r[1]}

    async def matching_chunks(
        self,
        rowids: Sequence[int],
        matches: Sequence[str],
        lookups: Collection[int] = (),
        clearance: Clearance = Clearance.PLAYER,
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
        fts, _ = fts_tables(clearance)
        asked = [i for i in range(len(matches)) if i in lookups]
        ctes = [f"d(n) AS (VALUES {','.join('(?)' for _ in rowids)})"]
        params: list[int | str] = [*rowids]
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

"""Reads of the Compendium: the names a reader may match and autocomplete, the chunks mentioning an
entity, and the sums the entity path scores chunks by.

There are two Compendiums, the players' and the game master's (an entity row's `visibility` names its
reader: `Clearance.compendium`); a reader reads its own, and of it only the aliases and mentions its
`Clearance` may read."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ...types import PUBLIC, Clearance, Mentioned
from .chunks import ChunkScore
from .connection import Connection, marks

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


class EntityReads(Connection):
    async def entity_count(self, view: str = PUBLIC) -> int:
        """Entities in the players' (`public`) or the game master's (`gm`) Compendium."""
        return await self._count("SELECT count(*) FROM entities WHERE visibility = ?", (view,))

    async def mention_count(self) -> int:
        """Rows of both Compendiums' mentions: (entity, chunk) pairs."""
        return await self._count("SELECT count(*) FROM mentions")

    async def visible_aliases(self, clearance: Clearance) -> list[VisibleAlias]:
        """The names a reader may match against."""
        rows = await self._all(
            "SELECT a.entity_id, a.norm, e.name, e.note_path FROM aliases a JOIN entities e ON e.id = a.entity_id"
            f" WHERE e.visibility = ? AND {clearance.sql('a.visibility')}",
            (clearance.compendium,),
        )
        return [VisibleAlias(*r) for r in rows]

    async def mention_scores(
        self, weights: Sequence[MentionWeight], clearance: Clearance, limit: int
    ) -> list[ChunkScore]:
        """Visible chunks mentioning the weighted entities, best first (ties in index order), each
        scored the sum of what its mentions add (see `MentionWeight`). Summed here, in SQL, so a
        common entity's thousands of mentions never cross into Python."""
        if not weights:
            return []
        values = ",".join("(?, ?, ?, ?, ?)" for _ in weights)
        rows = await self._all(
            f"WITH w(entity_id, per_mention, own, own_bonus, own_only) AS (VALUES {values})"
            " SELECT c.id, sum(w.per_mention * (1 + ln(max(m.count, 1)))"
            "  + CASE WHEN c.path = w.own THEN w.own_bonus ELSE 0 END) AS score, c.n"
            " FROM w JOIN mentions m ON m.entity_id = w.entity_id"
            " JOIN chunks c INDEXED BY chunks_id_cover ON c.id = m.chunk_id"
            f" WHERE {clearance.sql('m.visibility')} AND {clearance.sql('c.visibility')}"
            " AND (w.own_only = 0 OR c.path = w.own)"
            " GROUP BY c.id ORDER BY score DESC, c.n LIMIT ?",
            (*[v for w in weights for v in (w.entity_id, w.per_mention, w.own_note, w.own_bonus, int(w.own_only))],
             limit),
        )
        return [ChunkScore(r[0], float(r[1])) for r in rows]

    async def mention_counts(self, entity_ids: Sequence[int], clearance: Clearance) -> dict[int, int]:
        """How many visible chunks mention each entity (its document frequency)."""
        rows = await self._all(
            "SELECT m.entity_id, count(*) FROM mentions m JOIN chunks c INDEXED BY chunks_id_cover ON c.id = m.chunk_id"
            f" WHERE m.entity_id IN ({marks(len(entity_ids))})"
            f" AND {clearance.sql('m.visibility')} AND {clearance.sql('c.visibility')}"
            " GROUP BY m.entity_id",
            entity_ids,
        )
        return dict(rows)

    async def entity_names(self, clearance: Clearance) -> list[EntityName]:
        """Every name and alias of every visible entity, for autocomplete."""
        rows = await self._all(
            "SELECT a.entity_id, a.alias, e.name FROM aliases a JOIN entities e ON e.id = a.entity_id"
            f" WHERE e.visibility = ? AND {clearance.sql('a.visibility')} ORDER BY e.name, a.alias",
            (clearance.compendium,),
        )
        return [EntityName(*r) for r in rows]

    async def entity(self, entity_id: int, clearance: Clearance) -> EntityRecord | None:
        """One entity as a reader may see it: its visible aliases and the visible chunks mentioning it."""
        row = await self._one(
            "SELECT name, kind FROM entities WHERE id = ? AND visibility = ?", (entity_id, clearance.compendium)
        )
        if row is None:
            return None
        aliases = tuple(
            r[0]
            for r in await self._all(
                f"SELECT alias FROM aliases WHERE entity_id = ? AND {clearance.sql()} ORDER BY alias", (entity_id,)
            )
            if r[0] != row[0]
        )
        mentions = await self._all(
            "SELECT c.label, c.path, c.start_line, c.end_line, m.count, c.sessions FROM mentions m"
            " JOIN chunks c ON c.id = m.chunk_id"
            f" WHERE m.entity_id = ? AND {clearance.sql('m.visibility')} AND {clearance.sql('c.visibility')}"
            " ORDER BY c.n",
            (entity_id,),
        )
        return EntityRecord(
            row[0], row[1], aliases, tuple(Mentioned(r[0], r[1], r[2], r[3], r[4], tuple(json.loads(r[5]))) for r in mentions)
        )

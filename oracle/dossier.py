"""A Compendium dossier: who or what an entity is, its other names, and where the notes mention it."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .index.index import Index
from .index.store import EntityName, EntityRecord
from .retrieve.entity import Matchers
from .text import normalize
from .types import Clearance, Mentioned


@dataclass(frozen=True)
class Dossier:
    name: str
    kind: str
    aliases: tuple[str, ...]
    mentions: tuple[Mentioned, ...]  # one per label, sessions in campaign order first

    @property
    def sessions(self) -> tuple[Mentioned, ...]:
        return tuple(m for m in self.mentions if m.sessions)

    def to_json(self) -> dict[str, Any]:
        sessions = self.sessions
        return {
            "name": self.name,
            "kind": self.kind,
            "aliases": list(self.aliases),
            "first": sessions[0].label if sessions else None,
            "last": sessions[-1].label if sessions else None,
            "mentions": [
                {"label": m.label, "path": m.path, "lines": [m.start_line, m.end_line], "count": m.count}
                for m in self.mentions
            ],
        }


def _order(m: Mentioned) -> tuple[int, int, str]:
    return (0, min(m.sessions), m.label) if m.sessions else (1, 0, m.label)


def build_dossier(entity: EntityRecord) -> Dossier:
    """The entity's mentions, one per label: the parts of a label are merged into its first."""
    by_label: dict[str, Mentioned] = {}
    for m in entity.mentions:
        seen = by_label.get(m.label)
        if seen is None:
            by_label[m.label] = m
        else:
            by_label[m.label] = replace(seen, count=seen.count + m.count)
    mentions = tuple(sorted(by_label.values(), key=_order))
    return Dossier(entity.name, entity.kind, entity.aliases, mentions)


def rank_names(query: str, names: Sequence[EntityName], limit: int = 25) -> list[tuple[int, str]]:
    """Autocomplete: (entity id, canonical name) whose name or alias starts with, then contains, the query."""
    q = normalize(query)
    starts: dict[int, str] = {}
    contains: dict[int, str] = {}
    for row in names:
        n = normalize(row.alias)
        if not q or n.startswith(q) or any(w.startswith(q) for w in n.split()):
            starts.setdefault(row.entity_id, row.name)
        elif q in n:
            contains.setdefault(row.entity_id, row.name)
    ranked = sorted(starts.items(), key=lambda item: item[1].casefold())
    ranked += sorted(((i, c) for i, c in contains.items() if i not in starts), key=lambda item: item[1].casefold())
    return ranked[:limit]


class Dossiers:
    """`/oracle who` and its autocomplete, from the Compendium the reader may read."""

    def __init__(self, index: Index, matchers: Matchers) -> None:
        self.index = index
        self.matchers = matchers

    async def names(self, query: str, *, clearance: Clearance = Clearance.PLAYER, limit: int = 25) -> list[str]:
        """Compendium names for autocomplete: at most `limit`, visible to this reader only."""
        await self.index.check_policy(clearance)
        store = await self.index.store()
        rows = await store.entity_names(clearance)
        return [name for _, name in rank_names(query, rows, limit)]

    async def who(self, name: str, *, clearance: Clearance = Clearance.PLAYER) -> Dossier | None:
        """The dossier of the entity a name (or alias, or a near miss) points at."""
        await self.index.check_policy(clearance)
        store = await self.index.store()
        matcher, _ = await self.matchers.lookup(clearance, store)
        candidates = matcher.by_norm.get(normalize(name)) or []
        entity_id = candidates[0][0] if candidates else None
        if entity_id is None:
            found = matcher.find(name)
            if not found:
                return None
            entity_id = found[0].entity_id
        entity = await store.entity(entity_id, clearance)
        return None if entity is None else build_dossier(entity)

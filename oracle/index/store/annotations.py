"""The annotation cache: what the model said of a chunk's text, by text hash, model and prompt, so an
unchanged chunk is never annotated twice and a changed one never keeps a stale description."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .connection import Connection, now


@dataclass(frozen=True)
class CachedAnnotation:
    text: str  # the annotation itself, one or two sentences (its column is `summary`, as the model is asked)
    entities: list[dict[str, Any]]  # the names the model found, as it gave them


class AnnotationCache(Connection):
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
        self, text_hash: str, model: str, prompt_version: str, text: str, entities: list[dict[str, Any]]
    ) -> None:
        await self.db.execute(
            "INSERT OR REPLACE INTO annotations (text_hash, model, prompt_version, summary, entities, created)"
            " VALUES (?,?,?,?,?,?)",
            (text_hash, model, prompt_version, text, json.dumps(entities), now()),
        )
        await self.db.commit()

    async def forget_orphan_annotations(self) -> int:
        """Drop cached annotations of text no chunk holds any more: a removed secret leaves no trace."""
        cursor = await self.db.execute("DELETE FROM annotations WHERE text_hash NOT IN (SELECT text_hash FROM chunks)")
        await self.db.commit()
        return cursor.rowcount

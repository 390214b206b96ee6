"""Pack the context: k full fragments, then headlines (one-line annotations) of what was left out.

One slot per session: the fragments are the best-ranked part of k distinct labels, so a long
session split in parts cannot fill the context alone. The headlines are the cached annotations of
candidates that did not make the cut, one per label and never for a label already present in full,
so the model can tell "in full, citable" from "headline only", and an arc across many sessions still
shows up as headlines.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..types import Chunk


@dataclass(frozen=True)
class Headline:
    """A candidate left out of the full fragments, shown by its one-line annotation (a headline)."""

    chunk: Chunk
    text: str  # the chunk's annotation


@dataclass(frozen=True)
class Context:
    fragments: tuple[Chunk, ...]
    headlines: tuple[Headline, ...]

    @property
    def labels(self) -> set[str]:
        return {c.label for c in self.fragments} | {h.chunk.label for h in self.headlines}

    def chunk_for(self, label: str) -> Chunk | None:
        """The fragment (else the headline's chunk) a citation label points at."""
        for chunk in [*self.fragments, *(h.chunk for h in self.headlines)]:
            if chunk.label == label:
                return chunk
        return None


def pack_context(
    ranked: Sequence[Chunk], annotations: Mapping[str, str], *, k: int = 8, max_headlines: int = 16
) -> Context:
    """`ranked` is the final order (reranked, then the rest of the pool); `annotations` by chunk id."""
    fragments: list[Chunk] = []
    taken: set[str] = set()
    rest: list[Chunk] = []
    for chunk in ranked:
        if len(fragments) < k and chunk.label not in taken:
            taken.add(chunk.label)
            fragments.append(chunk)
        else:
            rest.append(chunk)
    headlines: list[Headline] = []
    for chunk in rest:
        if len(headlines) == max_headlines:
            break
        annotation = annotations.get(chunk.id)
        if annotation and chunk.label not in taken:
            taken.add(chunk.label)
            headlines.append(Headline(chunk, annotation))
    return Context(tuple(fragments), tuple(headlines))

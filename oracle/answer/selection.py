"""What reranking and packing make of a retrieval: the final order and the context the model reads."""
from __future__ import annotations

from dataclasses import dataclass

from ..types import Chunk
from .context import Context
from .rerank import Reranked


@dataclass
class Selection:
    """What reranking and packing made of a retrieval."""

    final: list[Chunk]  # reranked k, then the rest of the pool
    context: Context
    rerank: Reranked
    annotations: dict[str, str]  # chunk id -> annotation, for the pool

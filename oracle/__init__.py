"""The Oracle: answers players' questions about a campaign from the game master's notes.

Layers, each importing only those below it (`tests/test_layers.py` holds them to it):

    notes      parse, sessions, chunking, refs          pure text: no I/O
    index      store/ and schema, vectors, embed, Compendium, annotate, scan and ingest, the
               embedding worker process, the Library of every campaign's index (and watch, beside it)
    retrieve   the search pipeline: keyword, semantic, entity, linked, followup, fusion
    answer     rerank, context, budget, prompt, writer, passages, recap, citations, leaks, excerpts
    oracle     Oracle: the stages of a question in order
    cli, eval, dossier (and bot/, outside the core)

Beneath them all: settings, campaigns, types, text, tokens, offload (leaving the event loop), llm,
deadline and context_window. The names below are the public API; they load on first use, so
importing one layer does not import every other.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_API = {
    "Oracle": "oracle.oracle",
    "Index": "oracle.index.index",
    "Settings": "oracle.settings",
    "ingest": "oracle.index.ingest",
    "Answer": "oracle.answer.results",
    "Dossier": "oracle.dossier",
    "Turn": "oracle.answer.prompt",
    "Campaign": "oracle.campaigns",
    "Campaigns": "oracle.campaigns",
    "Library": "oracle.index.library",
    "watch_notes": "oracle.watch",
    "watch_campaigns": "oracle.watch",
}

# The keys of `_API`, sorted, spelled out so that linters and type checkers see the public names.
__all__ = [
    "Answer", "Campaign", "Campaigns", "Dossier", "Index", "Library", "Oracle", "Settings", "Turn",
    "ingest", "watch_campaigns", "watch_notes",
]

if TYPE_CHECKING:
    from .answer.prompt import Turn
    from .answer.results import Answer
    from .campaigns import Campaign, Campaigns
    from .dossier import Dossier
    from .index.index import Index
    from .index.ingest import ingest
    from .index.library import Library
    from .oracle import Oracle
    from .settings import Settings
    from .watch import watch_campaigns, watch_notes


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'oracle' has no attribute {name!r}")
    return getattr(importlib.import_module(_API[name]), name)

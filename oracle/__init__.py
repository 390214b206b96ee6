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
deadline and context_window.

The names below are the public API: what a client (the Discord bot among them) uses, and the only
names `bot/` may import (`tests/test_layers.py`). Each loads on first use, so a process that needs
one layer (the embedding worker) does not import every other: importing the whole core would cost
it about 20 MB and half a second more at every start.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Two names are also the names of their modules, which the import system sets on this package once
# they load: imported here, the functions hold the names (both are small, of the base layer).
from .lexicon import lexicon
from .texts import texts

_API = {
    # the Oracle and its answers
    "Oracle": "oracle.oracle",
    "Answer": "oracle.answer.results",
    "Citation": "oracle.answer.citations",
    "Turn": "oracle.answer.prompt",
    "Fallbacks": "oracle.answer.passages",
    "Dossier": "oracle.dossier",
    "Clearance": "oracle.types",
    # campaigns, their indexes and ingesting them
    "Settings": "oracle.settings",
    "settings_problem": "oracle.settings",
    "parse_list": "oracle.settings",
    "Campaign": "oracle.campaigns",
    "Campaigns": "oracle.campaigns",
    "CampaignsError": "oracle.campaigns",
    "described": "oracle.campaigns",
    "Library": "oracle.index.library",
    "Index": "oracle.index.index",
    "ingest": "oracle.index.ingest",
    "IngestReport": "oracle.types",
    "IngestProgress": "oracle.types",
    "INGEST_STAGES": "oracle.types",
    "Titled": "oracle.index.store",
    "VaultReport": "oracle.index.report",
    "Watching": "oracle.watch",
    "watch_notes": "oracle.watch",
    "watch_campaigns": "oracle.watch",
    # the status
    "IndexStatus": "oracle.index.status",
    "index_status": "oracle.index.status",
    "is_indexed": "oracle.index.status",
    # the journal of questions asked
    "Journal": "oracle.journal",
    "Asked": "oracle.journal",
    "Unanswered": "oracle.journal",
    "open_sqlite": "oracle.journal",
    # words and text
    "Lexicon": "oracle.lexicon",
    "DEFAULT": "oracle.lexicon",
    "fold": "oracle.lexicon",
    "asks_what_next": "oracle.retrieve.followup",
    "clipped": "oracle.text",
    # errors: every one a sentence to show
    "OracleError": "oracle.errors",
    "PolicyChanged": "oracle.index.index",
    "IngestError": "oracle.index.ingest",
    "IngestBusy": "oracle.index.lock",
    "VectorStoreUnreachable": "oracle.index.vectors",
    # running the event loop
    "SWITCH_INTERVAL": "oracle.offload",
}

# Every public name, sorted, spelled out so that linters and type checkers see them.
__all__ = [
    "Answer", "Asked", "Campaign", "Campaigns", "CampaignsError", "Citation", "Clearance", "DEFAULT", "Dossier",
    "Fallbacks", "INGEST_STAGES", "Index", "IndexStatus", "IngestBusy", "IngestError", "IngestProgress",
    "IngestReport", "Journal", "Lexicon", "Library", "Oracle", "OracleError", "PolicyChanged", "SWITCH_INTERVAL",
    "Settings", "Titled", "Turn", "Unanswered", "VaultReport", "VectorStoreUnreachable", "Watching", "asks_what_next",
    "clipped", "described", "fold", "index_status", "ingest", "is_indexed", "lexicon", "open_sqlite", "parse_list",
    "settings_problem", "texts", "watch_campaigns", "watch_notes",
]

if TYPE_CHECKING:
    from .answer.citations import Citation
    from .answer.passages import Fallbacks
    from .answer.prompt import Turn
    from .answer.results import Answer
    from .campaigns import Campaign, Campaigns, CampaignsError, described
    from .dossier import Dossier
    from .errors import OracleError
    from .index.index import Index, PolicyChanged
    from .index.ingest import IngestError, ingest
    from .index.library import Library
    from .index.lock import IngestBusy
    from .index.report import VaultReport
    from .index.status import IndexStatus, index_status, is_indexed
    from .index.store import Titled
    from .index.vectors import VectorStoreUnreachable
    from .journal import Asked, Journal, Unanswered, open_sqlite
    from .lexicon import DEFAULT, Lexicon, fold
    from .offload import SWITCH_INTERVAL
    from .oracle import Oracle
    from .retrieve.followup import asks_what_next
    from .settings import Settings, parse_list, settings_problem
    from .text import clipped
    from .types import INGEST_STAGES, Clearance, IngestProgress, IngestReport
    from .watch import Watching, watch_campaigns, watch_notes


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'oracle' has no attribute {name!r}")
    return getattr(importlib.import_module(_API[name]), name)

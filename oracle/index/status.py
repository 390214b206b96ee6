"""What an index holds and whether its model answers: `oracle status` and `/oracle status`.

A player's status counts what a player can read and names no host, path, error, GM-only count,
policy or withheld answer; the game master's has them all, and the policy of who reads what.
The game master's part is a field of its own (`IndexStatus.gm`, `StoreStats.gm`), `None` in a
player's status, so a player's cannot carry it by mistake.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..context_window import ContextWindow
from ..lexicon import language
from ..llm import Loaded
from ..types import Clearance
from . import annotate
from .embed import model_reads
from .index import Index, stemmer_current
from .report import VaultReport
from .store import StoreStats, Withheld

# Added to the language line until an ingest rewrites keyword copies another stemmer wrote.
STALE_STEMMER = ("its keyword index was written by another stemmer than this release's, so a word in another "
                 "form is missed until the notes are ingested again (`oracle ingest` or /oracle reingest)")

# What a player reads when Ollama does not answer: the reason, with its host, is the game master's.
PLAYER_OLLAMA = "not answering"
# Why the context window is the setting, when the model's own limit could not be read (the reason,
# with Ollama's host or error, is the game master's).
PLAYER_WINDOW_UNKNOWN = "the model's context length is unknown"


@dataclass(frozen=True)
class GMStatus:
    """What only the game master's status names."""

    notes_dir: str | None
    policy: str  # who reads what (`Policy.describe`), as this process's settings say
    withheld: Withheld
    built_under: str = ""  # the policy the index was last built under ("" before one was recorded)
    policy_current: bool = True  # False: players are refused until the notes are ingested again
    vault: VaultReport | None = None  # what the last ingest made of the notes

    def to_json(self) -> dict[str, Any]:
        return {"notes_dir": self.notes_dir, "policy": self.policy, "built_under": self.built_under,
                "policy_current": self.policy_current, "vault": self.vault.to_json() if self.vault else None}


@dataclass(frozen=True)
class Reach:
    """Whether Ollama answers: the game master's names its host and the reason, a player's neither."""

    ok: bool
    reason: str | None
    host: str | None = None  # the game master's only

    def to_json(self) -> dict[str, Any]:
        head = {} if self.host is None else {"host": self.host}
        return head | {"ok": self.ok, "reason": self.reason}

    def said(self) -> str:
        """As a status line: "answers", or why not."""
        return "answers" if self.ok else str(self.reason)


@dataclass(frozen=True)
class IndexStatus:
    """What is indexed, when, with which models, and whether Ollama answers, as one reader sees it
    (a player's context window, reach and loaded model without host or error)."""

    stats: StoreStats
    annotation_coverage: float
    last_ingest: str | None
    last_ingest_seconds: float | None
    embed_model: str
    model: str
    context: ContextWindow
    language: str | None  # the vault's, as the last ingest read it (`ORACLE_LANGUAGE` or detected)
    stemmer_current: bool  # False: the keyword index was written by another stemmer than this release's
    ollama: Reach
    model_loaded: Loaded
    gm: GMStatus | None = None  # the game master's alone: None in a player's

    @property
    def embed_model_reads_language(self) -> bool:
        """Whether the embedding model was trained on the notes' language (`models.toml`); when not,
        its matches count a quarter in the fusion."""
        return self.language is None or model_reads(self.embed_model, self.language)

    def language_line(self) -> str:
        """The notes' language as the status shows it, and what it means for the embedding model."""
        if self.language is None:
            return ""
        line = f"{language(self.language).name} ({self.language})"
        if not self.embed_model_reads_language:
            line += ("; the embedding model was trained on other languages, so its matches count a quarter "
                     "(a multilingual model: ORACLE_EMBED_MODEL)")
        if not self.stemmer_current:
            line += f"; {STALE_STEMMER}"
        return line

    def to_json(self) -> dict[str, Any]:
        """The status as `oracle status --json` prints it."""
        out = {
            **self.stats.to_json(),
            "annotation_coverage": self.annotation_coverage,
            "last_ingest": self.last_ingest,
            "last_ingest_seconds": self.last_ingest_seconds,
            "embed_model": self.embed_model,
            "model": self.model,
            "language": self.language,
            "stemmer_current": self.stemmer_current,
            "embed_model_reads_language": self.embed_model_reads_language,
            "context": self.context.to_json(),
        }
        if self.gm is not None:
            out |= self.gm.to_json()
        out |= {"ollama": self.ollama.to_json(), "model_loaded": self.model_loaded.to_json()}
        if self.gm is not None:
            out["withheld"] = self.gm.withheld.to_json()
        return out


async def index_status(index: Index, *, clearance: Clearance = Clearance.GM) -> IndexStatus:
    """What is indexed, when, with which models, and whether Ollama answers. A player's
    (`Clearance.PLAYER`) counts public text only and gives no host, path, error, GM-only count, policy
    or withheld answer; the game master's names the policy of who reads what (`GMStatus.policy`)."""
    settings = index.settings
    store = await index.store()
    stats = await store.stats(settings.model, annotate.PROMPT_VERSION, clearance=clearance)
    meta = await store.meta()
    llm = index.llm
    reason = await llm.probe(settings.ollama_probe_timeout)
    context = await llm.window(settings.ollama_probe_timeout)
    loaded = await llm.loaded(settings.ollama_probe_timeout) if reason is None else Loaded(None, reason=reason)
    embed_model = meta.get("embed_model", settings.embed_model)
    gm: GMStatus | None = None
    if clearance.gm:
        ollama = Reach(reason is None, reason, settings.ollama_host)
        report = meta.get("vault_report")
        gm = GMStatus(
            meta.get("notes_dir"), settings.policy.describe(), await store.withheld(),
            built_under=meta.get("policy_text", ""), policy_current=meta.get("policy") == settings.policy.key,
            vault=VaultReport.from_json(json.loads(report)) if report else None,
        )
    else:
        embed_model = model_name(embed_model)
        if context.model_limit is None and context.reason:
            # Unknown: Ollama did not say, or did not answer (its host and error are in the reason).
            context = replace(context, reason=PLAYER_WINDOW_UNKNOWN)
        ollama = Reach(reason is None, None if reason is None else PLAYER_OLLAMA)
        loaded = replace(loaded, reason=PLAYER_OLLAMA if loaded.reason else None)
    return IndexStatus(
        stats=stats,
        annotation_coverage=round(stats.annotated / stats.chunks, 3) if stats.chunks else 0.0,
        last_ingest=meta.get("last_ingest"),
        last_ingest_seconds=float(meta["last_ingest_seconds"]) if "last_ingest_seconds" in meta else None,
        embed_model=embed_model,
        model=settings.model,
        context=context,
        language=meta.get("language"),
        stemmer_current=stemmer_current(meta),
        ollama=ollama,
        model_loaded=loaded,
        gm=gm,
    )


def model_name(model: str) -> str:
    """A model as a player may read it: its name, never the folder it was loaded from
    (ORACLE_EMBED_MODEL may be a path on the host)."""
    if model.startswith(("/", "~", ".", "\\")) or (len(model) > 1 and model[1] == ":") or Path(model).exists():
        return Path(model.replace("\\", "/").rstrip("/")).name or model
    return model


async def is_indexed(index: Index) -> bool:
    """Whether an ingest has ever committed: an empty index answers every question with nothing."""
    return (await (await index.store()).meta()).get("last_ingest") is not None

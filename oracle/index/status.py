"""What an index holds and whether its model answers: `oracle status` and `/oracle status`.

A player's status counts what a player can read and names no host, path, error, GM-only count,
policy or withheld answer; the game master's has them all, and the policy of who reads what.
"""
from __future__ import annotations

from pathlib import Path

from . import annotate
from .index import Index

# What a player reads when Ollama does not answer: the reason, with its host, is the game master's.
PLAYER_OLLAMA = "not answering"
# Why the context window is the setting, when the model's own limit could not be read (the reason,
# with Ollama's host or error, is the game master's).
PLAYER_WINDOW_UNKNOWN = "the model's context length is unknown"


async def index_status(index: Index, *, gm: bool = True) -> dict:
    """What is indexed, when, with which models, and whether Ollama answers. A player's
    (`gm=False`) counts public text only and gives no host, path, error, GM-only count, policy or
    withheld answer; the game master's names the policy of who reads what (`policy`)."""
    settings = index.settings
    store = await index.store()
    stats = await store.stats(settings.model, annotate.PROMPT_VERSION, gm=gm)
    meta = await store.meta()
    llm = index.llm
    reason = await llm.probe(settings.ollama_probe_timeout)
    window = await llm.window(settings.ollama_probe_timeout)
    loaded = await llm.loaded(settings.ollama_probe_timeout) if reason is None else {
        "loaded": None, "context_length": None, "reason": reason}
    status = {
        **stats,
        "annotation_coverage": round(stats["annotated"] / stats["chunks"], 3) if stats["chunks"] else 0.0,
        "last_ingest": meta.get("last_ingest"),
        "last_ingest_seconds": float(meta["last_ingest_seconds"]) if "last_ingest_seconds" in meta else None,
        "embed_model": meta.get("embed_model", settings.embed_model),
        "model": settings.model,
        "context": window.to_json(),
    }
    if not gm:
        context = status["context"]
        if context["model_limit"] is None and context["reason"]:
            # Unknown: Ollama did not say, or did not answer (its host and error are in the reason).
            context = context | {"reason": PLAYER_WINDOW_UNKNOWN}
        return status | {
            "embed_model": model_name(status["embed_model"]),
            "context": context,
            "ollama": {"ok": reason is None, "reason": None if reason is None else PLAYER_OLLAMA},
            "model_loaded": loaded | {"reason": PLAYER_OLLAMA if loaded.get("reason") else None},
        }
    return status | {
        "notes_dir": meta.get("notes_dir"),
        "policy": settings.policy.describe(),
        "ollama": {"host": settings.ollama_host, "ok": reason is None, "reason": reason},
        "model_loaded": loaded,
        "withheld": await store.withheld(),
    }


def model_name(model: str) -> str:
    """A model as a player may read it: its name, never the folder it was loaded from
    (ORACLE_EMBED_MODEL may be a path on the host)."""
    if model.startswith(("/", "~", ".", "\\")) or (len(model) > 1 and model[1] == ":") or Path(model).exists():
        return Path(model.replace("\\", "/").rstrip("/")).name or model
    return model


async def is_indexed(index: Index) -> bool:
    """Whether an ingest has ever committed: an empty index answers every question with nothing."""
    return (await (await index.store()).meta()).get("last_ingest") is not None

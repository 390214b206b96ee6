"""What every `oracle` command shares: the consoles, the campaigns chosen and their indexes."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ..campaigns import Campaigns, CampaignsError
from ..errors import OracleError
from ..index.embed import Embedder
from ..index.index import Index
from ..index.ingest import ingest
from ..index.seam import Embeddings, off_loop
from ..index.status import is_indexed
from ..settings import Settings

console = Console(stderr=True)
out = Console(width=None if sys.stdout.isatty() else 150)


# What a user can act on: the Oracle's own errors, and a folder that is missing or not theirs.
DOMAIN_ERRORS = (OracleError, FileNotFoundError, PermissionError)


def build_settings(args: argparse.Namespace) -> Settings:
    """The settings of the one campaign a command works on (`--campaign`, or the only one)."""
    return one_campaign(campaign_settings(args))


def one_campaign(chosen: dict[str, Settings]) -> Settings:
    if len(chosen) > 1:
        names = ", ".join(chosen)
        raise CampaignsError(f"ORACLE_CAMPAIGNS lists several campaigns: name one with --campaign ({names})")
    return next(iter(chosen.values()))


def campaign_settings(args: argparse.Namespace, *, overrides_apply: bool = True) -> dict[str, Settings]:
    """Each chosen campaign's settings by name: `--campaign NAME`, else every campaign of
    ORACLE_CAMPAIGNS, else the default one of ORACLE_NOTES_DIR. `--notes`/`--data` apply to one only."""
    base = Settings()
    campaigns = Campaigns.from_settings(base)
    name = getattr(args, "campaign", None)
    chosen = [campaigns.get(name)] if name else list(campaigns)
    settings = {c.name: c.settings(base) for c in chosen}
    if not overrides_apply:
        return settings
    overrides: dict[str, Any] = {}
    if getattr(args, "notes", None):
        overrides["notes_dir"] = Path(args.notes)
    if getattr(args, "data", None):
        overrides["data_dir"] = Path(args.data)
    if overrides and len(settings) > 1:
        raise CampaignsError("--notes and --data name one campaign's folders: add --campaign NAME")
    return {n: s.model_copy(update=overrides) if overrides else s for n, s in settings.items()}


def open_index(settings: Settings) -> Index:
    """One campaign's index, for the commands that read one."""
    return Index(settings)


async def open_indexes(chosen: dict[str, Settings]) -> dict[str, Index]:
    """One index per campaign; several share one model, loaded once."""
    if len(chosen) == 1:
        return {name: Index(s) for name, s in chosen.items()}
    first = next(iter(chosen.values()))
    model = await off_loop(Embedder, first.embed_model, query_backend=first.query_backend, cache_dir=first.models_path)
    shared = Embeddings(model)
    return {name: Index(s, embedder=shared) for name, s in chosen.items()}


async def ensure_index(index: Index, *, quiet: bool) -> None:
    """Ingest when the index is missing, or no ingest finished into it (stopped, failed): a question
    is never answered from nothing."""
    if index.settings.sqlite_path.exists() and await is_indexed(index):
        return
    if not quiet:
        console.print(f"no index in {escape(str(index.settings.data_dir))}: ingesting "
                      f"{escape(str(index.settings.notes_dir))} first", soft_wrap=True)
    await ingest(index, by="the command line")


def _many(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"

def snippet(text: str, width: int = 110) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"

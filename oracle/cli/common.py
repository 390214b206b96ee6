"""What every `oracle` command shares: the consoles, the campaigns chosen and their indexes."""
from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ..campaigns import Campaigns, CampaignsError
from ..errors import InputError, OracleError
from ..index.index import Index
from ..index.ingest import ingest
from ..index.library import Library
from ..index.status import is_indexed
from ..settings import Settings
from ..texts import texts

console = Console(stderr=True)
out = Console(width=None if sys.stdout.isatty() else 150)


# What a user can act on: the Oracle's own errors, and a folder that is missing or not theirs.
DOMAIN_ERRORS = (OracleError, FileNotFoundError, PermissionError)


@dataclass(frozen=True)
class Chosen:
    """The campaigns a command works on, and the settings they start from."""

    base: Settings
    campaigns: Campaigns

    def settings(self) -> Settings:
        """The settings of the one campaign chosen."""
        return self.campaigns.campaigns[0].settings(self.base)

    def library(self) -> Library:
        """Their indexes, sharing one model loaded on first use (no embedding worker: a command
        leaves no event loop of its own to keep free)."""
        return Library(self.base, self.campaigns)

    def moved(self, *, notes: Path | None = None, data: Path | None = None) -> Chosen:
        """The one campaign chosen, with other folders."""
        campaign = self.campaigns.campaigns[0]
        campaign = replace(campaign, notes=notes or campaign.notes, data=data or campaign.data)
        return Chosen(self.base, Campaigns((campaign,), self.campaigns.source))

    @asynccontextmanager
    async def index(self) -> AsyncIterator[Index]:
        """The index of the one campaign chosen, opened through its `Library`."""
        async with self.library() as library:
            yield library.index(self.campaigns.campaigns[0])


def chosen(args: argparse.Namespace, *, one: bool = False, overrides_apply: bool = True) -> Chosen:
    """`--campaign NAME`, else every campaign of ORACLE_CAMPAIGNS, else the default one of
    ORACLE_NOTES_DIR (`one`: the command works on a single campaign). `--notes`/`--data` apply to
    one only."""
    base = Settings()
    campaigns = Campaigns.from_settings(base)
    name = getattr(args, "campaign", None)
    picked = [campaigns.get(name)] if name else list(campaigns)
    if one and len(picked) > 1:
        names = ", ".join(c.name for c in picked)
        raise CampaignsError(f"ORACLE_CAMPAIGNS lists several campaigns: name one with --campaign ({names})")
    picked_from = Chosen(base, Campaigns(tuple(picked), campaigns.source))
    notes = getattr(args, "notes", None) if overrides_apply else None
    data = getattr(args, "data", None) if overrides_apply else None
    if not (notes or data):
        return picked_from
    if len(picked) > 1:
        raise CampaignsError("--notes and --data name one campaign's folders: add --campaign NAME")
    return picked_from.moved(notes=Path(notes) if notes else None, data=Path(data) if data else None)


def asked(text: str, what: str = "question") -> str:
    """A question (or a name) to look up; a blank one is bad input (exit 2) on every command, said in
    the words `/oracle ask` uses."""
    if not text.strip():
        raise InputError(texts().empty_question if what == "question" else f"Give a {what} to look up.")
    return text


def build_settings(args: argparse.Namespace) -> Settings:
    """The settings of the one campaign a command works on (`--campaign`, or the only one)."""
    return chosen(args, one=True).settings()


def campaign_index(args: argparse.Namespace) -> AbstractAsyncContextManager[Index]:
    """The index of the one campaign a command works on."""
    return chosen(args, one=True).index()


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

"""`oracle backup` and `oracle restore`: what an ingest cannot rebuild, copied safely during play.

Each campaign's journal (questions, answers, votes, confirmed sources) and the bot's thread map
cannot be made again from the notes; the index can, at the cost of embedding the notes and asking
the model for every annotation again, so `--index` keeps it too. The SQLite files are in WAL mode,
where a plain file copy taken while the bot writes can miss or tear a commit: they are copied
through SQLite's backup API, which reads one consistent snapshot. A served Chroma folder is never
written (`index.folders`), so a plain copy of it is whole.

A backup is a folder: `manifest.json`, `bot.sqlite3`, and per campaign `campaigns/NAME/` with its
`journal.sqlite3` and, with the index, `oracle.sqlite3` and `chroma/VERSION/`.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .campaigns import Campaigns
from .errors import OracleError
from .index import folders
from .index.lock import IngestLock, check_writable
from .index.store.connection import copy_sqlite
from .index.vectors import access
from .settings import Settings

MANIFEST = "manifest.json"
FORMAT = 1
_PREFIX = "oracle-"


class BackupError(OracleError, RuntimeError):
    pass


@dataclass
class Copied:
    """What a backup or a restore copied: its folder and the files, relative to it."""

    folder: Path
    files: list[str] = field(default_factory=list)


def _served(sqlite_path: Path) -> str:
    with sqlite3.connect(f"file:{sqlite_path}?mode=ro", uri=True) as db:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (folders.SERVED,)).fetchone()
    return row[0] if row else ""


def backup(base: Settings, campaigns: Campaigns, to: Path, *, index: bool = False, keep: int = 0) -> Copied:
    """A new backup folder under `to` (`oracle-<UTC time>`); with `keep`, only the newest `keep`
    backups there are left."""
    if keep < 0:
        raise BackupError(f"--keep takes a number of backups, 0 or more (not {keep})")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = to / f"{_PREFIX}{stamp}"
    for n in range(1, 1000):  # another backup within the same second
        if not folder.exists():
            break
        folder = to / f"{_PREFIX}{stamp}-{n}"
    partial = to / f".{folder.name}.partial"  # renamed once whole: a backup cut short is never taken for one
    try:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        done = Copied(folder)
        manifest: dict[str, Any] = {"format": FORMAT, "made": stamp, "index": index, "campaigns": {}}
        if base.threads_path.exists():
            copy_sqlite(base.threads_path, partial / "bot.sqlite3")
            done.files.append("bot.sqlite3")
        for campaign in campaigns:
            settings = campaign.settings(base)
            into = Path("campaigns") / campaign.name
            manifest["campaigns"][campaign.name] = {"data": str(settings.data_dir)}
            if settings.journal_path.exists():
                copy_sqlite(settings.journal_path, partial / into / "journal.sqlite3")
                done.files.append(str(into / "journal.sqlite3"))
            if index and settings.sqlite_path.exists():
                copy_sqlite(settings.sqlite_path, partial / into / "oracle.sqlite3")
                done.files.append(str(into / "oracle.sqlite3"))
                served = _served(partial / into / "oracle.sqlite3")  # the copy's: the folder it names
                source = folders.folder_of(settings.chroma_path, served)
                if served and source.is_dir() and not settings.chroma_url:
                    with access(source, exclusive=False):
                        shutil.copytree(source, partial / into / "chroma" / served,
                                        ignore=shutil.ignore_patterns("oracle-*.lock"))
                    done.files.append(str(into / "chroma" / served))
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=2))
        partial.rename(folder)
    except (OSError, sqlite3.Error) as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise BackupError(f"the backup into {to} stopped ({getattr(exc, 'strerror', None) or exc}); nothing was kept") from exc
    if keep:
        for old in sorted(p for p in to.iterdir() if p.is_dir() and p.name.startswith(_PREFIX))[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return done


def restore(base: Settings, campaigns: Campaigns, source: Path) -> Copied:
    """Put a backup back: each campaign's journal (and index, when the backup holds it) and the
    bot's thread map, written into the live files through SQLite, so a running bot reads them at
    its next query. No ingest runs meanwhile (each campaign's ingest lock is held)."""
    try:
        manifest = json.loads((source / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise BackupError(f"{source} is not an Oracle backup (no readable {MANIFEST})") from exc
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{source} was made by another Oracle (backup format {manifest.get('format')})")
    known = {c.name: c for c in campaigns}
    missing = sorted(set(manifest["campaigns"]) - set(known))
    if missing:
        raise BackupError(f"the backup holds campaigns this Oracle does not know: {', '.join(missing)} "
                          "(ORACLE_CAMPAIGNS); restore with the campaigns file the backup was made with")
    for writing in {base.data_dir, *(known[name].settings(base).data_dir for name in manifest["campaigns"])}:
        check_writable(writing)
    done = Copied(source)
    try:
        for name in manifest["campaigns"]:
            settings = known[name].settings(base)
            here = source / "campaigns" / name
            with IngestLock(settings.lock_path, "oracle restore"):
                if (here / "journal.sqlite3").exists():
                    copy_sqlite(here / "journal.sqlite3", settings.journal_path)
                    done.files.append(str(settings.journal_path))
                if (here / "oracle.sqlite3").exists():
                    _restore_index(here, settings)
                    done.files.append(str(settings.sqlite_path))
        if (source / "bot.sqlite3").exists():
            copy_sqlite(source / "bot.sqlite3", base.threads_path)
            done.files.append(str(base.threads_path))
    except (OSError, sqlite3.Error) as exc:
        raise BackupError(f"the restore from {source} stopped ({getattr(exc, 'strerror', None) or exc})") from exc
    return done


def _restore_index(here: Path, settings: Settings) -> None:
    """The Chroma folder first, then the SQLite file that names it; its generation moved past the
    live one, so every process reads the restored index afresh rather than a cache of the other."""
    for version in (here / "chroma").glob("v-*") if (here / "chroma").is_dir() else []:
        target = settings.chroma_path / version.name
        if not target.exists():
            settings.chroma_path.mkdir(parents=True, exist_ok=True)
            shutil.copytree(version, settings.chroma_path / f".{version.name}.partial", dirs_exist_ok=True)
            (settings.chroma_path / f".{version.name}.partial").rename(target)
    live = 0
    if settings.sqlite_path.exists():
        with sqlite3.connect(settings.sqlite_path) as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
            live = int(row[0]) if row and str(row[0]).isdigit() else 0
    copy_sqlite(here / "oracle.sqlite3", settings.sqlite_path)
    with sqlite3.connect(settings.sqlite_path) as db:
        row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        restored = int(row[0]) if row and str(row[0]).isdigit() else 0
        db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('generation', ?)", (str(max(live, restored) + 1),))

"""A campaign's embedded Chroma folders: the one questions read, and the draft an ingest writes.

Chroma saves its HNSW index in place, file by file. A process killed while it saves (an ingest
stopped by SIGKILL, `systemctl stop` after its timeout, the machine's OOM killer) leaves a folder
that no process can read again ("Error deserializing pickle file", docs/processes.md). So the folder
questions read is never written: an ingest writes into a draft, a copy of the served folder (a few
megabytes: 6 MB for 3,000 windows), and the same SQLite transaction that commits its chunks names
the draft as served (`SERVED` in the index's meta). A kill at any moment leaves the served folder as
it was, and the SQLite file naming it.

The folders are versions under `Settings.chroma_path`, named `v-…`. Kept: the one served, the one
served before (a process may be finishing a question on it), and a draft that a killed ingest left
whole (its every write returned), which the next ingest goes on with rather than embedding its
windows again. Every other version, and the Chroma files of a store from before versions (kept in
`chroma_path` itself), goes once two versions have been served.
"""
from __future__ import annotations

import json
import logging
import secrets
import shutil
from pathlib import Path

from .vectors import ACCESS_LOCK, WRITING, VectorStoreError, access

log = logging.getLogger(__name__)

SERVED = "chroma_folder"  # meta: the version questions read ("": `chroma_path` itself, from before versions)
BEFORE = "chroma_folder_before"  # meta: the version served before it
DRAFT = "oracle-draft.json"  # in a draft: the version it was copied from
_PREFIX = "v-"


def folder_of(base: Path, name: str) -> Path:
    return base / name if name else base


def _versions(base: Path) -> list[str]:
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if p.is_dir() and p.name.startswith(_PREFIX))


def _whole_draft_of(folder: Path, served: str) -> bool:
    """A draft copied from `served` whose every write returned: what a killed ingest left, usable."""
    try:
        note = json.loads((folder / DRAFT).read_text())
    except (OSError, ValueError):
        return False
    return note.get("from") == served and not (folder / WRITING).exists()


def _remove(folder: Path) -> None:
    """Once any process's call on it is done (its access lock), and for good."""
    try:
        with access(folder, exclusive=True):
            shutil.rmtree(folder)
    except (OSError, VectorStoreError) as exc:
        log.warning("cannot remove the old Chroma folder %s: %s", folder, exc)


def draft(base: Path, served: str, before: str) -> str:
    """The version an ingest (holding the campaign's ingest lock) writes into: a whole draft of the
    served folder that an earlier ingest left, else a new copy of the served folder. Any other draft
    is removed (a torn one: a write was cut)."""
    base.mkdir(parents=True, exist_ok=True)
    chosen = ""
    for name in _versions(base):
        if name in (served, before):
            continue
        if not chosen and _whole_draft_of(base / name, served):
            chosen = name
        else:
            _remove(base / name)
    if chosen:
        return chosen
    chosen = f"{_PREFIX}{secrets.token_hex(6)}"
    source, target = folder_of(base, served), base / chosen
    if source.is_dir():
        with access(source, exclusive=False):  # no process opens it meanwhile (an open writes a row)
            shutil.copytree(source, target, ignore=_not_copied(source))
    target.mkdir(exist_ok=True)
    (target / DRAFT).write_text(json.dumps({"from": served}))
    return chosen


def _not_copied(source: Path):
    def ignore(folder: str, names: list[str]) -> list[str]:
        top = Path(folder) == source
        return [n for n in names if n == ACCESS_LOCK or (top and n.startswith(_PREFIX))]

    return ignore


def retire(base: Path, served: str, before: str) -> None:
    """After a commit made `served` the version questions read: remove every version but it and the
    one before, and the files of a store from before versions once neither of the two is it."""
    for name in _versions(base):
        if name not in (served, before):
            _remove(base / name)
    if served and before:
        with access(base, exclusive=True):
            for path in base.iterdir():
                if path.name.startswith(_PREFIX) or path.name == ACCESS_LOCK:
                    continue
                try:
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
                except OSError as exc:
                    log.warning("cannot remove %s of the Chroma store from before: %s", path, exc)
    note = folder_of(base, served) / DRAFT
    note.unlink(missing_ok=True)

"""`oracle visibility`: who reads each note, and each passage hidden inside one, with the rule that decided.

A game master's check of his policy. The notes folder is read exactly as the ingest reads it
(`read_notes`, one `Vault` over every note, `parse_note` with the campaign's policy), so what this
lists is what the index holds; nothing is indexed and no model is needed. Pure: it returns frozen
dataclasses, the command line prints them.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import OracleError
from .index.scan import read_notes, vault_of
from .notes.parse import NoteError, parse_note
from .notes.suggest import Suggestion, propose
from .settings import Settings
from .types import GM, PUBLIC

log = logging.getLogger(__name__)

PLAYERS = "players"
GAME_MASTER = "game master"


class VisibilityError(OracleError, ValueError):
    """A PATH outside the notes folder, or one that names no file in it."""


@dataclass(frozen=True)
class HiddenBlock:
    """A passage of a note players read that is kept from them (1-based lines, inclusive)."""

    start_line: int
    end_line: int
    rule: str

    def to_json(self) -> dict[str, Any]:
        return {"start_line": self.start_line, "end_line": self.end_line, "rule": self.rule}


@dataclass(frozen=True)
class NoteVisibility:
    path: str  # relative to the notes folder, POSIX separators
    reader: str  # PLAYERS or GAME_MASTER
    rule: str  # why ("" for a note players read that no rule names)
    hidden: tuple[HiddenBlock, ...] = ()
    warnings: tuple[str, ...] = ()
    text: str | None = None  # what players read (lines kept), when asked for and players read it
    asides: tuple[HiddenBlock, ...] = ()  # out of the game: readable, never searched (notes/asides.py)

    @property
    def players(self) -> bool:
        return self.reader == PLAYERS

    def to_json(self) -> dict[str, Any]:
        out = {"path": self.path, "reader": self.reader, "rule": self.rule,
               "hidden": [h.to_json() for h in self.hidden], "warnings": list(self.warnings),
               "asides": [a.to_json() for a in self.asides]}
        if self.text is not None:
            out["text"] = self.text
        return out


@dataclass(frozen=True)
class SkippedFile:
    path: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True)
class VisibilityReport:
    notes_dir: str
    policy: str  # the policy in one line
    notes: tuple[NoteVisibility, ...]
    skipped: tuple[SkippedFile, ...]
    unmatched: tuple[str, ...]  # policy patterns that match no note of the folder

    @property
    def players(self) -> int:
        return sum(n.players for n in self.notes)

    @property
    def game_master(self) -> int:
        return len(self.notes) - self.players

    @property
    def hidden(self) -> int:
        return sum(len(n.hidden) for n in self.notes)

    def to_json(self) -> dict[str, Any]:
        return {
            "notes_dir": self.notes_dir,
            "policy": self.policy,
            "notes": [n.to_json() for n in self.notes],
            "skipped": [s.to_json() for s in self.skipped],
            "unmatched": list(self.unmatched),
            "counts": {"notes": len(self.notes), "players": self.players, "game_master": self.game_master,
                       "hidden": self.hidden, "skipped": len(self.skipped)},
        }


def note_visibility(settings: Settings, paths: Sequence[str] = (), *, players_text: bool = False) -> VisibilityReport:
    """Every note of the notes folder (or of `paths` in it: files or folders, relative to the folder
    or absolute inside it), who reads it and why, and its hidden passages; with `players_text`, the
    text players read of each note they read. The policy's patterns are checked against the whole
    folder, and embeds resolve across it, whatever `paths` restricts the listing to."""
    root = settings.notes_dir
    found = read_notes(root)
    wanted = [_relative(root, p) for p in paths]
    policy = settings.policy
    vault = vault_of(found, settings)

    def listed(rel: str) -> bool:
        return not wanted or any(_under(rel, w) for w in wanted)

    if wanted:
        every = list(found.files) + [s.path for s in found.skipped] + list(found.compendium)
        for raw, w in zip(paths, wanted, strict=True):
            if not any(_under(rel, w) for rel in every):
                raise VisibilityError(f"{raw} names no note in the notes folder {root}")
    notes: list[NoteVisibility] = []
    skipped = [SkippedFile(s.path, s.reason) for s in found.skipped if listed(s.path)]
    for rel, data in found.files.items():
        if not listed(rel):
            continue
        try:
            note = parse_note(rel, data, settings.folder_kinds, real_path=found.reals.get(rel), vault=vault)
        except NoteError as exc:
            skipped.append(SkippedFile(rel, str(exc)))
            continue
        except Exception as exc:  # as at ingest: a parser bug costs one note
            log.exception("parsing %s failed", rel)
            skipped.append(SkippedFile(rel, f"could not be parsed ({type(exc).__name__}: {exc})"))
            continue
        public = note.visibility == PUBLIC
        notes.append(NoteVisibility(
            path=rel,
            reader=PLAYERS if public else GAME_MASTER,
            rule=note.rule,
            hidden=tuple(HiddenBlock(s.start_line, s.end_line, s.rule) for s in note.secrets),
            warnings=note.warnings,
            text=note.text if players_text and public else None,
            asides=tuple(HiddenBlock(a.start_line, a.end_line, f"out of the game, never searched ({a.heading!r})")
                         for a in note.asides),
        ))
    return VisibilityReport(
        notes_dir=str(root),
        policy=policy.describe(),
        notes=tuple(notes),
        skipped=tuple(sorted(skipped, key=lambda s: s.path)),
        unmatched=tuple(policy.unmatched(list(found.files))),
    )


def suggest_policy(settings: Settings) -> Suggestion:
    """A policy proposed from the notes folder's own folders (`notes/suggest.py`), whatever policy is
    set now: the notes are read as if none were."""
    bare = settings.model_copy(update={"player_notes": [], "gm_notes": []})
    report = note_visibility(bare)
    found = read_notes(bare.notes_dir)
    hubs = {rel: data.decode("utf-8", "replace") for rel, data in found.files.items() if "/" not in rel}
    readers = {n.path: PUBLIC if n.players else GM for n in report.notes}
    return propose(vault_of(found, bare).conventions, readers, hubs)


def _relative(root: Path, raw: str) -> str:
    """A PATH argument as a POSIX path relative to the notes folder ("" for the whole folder): a
    path relative to the folder, or absolute inside it, or relative to the working directory and
    inside it (`notes/Sessions`). Links are not followed: a linked note is named by where it sits."""
    base = Path(os.path.abspath(root))
    given = Path(raw)
    if given.is_absolute():
        candidates = [Path(os.path.abspath(given))]
    else:
        inside = Path(os.path.abspath(base / given))
        here = Path(os.path.abspath(given))
        candidates = [inside] if inside.exists() or not here.exists() else [here]
    for candidate in candidates:
        for folder in (base, Path(os.path.realpath(base))):
            if candidate.is_relative_to(folder):
                rel = candidate.relative_to(folder).as_posix()
                return "" if rel == "." else rel
    raise VisibilityError(f"{raw} is not inside the notes folder {root}")


def _under(rel: str, wanted: str) -> bool:
    """`rel` is the file `wanted` names (with or without `.md`) or lies in the folder it names."""
    if not wanted:
        return True
    r, w = rel.casefold(), wanted.casefold()
    return r == w or r == w + ".md" or r.startswith(w + "/")


def players_view(text: str) -> str:
    """A note's text as players read it, for reading: trailing spaces dropped, runs of blank lines
    (where frontmatter and secrets were blanked) collapsed into one, none at either end."""
    lines: list[str] = []
    for line in text.split("\n"):
        line = line.rstrip()
        if line or (lines and lines[-1]):
            lines.append(line)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)

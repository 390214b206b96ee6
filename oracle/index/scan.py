"""What an ingest reads: the notes folder scanned, each changed note parsed and chunked, and the
Compendium rebuilt from every source (cheap next to embedding). Synchronous and pure CPU: run in the
embedding worker process or the ingest's lane, never on the event loop."""
from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..notes.chunking import chunk_note
from ..notes.embeds import Vault
from ..notes.parse import NoteError, decode, parse_note
from ..policy import in_templates
from ..settings import Settings
from ..text import normalize
from ..types import GM, PUBLIC, Chunk, ChunkText, EntitySource, Note, Skipped
from . import annotate as annotate_mod
from .compendium import (
    Entity,
    Mention,
    adopt_name_parts,
    find_mentions,
    lowercase_vocabulary,
    merge_sources,
    proper_nouns,
    read_compendium_file,
)
from .store import CachedAnnotation, Compendium, FileRecord

log = logging.getLogger(__name__)

CHUNKER_VERSION = "6"
COMPENDIUM_FILES = {"compendium.yaml", "compendium.yml", "compendium.md"}


@dataclass
class Scan:
    hashes: dict[str, str] = field(default_factory=dict)  # every readable .md file
    notes: dict[str, Note] = field(default_factory=dict)  # parsed: new or changed
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[Skipped] = field(default_factory=list)
    compendium: list[EntitySource] = field(default_factory=list)
    vault: Vault | None = None  # the folder as read, for what the ingest reports of it


def walk_notes(root: Path) -> Iterator[tuple[str, Path | None, str, str | None]]:
    """(relative path, file, reason-if-refused, real path if a link) for each Markdown file.

    Hidden folders and linked folders are skipped. A linked file inside the folder is read, and
    `real path` (relative to the folder) is where it points: a link into a GM folder is GM-only."""
    real_root = root.resolve()
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(folder, d)))
        for name in sorted(files):
            at_top = Path(folder) == root
            if name.startswith(".") or not (name.lower().endswith(".md") or (at_top and name.lower() in COMPENDIUM_FILES)):
                continue
            full = Path(folder, name)
            rel = full.relative_to(root).as_posix()
            if not full.is_symlink():
                yield rel, full, "", None
                continue
            target = full.resolve()
            if not target.is_relative_to(real_root):
                yield rel, None, "link points outside the notes folder (not followed)", None
                continue
            yield rel, full, "", target.relative_to(real_root).as_posix()


@dataclass
class NoteFiles:
    """The notes folder read as the ingest reads it: every note's bytes (a `Vault`'s files), where
    each linked note points, the files refused, and the Compendium files at the top."""

    files: dict[str, bytes] = field(default_factory=dict)
    reals: dict[str, str] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    compendium: dict[str, bytes] = field(default_factory=dict)


def read_notes(root: Path) -> NoteFiles:
    """Read every Markdown file `walk_notes` finds; a Compendium file is a note too only if it is
    Markdown with a body."""
    if not root.is_dir():
        raise FileNotFoundError(f"the notes folder {root} does not exist")
    found = NoteFiles()
    for rel, path, refused, real in walk_notes(root):
        if path is None:
            found.skipped.append(Skipped(rel, refused))
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            found.skipped.append(Skipped(rel, f"cannot read: {exc.strerror or exc}"))
            continue
        if "/" not in rel and rel.lower() in COMPENDIUM_FILES:
            found.compendium[rel] = data
            if not rel.lower().endswith(".md") or not _has_body(data):
                continue  # entries only: nothing to index as a note
        found.files[rel] = data
        if real:
            found.reals[rel] = real
    return found


def vault_of(found: NoteFiles, settings: Settings) -> Vault:
    """The notes folder as one vault, read under the campaign's policy, folder kinds and language."""
    return Vault(found.files, settings.policy, found.reals, settings.folder_kinds)


def scan_notes(settings: Settings, manifest: dict[str, FileRecord], full: bool) -> Scan:
    """Read the folder; parse what is new or changed. A note's identity covers what it embeds and its
    name, so editing an embedded handout re-indexes the notes that show it, and a new note of the same
    file name re-labels the one already indexed."""
    scan = Scan()
    found = read_notes(settings.notes_dir)
    policy = settings.policy
    files, reals = found.files, found.reals
    scan.skipped += found.skipped
    for rel, data in found.compendium.items():
        # Read on every run: the Compendium is rebuilt each time. Under an allowlist that does not
        # list it, its entries are the game master's like any other unlisted file.
        _read_compendium(rel, data, scan, policy.decide(rel).visibility)
    vault = vault_of(found, settings)
    scan.vault = vault
    scan.warnings += [Skipped("(settings)", w) for w in policy.unmatched(list(files))]
    for rel, data in files.items():
        # A link's target, the note's name and what the vault makes of it, and what it embeds are
        # part of its identity.
        real = reals.get(rel)
        digest = hashlib.sha256(data + f"\0{real or ''}\0{vault.conventions.key(rel)}".encode()).hexdigest()
        deps = vault.dependencies(rel) if b"![" in data else []
        if deps:
            digest = hashlib.sha256(
                (digest + "".join(f"\0{d}\0" + hashlib.sha256(files[d]).hexdigest() for d in sorted(deps))).encode()
            ).hexdigest()
        scan.hashes[rel] = digest
        old = manifest.get(rel)
        if old is not None and old.hash == digest and not full:
            if old.status == "skipped":
                scan.skipped.append(Skipped(rel, old.reason))
            continue
        try:
            note = parse_note(rel, data, settings.folder_kinds, real_path=real, vault=vault)
        except NoteError as exc:
            scan.skipped.append(Skipped(rel, str(exc)))
            continue
        except Exception as exc:  # a parser bug must cost one note, never the ingest
            log.exception("parsing %s failed", rel)
            scan.skipped.append(Skipped(rel, f"could not be parsed ({type(exc).__name__}: {exc})"))
            continue
        scan.notes[rel] = note
        scan.warnings += [Skipped(rel, w) for w in note.warnings]
    return scan


def entity_name(title: str) -> str:
    """A note's title as the name of what it is about: a numbering before it dropped (`05 - Clock
    Tower`, `14 Zunda'i Miir Lair`)."""
    return re.sub(r"^\s*\d{1,3}\s*[-–—.:)]?\s+(?=\S)", "", title) or title


def _has_body(data: bytes) -> bool:
    text = data.decode("utf-8", "replace")
    if text.startswith("---"):
        parts = text.split("\n---", 1)
        text = parts[1].split("\n", 1)[1] if len(parts) > 1 and "\n" in parts[1] else ""
    return bool(text.strip())


def _read_compendium(rel: str, data: bytes, scan: Scan, visibility: str = PUBLIC) -> None:
    try:
        text, _ = decode(data)
        scan.compendium += read_compendium_file(rel.lower(), text, visibility)
    except Exception as exc:
        scan.warnings.append(Skipped(rel, f"compendium entries not read: {exc}"))


def index_head(chunk: Chunk, note: Note | FileRecord) -> str:
    """The label and heading path, plus the note's aliases so a nickname finds its sheet."""
    if note.aliases and chunk.visibility == note.visibility:
        return f"{chunk.head} ({', '.join(note.aliases)})"
    return chunk.head


def chunk_all(scan: Scan, settings: Settings) -> dict[str, list[Chunk]]:
    out = {}
    for rel, note in scan.notes.items():
        try:
            out[rel] = chunk_note(note, max_words=settings.session_max_words, overlap=settings.overlap_words)
        except Exception as exc:
            log.exception("chunking %s failed", rel)
            scan.skipped.append(Skipped(rel, f"could not be chunked ({type(exc).__name__}: {exc})"))
    return out


def read_and_chunk(settings: Settings, manifest: dict[str, FileRecord], full: bool) -> tuple[Scan, dict[str, list[Chunk]]]:
    """A reingest's start, pure and CPU-bound (the CRD3 log: a tenth of a second of Python for a one-
    session edit): sent to the embedding worker when there is one, so that it holds none of the bot's
    interpreter lock while questions are answered."""
    scan = scan_notes(settings, manifest, full)
    return scan, chunk_all(scan, settings)


def build_compendium(
    files: list[FileRecord],
    extra: list[EntitySource],
    chunks: list[ChunkText],
    annotations: dict[str, CachedAnnotation],
    chunk_hashes: dict[str, str],
) -> Compendium:
    """Two Compendiums: the players', built from public text alone, and the game master's, from
    everything. A name is a player's only if public text carries it, and two names become one
    entity for players only if public text joins them: a GM note's `aliases: [Aldric]` must not
    tell a player who Aldric is. When nothing is secret, the two are one and the same."""
    sources: list[EntitySource] = []
    for f in files:
        if f.status == "ok" and (f.entity or f.aliases) and not in_templates(f.path):
            sources.append(EntitySource(entity_name(f.title), f.aliases, f.kind, "frontmatter", f.path, f.visibility))
    sources += extra
    for chunk in chunks:
        annotation = annotations.get(chunk_hashes.get(chunk.id, ""))
        if annotation:
            sources += annotate_mod.grounded_entities(chunk.text, annotation.entities, chunk.visibility)
    public_sources = [s for s in sources if s.visibility == PUBLIC]
    public_chunks = [c for c in chunks if c.visibility == PUBLIC]
    players = _compendium(public_sources, public_chunks)
    if len(public_sources) == len(sources) and len(public_chunks) == len(chunks):
        return {PUBLIC: players, GM: players}
    return {PUBLIC: players, GM: _compendium(sources, chunks)}


def _compendium(sources: list[EntitySource], chunks: list[ChunkText]) -> tuple[list[Entity], list[Mention]]:
    lower_vocab = lowercase_vocabulary(chunks)
    entities = adopt_name_parts(merge_sources(sources + proper_nouns(chunks, lower_vocab)), lower_vocab)
    note_stems: dict[str, int] = {}
    for i, e in enumerate(entities):
        if e.note_path:
            note_stems.setdefault(normalize(Path(e.note_path).stem.replace("_", " ")), i)
            note_stems.setdefault(normalize(Path(e.note_path).stem), i)
    return entities, find_mentions(entities, chunks, note_stems)

"""Ingest: notes folder → chunks, windows, Compendium and annotations. Incremental and atomic.

Order matters for atomicity. New windows go into Chroma first under ids nobody reads yet; then one
SQLite transaction swaps the chunks, windows, manifest and Compendium; only then are windows that
SQLite no longer names deleted. A run killed anywhere leaves the previous index served (questions
drop dense hits whose chunk SQLite lacks) and the next run completes the work, reusing any windows
already stored. Annotations come last: they are a cache, filled in chunk by chunk.

Any process may run it (the bot, `oracle ingest`, `oracle watch`, a timer); one at a time per campaign
(`IngestLock`, across processes), and that one alone writes the campaign's Chroma folder, through a
store it opens afresh under the lock. Its commits bump the index's generation stamp, which tells
every other process to read the dense index again (docs/processes.md).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import OracleError
from ..llm import LLMError
from ..notes.chunking import chunk_note
from ..notes.embeds import Vault
from ..notes.parse import ENTITY_KINDS, NoteError, decode, parse_note
from ..notes.refs import chunk_refs
from ..policy import in_templates
from ..settings import Settings
from ..text import normalize
from ..types import GM, PUBLIC, Chunk, ChunkText, EntitySource, IngestReport, Note, Progress, Skipped, Window
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
from .index import Index, collection_name
from .seam import Embeddings, Vectors, ingest_step
from .store import CachedAnnotation, Changes, Compendium, FileRecord, StoreError, now
from .vectors import VectorStoreError

log = logging.getLogger(__name__)

CHUNKER_VERSION = "2"
COMPENDIUM_FILES = {"compendium.yaml", "compendium.yml", "compendium.md"}
_EMBED_BATCH = 64
_MAX_ANNOTATION_FAILURES = 3

ProgressFn = Callable[[Progress], None]


class IngestBusy(OracleError, RuntimeError):
    """Another ingest holds the lock; the message says who started it and when."""


class IngestError(OracleError, RuntimeError):
    """The ingest could not finish (disk full, read-only folder, a broken store); nothing was lost."""


class IngestLock:
    """One ingest at a time, across processes: an advisory lock the OS drops if the holder dies. It is
    also what keeps two processes from ever writing one embedded Chroma folder: only an ingest writes
    it, and the folder is the campaign's (`Settings.chroma_path`, inside the locked data folder)."""

    def __init__(self, path: Path, by: str) -> None:
        self.path = path
        self.by = by
        self._fd: int | None = None

    def __enter__(self) -> IngestLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise IngestBusy(
                f"an ingest is already running (started by {holder.get('by', 'someone')} at "
                f"{holder.get('started', 'an unknown time')}, pid {holder.get('pid', '?')})"
            ) from None
        os.ftruncate(fd, 0)
        started = now()
        os.write(fd, json.dumps({"pid": os.getpid(), "by": self.by, "started": started}).encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read_holder(fd: int) -> dict:
    try:
        return json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}


# ---------------------------------------------------------------------------------------------
# Scanning the folder (synchronous: run in a thread)


@dataclass
class Scan:
    hashes: dict[str, str] = field(default_factory=dict)  # every readable .md file
    notes: dict[str, Note] = field(default_factory=dict)  # parsed: new or changed
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[Skipped] = field(default_factory=list)
    compendium: list[EntitySource] = field(default_factory=list)


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
    vault = Vault(files, policy, reals)
    scan.warnings += [Skipped("(settings)", w) for w in policy.unmatched(list(files))]
    for rel, data in files.items():
        # A link's target, the note's name in the vault and what it embeds are part of its identity.
        real = reals.get(rel)
        digest = hashlib.sha256(data + f"\0{real or ''}\0{vault.names.key(rel)}".encode()).hexdigest()
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
            note = parse_note(rel, data, settings.folder_kinds, real_path=real, policy=policy, vault=vault)
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


# ---------------------------------------------------------------------------------------------
# The Compendium, rebuilt from every source on each ingest (cheap next to embedding)


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
        if f.status == "ok" and (f.kind in ENTITY_KINDS or f.aliases) and not in_templates(f.path):
            sources.append(EntitySource(f.title, f.aliases, f.kind, "frontmatter", f.path, f.visibility))
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


# ---------------------------------------------------------------------------------------------
# The run


async def ingest(index: Index, *, progress: ProgressFn | None = None, by: str = "the command line") -> IngestReport:
    """Bring the index in line with the notes folder. Raises IngestBusy if another ingest runs."""
    notes = index.settings.notes_dir
    if not notes.is_dir():  # before any lock or store: nothing was ever read, so nothing is "still served"
        raise IngestError(f"the notes folder {notes} does not exist: set ORACLE_NOTES_DIR (or --notes) to your vault")
    try:
        with IngestLock(index.settings.lock_path, by):
            return await _ingest(index, progress or (lambda p: None))
    except (sqlite3.Error, OSError, VectorStoreError, StoreError) as exc:
        # The caller reports the reason in one line; the traceback is for whoever logs at INFO (-v, the bot).
        log.info("ingest failed", exc_info=True)
        reason = getattr(exc, "strerror", None) or str(exc)
        raise IngestError(f"the ingest stopped ({reason}); the previous index is still served") from exc


async def _ingest(index: Index, progress: ProgressFn) -> IngestReport:
    settings = index.settings
    started = time.perf_counter()
    report = IngestReport()
    store = await index.writer()
    embedder = await index.embedder()
    # Opened afresh: another process may have written it. An ingest is what repairs a missing one.
    vectors = await index.vectors_to_write()
    meta = await store.meta()
    collection = collection_name(embedder, settings)
    # A new policy can change any note's visibility: every note is read again (unchanged text keeps
    # its embeddings, which are stored by chunk id).
    chunking = f"{CHUNKER_VERSION}/{settings.session_max_words}/{settings.overlap_words}/{settings.policy.key}"
    full = meta.get("collection") != collection or meta.get("chunking") != chunking

    manifest = await store.manifest()
    progress(Progress("scan", 0, 0, str(settings.notes_dir)))
    scan, chunks_by_file = await embedder.offload(read_and_chunk, settings, manifest, full)
    progress(Progress("scan", len(scan.hashes), len(scan.hashes), f"{len(scan.notes)} to index"))

    skipped_paths = {s.path for s in scan.skipped}
    removed = sorted(set(manifest) - set(scan.hashes) - skipped_paths)
    # A skipped file counts as changed only if it was indexed before or its bytes changed.
    newly_skipped = {
        p for p in skipped_paths & set(manifest)
        if manifest[p].status != "skipped" or manifest[p].hash != scan.hashes.get(p)
    }
    touched = set(scan.notes) | newly_skipped | set(removed)
    report.added = sorted(p for p in scan.notes if p not in manifest)
    report.changed = sorted(p for p in touched if p in manifest and p not in removed)
    report.removed = removed
    report.unchanged = len(scan.hashes) - len(scan.notes) - len(skipped_paths & set(scan.hashes))
    report.skipped, report.warnings = scan.skipped, scan.warnings
    report.secrets = {
        rel: -1 if note.visibility == GM else len(note.secrets)
        for rel, note in sorted(scan.notes.items())
        if note.visibility == GM or note.secrets
    }
    report.rules = {rel: _rules(scan.notes[rel]) for rel in report.secrets}

    existing = await store.chunk_ids()
    old_ids = existing if full else await store.chunk_ids_for(touched)
    new_chunks = [c for rel in sorted(chunks_by_file) for c in chunks_by_file[rel]]
    new_ids = {c.id for c in new_chunks}
    to_add = [c for c in new_chunks if full or c.id not in existing]
    to_remove = sorted(old_ids - new_ids) if not full else sorted(old_ids)
    # Chunks SQLite keeps whose windows Chroma lost (a deleted Chroma folder): embed them again.
    stored_ids = await vectors.all_ids()
    lost = await store.chunks_missing_windows(stored_ids, exclude=set(to_remove) | {c.id for c in to_add})
    report.windows_repaired = len(lost)

    windows = await embedder.windows(to_add + lost, settings.window_overlap_tokens, settings.window_tokens)
    pending = [w for w in windows if w.id not in stored_ids]
    progress(Progress("embed", 0, len(pending)))
    await _embed(embedder, vectors, pending, progress=progress)
    report.windows_embedded = len(pending)

    notes_meta = {rel: _file_record(note, scan.hashes[rel]) for rel, note in scan.notes.items()}
    put_files = list(notes_meta.values()) + [
        FileRecord(s.path, scan.hashes[s.path], status="skipped", reason=s.reason)
        for s in scan.skipped
        if s.path in scan.hashes
    ]
    kept_files = [f for p, f in manifest.items() if p not in touched and p in scan.hashes]
    heads = {c.id: index_head(c, notes_meta[c.path]) for c in to_add}

    progress(Progress("commit", 0, 1))
    removing = set(to_remove)
    remaining = [t for t in await store.chunk_texts() if t.id not in removing]
    remaining_ids = {t.id for t in remaining}
    all_texts = remaining + [
        ChunkText(c.id, heads[c.id], c.text, c.visibility, c.links) for c in to_add if c.id not in remaining_ids
    ]
    hashes = {r.chunk_id: r.text_hash for r in await store.chunk_hashes()} | {c.id: c.text_hash for c in to_add}
    cache = await store.annotations(settings.model, annotate_mod.PROMPT_VERSION)
    files_for_compendium = kept_files + list(notes_meta.values())
    # The version is of how the Compendium is built: a new one rebuilds it on the next ingest.
    compendium_key = hashlib.sha256(
        ("2" + repr(sorted(map(repr, scan.compendium)))).encode()
    ).hexdigest()[:16]
    if touched or full or to_add or meta.get("compendium") != compendium_key:
        compendium: Compendium | None = await embedder.offload(
            build_compendium, files_for_compendium, scan.compendium, all_texts, cache, hashes
        )
    else:  # nothing it is built from changed: keep it (the whole rebuild is most of a re-ingest)
        compendium = None
    refs = await ingest_step(chunk_refs, [(c.id, c.sessions, c.path, c.text, c.links) for c in to_add])
    changes = Changes(
        remove_chunks=to_remove,
        add_chunks=[(c, heads[c.id]) for c in to_add],
        add_windows=[(w.id, w.chunk_id) for w in windows],
        add_refs=refs,
        put_files=put_files,
        remove_files=removed,
        meta={
            "collection": collection,
            "chunking": chunking,
            "embed_model": settings.embed_model,
            "model": settings.model,
            "notes_dir": str(settings.notes_dir.resolve()),
            "last_ingest": now(),
            "compendium": compendium_key,
        },
    )
    await store.apply(changes, compendium)
    index.wrote(await store.generation())  # this process's dense index holds what it wrote
    progress(Progress("commit", 1, 1))

    orphans = await vectors.all_ids() - await store.window_ids()
    if orphans:
        await vectors.delete(orphans)

    await store.forget_orphan_annotations()
    if await _annotate(index, report, all_texts, hashes, cache, progress):
        # New annotations bring the names the model extracted into the Compendium.
        compendium = await embedder.offload(
            build_compendium, files_for_compendium, scan.compendium, all_texts, cache, hashes
        )
        await store.replace_compendium(compendium)
        index.wrote(await store.generation())
    report.entities = len(compendium[GM][0]) if compendium is not None else await store.entity_count(GM)
    report.chunks = len(all_texts)
    report.seconds = time.perf_counter() - started
    await store.set_meta({"last_ingest_seconds": f"{report.seconds:.1f}"})
    progress(Progress("done", 1, 1))
    return report


async def _embed(embedder: Embeddings, vectors: Vectors, pending: list[Window], *, progress: ProgressFn) -> None:
    """Embed `pending` (in the embedding worker when there is one) and write it into the dense index
    from this process, a batch at a time."""
    for i in range(0, len(pending), _EMBED_BATCH):
        batch = pending[i : i + _EMBED_BATCH]
        metadatas = [{"chunk_id": w.chunk_id, "visibility": w.visibility} for w in batch]
        await vectors.upsert([w.id for w in batch], await embedder.encode([w.text for w in batch]), metadatas)
        progress(Progress("embed", i + len(batch), len(pending)))


def _rules(note: Note) -> str:
    """Why a note's text is kept from players, in the words the summary shows."""
    if note.visibility == GM:
        return note.rule
    return "; ".join(dict.fromkeys(s.rule for s in note.secrets if s.rule))


def _file_record(note: Note, digest: str) -> FileRecord:
    return FileRecord(note.path, digest, note.kind, note.title, note.aliases, note.visibility)


async def _annotate(
    index: Index,
    report: IngestReport,
    chunks: list[ChunkText],
    hashes: dict[str, str],
    cache: dict[str, CachedAnnotation],
    progress: ProgressFn,
) -> int:
    """Annotate every chunk the cache lacks, while Ollama answers; returns how many were added.

    `cache` is updated in place. Each annotation is committed on its own, so a kill keeps the work.
    """
    settings = index.settings
    store = await index.writer()
    missing_ids = [t.id for t in chunks if hashes[t.id] not in cache]
    report.annotations_done = len(chunks) - len(missing_ids)
    report.annotations_missing = len(missing_ids)
    if not missing_ids:
        return 0
    if not settings.annotate:
        report.annotation_note = "annotations are turned off (ORACLE_ANNOTATE=false)"
        return 0
    reason = await index.llm.probe(settings.ollama_probe_timeout)
    if reason:
        report.annotation_note = f"{reason}; annotations will be filled in by a later ingest"
        return 0
    failures = 0
    new = 0
    progress(Progress("annotate", 0, len(missing_ids)))
    for i, chunk in enumerate(await store.chunks_by_ids(missing_ids), 1):
        if chunk.text_hash in cache:  # two chunks with the same text
            continue
        try:
            annotation = await annotate_mod.annotate(index.llm, chunk)
        except LLMError as exc:
            failures += 1
            log.warning("annotation of %s (%s) failed: %s", chunk.label, chunk.path, exc)
            if failures >= _MAX_ANNOTATION_FAILURES:
                report.annotation_note = f"stopped after {failures} failures: {exc}"
                break
            continue
        entities = [e.model_dump() for e in annotation.entities]
        await store.put_annotation(chunk.text_hash, settings.model, annotate_mod.PROMPT_VERSION, annotation.text, entities)
        cache[chunk.text_hash] = CachedAnnotation(annotation.text, entities)
        new += 1
        progress(Progress("annotate", i, len(missing_ids), chunk.label))
    done = sum(1 for t in chunks if hashes[t.id] in cache)
    report.annotations_done, report.annotations_missing = done, len(chunks) - done
    return new

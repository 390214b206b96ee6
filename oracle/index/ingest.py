"""Ingest: notes folder → chunks, windows, Compendium and annotations. Incremental and atomic.

Order matters for atomicity. New windows go into a draft of the served Chroma folder, and windows no
chunk will name leave it; then one SQLite transaction swaps the chunks, windows, manifest and
Compendium and names the draft as served (`folders`). A run killed anywhere leaves the previous index
served, its Chroma folder untouched, and the next run goes on from the draft when every write to it
returned. Annotations come last: they are a cache, filled in chunk by chunk.

Any process may run it (the bot, `oracle ingest`, `oracle watch`, a timer); one at a time per campaign
(`IngestLock`, across processes), and that one alone writes the campaign's draft. Every other process
opens the newly served folder at its next question (docs/processes.md).
"""
from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError, OracleError
from ..llm_errors import LLMError
from ..notes.refs import chunk_refs
from ..offload import ingest_step, off_loop
from ..settings import Settings
from ..stems import Stemming
from ..types import GM, Chunk, ChunkText, EmbeddingWindow, EntitySource, IngestProgress, IngestReport, Note, Skipped
from . import annotate as annotate_mod
from . import folders
from .index import Index
from .lock import IngestLock, check_writable
from .plan import Plan, ProgressFn, read_plan
from .report import VaultReport, note_facts, vault_report
from .scan import Scan, build_compendium, index_head
from .seam import Embeddings, Vectors
from .store import CachedAnnotation, Changes, Compendium, FileRecord, Indexed, Store, StoreError, now
from .vectors import VectorStoreError

log = logging.getLogger(__name__)

_EMBED_BATCH = 64
_MAX_ANNOTATION_FAILURES = 3

# How the Compendium is built: another version rebuilds it on the next ingest.
COMPENDIUM_VERSION = "3"


class IngestError(OracleError, RuntimeError):
    """The ingest could not finish (disk full, read-only folder, a broken store); nothing was lost."""


async def ingest(index: Index, *, progress: ProgressFn | None = None, by: str = "the command line") -> IngestReport:
    """Bring the index in line with the notes folder. Raises IngestBusy if another ingest runs."""
    _check_notes(index.settings)  # before any lock or store: nothing was ever read, so nothing is "still served"
    check_writable(index.settings.data_dir)
    try:
        with IngestLock(index.settings.lock_path, by):
            return await _ingest(index, progress or (lambda p: None))
    except (sqlite3.Error, OSError, VectorStoreError, StoreError) as exc:
        # The caller reports the reason in one line; the traceback is for whoever logs at INFO (-v, the bot).
        log.info("ingest failed", exc_info=True)
        reason = getattr(exc, "strerror", None) or str(exc)
        raise IngestError(f"the ingest stopped ({reason}); the previous index is still served") from exc


class NotesFolderError(IngestError, InputError):
    """The notes folder is not one, or holds no note: nothing is read, the index is left as it is."""


def _check_notes(settings: Settings) -> None:
    notes, where = settings.notes_dir, "set ORACLE_NOTES_DIR (or --notes) to your vault"
    if not notes.exists():
        raise NotesFolderError(f"the notes folder {notes} does not exist: {where}")
    if not notes.is_dir():
        raise NotesFolderError(f"the notes folder {notes} is a file, not a folder: {where}'s folder")
    # A wrong folder, or a vault's folder not mounted or synced yet: never a reason to empty an index.
    if next(_markdown(notes), None) is None:
        kept = " (the index is kept as it was)" if settings.sqlite_path.exists() else ""
        raise NotesFolderError(f"the notes folder {notes} holds no Markdown note{kept}: {where}")


def _markdown(folder: Path) -> Iterator[Path]:
    for path in folder.rglob("*.md"):
        if not any(part.startswith(".") for part in path.relative_to(folder).parts):
            yield path


async def _ingest(index: Index, progress: ProgressFn) -> IngestReport:
    # Written into a draft folder, served from the commit on: a kill never tears the served one.
    vectors, folder = await index.draft()
    try:
        return await _ingest_into(index, vectors, folder, progress)
    finally:
        if folder is not None:  # served by now, or left for the next ingest: the index opens its own
            await vectors.close()


async def _ingest_into(index: Index, vectors: Vectors, folder: str | None, progress: ProgressFn) -> IngestReport:
    """`folder`: the draft `vectors` writes, None for a Chroma server (written in place). The steps
    of docs/architecture.md's "How an ingest flows": read, embed, commit, annotate."""
    started = time.perf_counter()
    store, embedder = await index.writer(), await index.embedder()
    plan = await read_plan(index.settings, store, embedder, vectors, progress)
    report = plan.report()
    windows = await _embed_windows(plan, store, embedder, vectors, report, progress)
    # Windows no chunk will name after the commit: out of the draft before it is served; out of a
    # server only after the commit, which still serves them until then.
    removing = set(plan.to_remove)
    named = {w for w in await store.window_ids() if EmbeddingWindow.chunk_of(w) not in removing}
    orphans = plan.stored_ids - named - {w.id for w in windows}
    if folder is not None:
        await vectors.delete(orphans)
    commit = await _prepare_commit(plan, store, embedder, windows, report)
    progress(IngestProgress("commit", 0, 1))
    served = plan.meta.get(folders.SERVED, "")
    serve = folder if folder is not None and (windows or plan.to_remove or orphans) else None
    if serve is not None:
        commit.changes.meta.update({folders.SERVED: serve, folders.BEFORE: served})
    await store.apply(commit.changes, commit.compendium)
    progress(IngestProgress("commit", 1, 1))
    if serve is not None:
        await index.vectors(check=False)  # the draft, now served: opened while its client is still up
        await off_loop(folders.retire, index.settings.chroma_path, serve, served)
    elif folder is None:
        await vectors.delete(orphans)

    await store.forget_orphan_annotations()
    compendium = commit.compendium
    if await _annotate(index, report, commit.texts, commit.hashes, commit.cache, progress):
        # New annotations bring the names the model extracted into the Compendium.
        compendium = await embedder.offload(build_compendium, *commit.compendium_from)
        await store.replace_compendium(compendium)
    report.entities = len(compendium[GM][0]) if compendium is not None else await store.entity_count(GM)
    report.chunks = len(commit.texts)
    report.seconds = time.perf_counter() - started
    await store.set_meta({"last_ingest_seconds": f"{report.seconds:.1f}"})
    progress(IngestProgress("done", 1, 1))
    return report


async def _embed_windows(plan: Plan, store: Store, embedder: Embeddings, vectors: Vectors, report: IngestReport,
                         progress: ProgressFn) -> list[EmbeddingWindow]:
    """The windows of every chunk added or lost; those the draft lacks are embedded into it, or
    refiled from a chunk leaving with the very same text."""
    settings = plan.settings
    windows = await embedder.windows(plan.to_add + plan.lost, settings.window_overlap_tokens, settings.window_tokens)
    report.warnings += _large_notes(plan.scan, plan.to_add, windows, settings.large_note_kb)
    pending = [w for w in windows if w.id not in plan.stored_ids]
    reused = await _reuse(store, embedder, vectors, pending, plan.to_remove, plan.stored_ids, settings)
    pending = [w for w in pending if w.id not in reused]
    progress(IngestProgress("embed", 0, len(pending)))
    await _embed(embedder, vectors, pending, progress=progress)
    report.windows_embedded, report.windows_reused = len(pending), len(reused)
    return windows


@dataclass
class Commit:
    """One SQLite transaction's worth: what it swaps in, and what the annotations step reads after."""

    changes: Changes
    compendium: Compendium | None  # None: the one stored is kept
    texts: list[ChunkText]  # every chunk the index holds after it
    hashes: dict[str, str]  # chunk id: text hash
    cache: dict[str, CachedAnnotation]  # text hash: annotation
    compendium_from: tuple[list[FileRecord], list[EntitySource], list[ChunkText], dict[str, CachedAnnotation],
                           dict[str, str]]  # what `build_compendium` reads


async def _prepare_commit(plan: Plan, store: Store, embedder: Embeddings, windows: list[EmbeddingWindow],
                          report: IngestReport) -> Commit:
    settings, scan = plan.settings, plan.scan
    notes_meta = {rel: _file_record(note, scan.hashes[rel]) for rel, note in scan.notes.items()}
    put_files = list(notes_meta.values()) + [
        FileRecord(s.path, scan.hashes[s.path], status="skipped", reason=s.reason)
        for s in scan.skipped
        if s.path in scan.hashes
    ]
    kept_files = [f for p, f in plan.manifest.items() if p not in plan.touched and p in scan.hashes]
    heads = {c.id: index_head(c, notes_meta[c.path]) for c in plan.to_add}
    vault = await _vault_report(store, scan, plan.chunks_by_file, kept_files + put_files, plan.removed, settings)
    report.vault = vault.to_json()

    removing = set(plan.to_remove)
    remaining = [t for t in await store.chunk_texts() if t.id not in removing]
    remaining_ids = {t.id for t in remaining}
    texts = remaining + [
        ChunkText(c.id, heads[c.id], c.text, c.visibility, c.links) for c in plan.to_add if c.id not in remaining_ids
    ]
    hashes = {r.chunk_id: r.text_hash for r in await store.chunk_hashes()} | {c.id: c.text_hash for c in plan.to_add}
    cache = await store.annotations(settings.model, annotate_mod.PROMPT_VERSION)
    compendium_from = (kept_files + list(notes_meta.values()), scan.compendium, texts, cache, hashes)
    compendium_key = hashlib.sha256((COMPENDIUM_VERSION + repr(sorted(map(repr, scan.compendium)))).encode()).hexdigest()[:16]
    compendium: Compendium | None = None  # nothing it is built from changed: kept (its rebuild is most of a re-ingest)
    if plan.touched or plan.full or plan.to_add or plan.meta.get("compendium") != compendium_key:
        compendium = await embedder.offload(build_compendium, *compendium_from)
    changes = Changes(
        remove_chunks=plan.to_remove,
        add_chunks=await ingest_step(_indexed, plan.to_add, heads, plan.language),
        add_windows=[(w.id, w.chunk_id) for w in windows],
        add_refs=await ingest_step(chunk_refs, [(c.id, c.sessions, c.path, c.text, c.links) for c in plan.to_add]),
        put_files=put_files,
        remove_files=plan.removed,
        meta={
            "collection": plan.collection,
            "chunking": plan.chunking,
            "embed_model": settings.embed_model,
            "model": settings.model,
            "notes_dir": str(settings.notes_dir.resolve()),
            "last_ingest": now(),
            "compendium": compendium_key,
            "vault_report": json.dumps(report.vault, ensure_ascii=False),
            "policy": settings.policy.key,
            "language": plan.language,
            "stemming": Stemming(plan.language).key,
            "policy_text": settings.policy.describe(),
        },
    )
    return Commit(changes, compendium, texts, hashes, cache, compendium_from)


def _large_notes(scan: Scan, chunks: list[Chunk], windows: list[EmbeddingWindow], limit_kb: int) -> list[Skipped]:
    """Each note read now over `limit_kb` KB, with what it costs: the windows it alone makes to embed."""
    if not limit_kb:
        return []
    path_of = {c.id: c.path for c in chunks}
    per_note: dict[str, int] = {}
    for w in windows:
        path = path_of.get(w.chunk_id, "")
        per_note[path] = per_note.get(path, 0) + 1
    said = []
    for rel, note in sorted(scan.notes.items()):
        size = len(note.text.encode())
        if size <= limit_kb * 1024:
            continue
        made = per_note.get(rel, 0)
        said.append(Skipped(rel, (
            f"a large note ({_size(size)}, {len(note.text.split()):,} words: {made:,} windows to embed, "
            f"slow on a CPU); indexed all the same. A pasted transcript? Keep it out by moving it into a "
            f"folder whose name starts with a dot (hidden folders are never read), or quiet this with "
            f"ORACLE_LARGE_NOTE_KB")))
    return said


def _size(n: int) -> str:
    return f"{n / 1_048_576:.1f} MB" if n >= 1_048_576 else f"{n // 1024} KB"


async def _reuse(
    store: Store, embedder: Embeddings, vectors: Vectors, pending: list[EmbeddingWindow], leaving: list[str],
    stored: set[str], settings: Settings,
) -> dict[str, str]:
    """Windows whose very text a chunk leaving the index was embedded with (a note whose visibility a
    new policy changed, a note moved or renamed): their vectors are stored again under the new ids and
    visibility instead of being embedded anew. Returns {new window id: the old one}."""
    if not pending or not leaving:
        return {}
    old_windows = await embedder.windows(await store.chunks_by_ids(leaving), settings.window_overlap_tokens,
                                         settings.window_tokens)
    by_text = {w.text: w.id for w in old_windows if w.id in stored}
    wanted = {w.id: by_text[w.text] for w in pending if w.text in by_text}
    found = await vectors.embeddings_of(set(wanted.values()))
    reused = {new: old for new, old in wanted.items() if old in found}
    if reused:
        refiled = [w for w in pending if w.id in reused]
        await vectors.upsert([w.id for w in refiled], np.stack([found[reused[w.id]] for w in refiled]),
                             [{"chunk_id": w.chunk_id, "visibility": w.visibility} for w in refiled])
    return reused


async def _embed(embedder: Embeddings, vectors: Vectors, pending: list[EmbeddingWindow], *, progress: ProgressFn) -> None:
    """Embed `pending` (in the embedding worker when there is one) and write it into the dense index
    from this process, a batch at a time."""
    for i in range(0, len(pending), _EMBED_BATCH):
        batch = pending[i : i + _EMBED_BATCH]
        metadatas = [{"chunk_id": w.chunk_id, "visibility": w.visibility} for w in batch]
        await vectors.upsert([w.id for w in batch], await embedder.encode([w.text for w in batch]), metadatas)
        progress(IngestProgress("embed", i + len(batch), len(pending)))


async def _vault_report(
    store: Store, scan: Scan, chunks_by_file: dict[str, list[Chunk]], files: list[FileRecord], removed: list[str],
    settings: Settings,
) -> VaultReport:
    """What the Oracle made of the whole vault, as this ingest leaves the index (`report.py`)."""
    sessions = {p: s for p, s in (await store.sessions_by_path()).items() if p not in chunks_by_file and p not in removed}
    for rel, chunks in chunks_by_file.items():
        sessions[rel] = {n for c in chunks for n in c.sessions}
    assert scan.vault is not None  # set by every scan
    hubs = {rel: data.decode("utf-8", "replace") for rel, data in scan.vault.files.items() if "/" not in rel}
    return await ingest_step(vault_report, scan.vault.conventions, files, settings.policy, sessions, hubs)


def _indexed(chunks: list[Chunk], heads: dict[str, str], language: str) -> list[Indexed]:
    """Each chunk with its head and what the keyword path searches of both (`oracle/stems.py`)."""
    stemming = Stemming(language)
    return [Indexed(c, heads[c.id], stemming.text(heads[c.id]), stemming.text(c.text)) for c in chunks]


def _file_record(note: Note, digest: str) -> FileRecord:
    return FileRecord(note.path, digest, note.kind, note.title, note.aliases, note.visibility,
                      entity=note.entity, facts=note_facts(note))


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
    progress(IngestProgress("annotate", 0, len(missing_ids)))
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
        progress(IngestProgress("annotate", i, len(missing_ids), chunk.label))
    done = sum(1 for t in chunks if hashes[t.id] in cache)
    report.annotations_done, report.annotations_missing = done, len(chunks) - done
    return new

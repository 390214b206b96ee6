"""What an ingest will change, read before anything is written: the notes folder scanned and
weighed against the index (the notes added, changed and removed, the chunks that come and go, the
chunks whose windows Chroma lost). The first step of `ingest.py`."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..lexicon import DEFAULT as DEFAULT_LANGUAGE
from ..settings import Settings
from ..stems import Stemming
from ..types import GM, Chunk, IngestProgress, IngestReport, Note
from .index import collection_name, written_with
from .scan import CHUNKER_VERSION, Scan, read_and_chunk
from .seam import Embeddings, Vectors
from .store import FileRecord, Store

ProgressFn = Callable[[IngestProgress], None]


@dataclass
class Plan:
    settings: Settings
    meta: dict[str, str]  # the index's, before this ingest
    collection: str  # the Chroma collection of the embedding model
    chunking: str  # how chunks are cut; another than the index's reads every note again
    full: bool  # every note read again
    language: str  # the vault's: its keyword copies are written in it
    manifest: dict[str, FileRecord]  # the notes as the index last read them
    scan: Scan
    chunks_by_file: dict[str, list[Chunk]]  # the chunks of the notes read now
    removed: list[str]  # notes gone from the folder
    touched: set[str]  # notes whose chunks change
    to_add: list[Chunk]
    to_remove: list[str]  # ids of the chunks that leave
    stored_ids: set[str]  # ids of the windows the draft holds
    lost: list[Chunk]  # chunks kept whose windows Chroma lost: embedded again

    def report(self) -> IngestReport:
        """What the notes brought, before anything is embedded."""
        scan, manifest = self.scan, self.manifest
        skipped = {s.path for s in scan.skipped}
        report = IngestReport()
        report.added = sorted(p for p in scan.notes if p not in manifest)
        report.changed = sorted(p for p in self.touched if p in manifest and p not in self.removed)
        report.removed = self.removed
        report.unchanged = len(scan.hashes) - len(scan.notes) - len(skipped & set(scan.hashes))
        report.skipped, report.warnings = scan.skipped, scan.warnings
        report.secrets = {
            rel: -1 if note.visibility == GM else len(note.secrets)
            for rel, note in sorted(scan.notes.items())
            if note.visibility == GM or note.secrets
        }
        report.rules = {rel: _rules(scan.notes[rel]) for rel in report.secrets}
        report.windows_repaired = len(self.lost)
        return report


async def read_plan(settings: Settings, store: Store, embedder: Embeddings, vectors: Vectors,
                    progress: ProgressFn) -> Plan:
    meta = await store.meta()
    collection = collection_name(embedder, settings)
    # A new policy can change any note's visibility: every note is read again (unchanged text keeps
    # its embeddings, which are stored by chunk id).
    chunking = f"{CHUNKER_VERSION}/{settings.session_max_words}/{settings.overlap_words}/{settings.policy.key}"
    full = meta.get("collection") != collection or meta.get("chunking") != chunking

    manifest = await store.manifest()
    progress(IngestProgress("scan", 0, 0, str(settings.notes_dir)))
    scan, chunks_by_file = await embedder.offload(read_and_chunk, settings, manifest, full)
    progress(IngestProgress("scan", len(scan.hashes), len(scan.hashes), f"{len(scan.notes)} to index"))

    # The keyword copy of every chunk is written in the vault's language: another language or stemmer
    # than the index was written with rewrites them all, so every note is read again.
    language = scan.vault.conventions.language if scan.vault is not None else DEFAULT_LANGUAGE
    if not full and written_with(meta) != Stemming(language).key:
        full = True
        scan, chunks_by_file = await embedder.offload(read_and_chunk, settings, manifest, full)

    skipped_paths = {s.path for s in scan.skipped}
    removed = sorted(set(manifest) - set(scan.hashes) - skipped_paths)
    # A skipped file counts as changed only if it was indexed before or its bytes changed.
    newly_skipped = {
        p for p in skipped_paths & set(manifest)
        if manifest[p].status != "skipped" or manifest[p].hash != scan.hashes.get(p)
    }
    touched = set(scan.notes) | newly_skipped | set(removed)

    existing = await store.chunk_ids()
    old_ids = existing if full else await store.chunk_ids_for(touched)
    new_chunks = [c for rel in sorted(chunks_by_file) for c in chunks_by_file[rel]]
    new_ids = {c.id for c in new_chunks}
    to_add = [c for c in new_chunks if full or c.id not in existing]
    to_remove = sorted(old_ids - new_ids) if not full else sorted(old_ids)
    # Chunks SQLite keeps whose windows Chroma lost (a deleted Chroma folder): embed them again. The
    # draft is what an ingest goes on from: it may hold the windows of a killed ingest.
    stored_ids = await vectors.all_ids()
    lost = await store.chunks_missing_windows(stored_ids, exclude=set(to_remove) | {c.id for c in to_add})
    return Plan(settings, meta, collection, chunking, full, language, manifest, scan, chunks_by_file, removed,
                touched, to_add, to_remove, stored_ids, lost)


def _rules(note: Note) -> str:
    """Why a note's text is kept from players, in the words the summary shows."""
    if note.visibility == GM:
        return note.rule
    return "; ".join(dict.fromkeys(s.rule for s in note.secrets if s.rule))

"""Building one scale: the real ingest of the 1× notes or of their copies, kept in --work between runs."""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import bench_settings, ingest_phases
from bench.retrieval.corpus import corpus_digest, make_copies
from bench.retrieval.embedding import _embedder_class


@dataclass
class Built:
    scale: int
    notes_dir: str
    data_dir: str
    build_seconds: float
    reused: bool
    windows_embedded: int = 0
    windows_reused: int = 0
    windows_encoded: int = 0
    chunks: int = 0
    windows: int = 0
    chroma_windows: int = 0
    entities: int = 0
    mentions: int = 0
    sqlite_mb: float = 0.0
    chroma_mb: float = 0.0
    build_phases: dict[str, float] = field(default_factory=dict)


def dir_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20, 1) if path.exists() else 0.0


async def build_scale(scale: int, notes_src: Path, work: Path, embedder, source, reingest: bool, say) -> Built:
    from oracle.index.index import Index
    from oracle.index.ingest import ingest

    root = work / f"x{scale}"
    data_dir = root / "data"
    if scale == 1:
        notes_dir, origin = notes_src, {}
        digest = corpus_digest(notes_src)
    else:
        started = time.perf_counter()
        copies = await asyncio.to_thread(make_copies, notes_src, root / "notes", scale)
        notes_dir, origin, digest = copies.notes_dir, copies.origin, copies.digest
        say(f"{scale}×: wrote the synthetic notes in {time.perf_counter() - started:.1f} s")
    marker = data_dir / "build.json"
    previous = json.loads(marker.read_text()) if marker.exists() else {}
    settings = bench_settings(notes_dir, data_dir)
    reuse = previous.get("digest") == digest and not reingest
    if scale == 1:
        used = embedder
    else:
        used = _embedder_class()(embedder, source, origin)
    built = Built(scale, str(notes_dir), str(data_dir), previous.get("build_seconds", 0.0) if reuse else 0.0, reuse)
    if reuse:
        say(f"{scale}×: reusing the index in {data_dir} (built in {built.build_seconds:.0f} s)")
        built.build_phases = previous.get("build_phases", {})
        built.windows_embedded = previous.get("windows_embedded", 0)
        built.windows_reused = previous.get("windows_reused", 0)
        built.windows_encoded = previous.get("windows_encoded", 0)
    else:
        say(f"{scale}×: ingesting {notes_dir} into {data_dir} …")
        events: list[tuple[float, str, int, int]] = []
        last_print = [0.0]

        def progress(p) -> None:
            now = time.perf_counter()
            events.append((now, p.stage, p.done, p.total))
            if now - last_print[0] > 30 or p.stage in {"done"}:
                last_print[0] = now
                say(f"{scale}×:   {p.stage} {p.done}/{p.total} {p.detail or ''} ({now - started:.0f} s)")

        index = Index(settings, embedder=used)
        started = time.perf_counter()
        try:
            report = await ingest(index, progress=progress, by="bench.retrieval")
        finally:
            await index.close()
        built.build_seconds = time.perf_counter() - started
        built.windows_embedded = report.windows_embedded
        if scale == 1:
            built.windows_encoded = report.windows_embedded
        else:
            built.windows_reused, built.windows_encoded = used.reused, used.encoded
        built.build_phases = {k: round(v, 2) for k, v in ingest_phases(started, started + built.build_seconds, events).items()}
        say(f"{scale}×: built in {built.build_seconds:.1f} s ({report.chunks} chunks, "
            f"{report.windows_embedded} windows stored)")
        # Written only after a complete ingest: a killed build is redone (incrementally) next time.
        marker.write_text(json.dumps({
            "digest": digest, "build_seconds": built.build_seconds, "build_phases": built.build_phases,
            "windows_embedded": built.windows_embedded, "windows_reused": built.windows_reused,
            "windows_encoded": built.windows_encoded,
        }))
    return built

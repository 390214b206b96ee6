"""Retrieval latency benchmark: the Oracle's hybrid search against a tutorial baseline, at 1×, 10×, 100×.

    python -m bench.retrieval [--scales 1,10,100] [--queries N] [--repeat R] [--json] [--work DIR]

Everything runs in one process with one loaded embedding model (loaded and warmed up before any
timing). Annotations are off and OLLAMA_HOST points at a closed local port, so nothing waits.

Corpus
    The real CRD3 log of Critical Role campaign 1 (--notes, default EVAL_DIR/crd3/notes, bench/common.py:
    113 sessions, 169k words). 1× is that folder, indexed by the real `oracle.index.ingest.ingest`.
    10× and 100× are synthetic: a folder of N copies of the log, one file per copy
    (`campaign-log-000.md` … ), copy 0 unchanged and copy i ≥ 1 with every session header renumbered
    `Session N` → `Session N + i·S` (S = the log's highest session number, 115) and three lower-case
    words of every session swapped for other common words, so no two copies are byte-identical and
    every copy's sessions are new chunks. Session numbers have at most 4 digits (oracle/sessions.py
    `_NUM`), so 100 × 115 numbers cannot all be distinct: numbers past 9999 wrap to 1, 2, … (copies
    86–99 reuse labels of copies 0–13, in other files; chunk ids include the path, so every chunk is
    still distinct; only the citation labels repeat).

The embedding trick (10× and 100× are not re-encoded)
    Encoding 100 × ~2,200 windows on 2 cores would take hours. The enlarged indexes are built by the
    same real `ingest` (same SQLite FTS5 schema, same Chroma collection name, same window ids, same
    upsert batches), but with a `ReuseEmbedder`: an `Embedder` subclass sharing the loaded model whose
    `windows()` cuts the windows exactly as the real one does and, for each window, remembers the 1×
    vector of the window at the same position — same original session, same part, same window
    number n (clamped to the 1× window count) — and whose `encode()` then serves those vectors by
    window text. Positional, not by body text: renumbered headers change the label line's token count
    and so the token budget of every window of a chunk, so bodies rarely match byte for byte. Copies
    i ≥ 1 get the 1× vector plus deterministic Gaussian noise (σ = 0.01 per dimension, renormalised;
    cosine ≈ 0.98 to the original), so Chroma's HNSW graph is not built from exact duplicates.
    Anything without a 1× counterpart is encoded for real (the table's "windows encoded" row).

What is timed, per scale (p50 / p95 over queries × repeat, after 3 untimed warm-up questions)
    - query embedding alone: `embedder.encode_query` (ONNX Runtime unless ORACLE_QUERY_BACKEND=torch);
    - each path in isolation, called one after another: keyword, semantic (includes its own query
      embedding), entity (after the Compendium match), and RRF fusion of their results;
    - the same stages as `Oracle.search` reports them in `timings_ms` (the three paths there run
      concurrently, so each includes waiting for the others; then fusion, loading the chunks and the
      hop to the notes linked to the fused top k), and its `total` (query embedding
      included), and the wall time of the awaited `Oracle.search` call (which also covers opening
      the read snapshot);
    - the BASELINE of the tutorials: rank_bm25 `BM25Okapi` over the chunk texts tokenised as
      lower-case `\\w+` (built once, untimed), `get_scores` + argsort top 20; Chroma `query`
      (n_results=20, no filter) on the same collection with the same query embedding; RRF (k=60) of
      the two top-20 lists in Python, windows mapped to their chunks. Its total includes the query
      embedding the tutorials do (`SentenceTransformer.encode` on torch), like the Oracle's includes its own.
    - the learned fusion (ORACLE_FUSION=learned, the shipped model): a second `Oracle.search` of the
      same question over the same index, its `evidence` and `learned` stages (what it adds to the
      current fusion) and its total;
    - diagnostics: the semantic path's Chroma call as `VectorStore.query` makes it for a player
      (n = 8 × depth, the public collection) and for a game master (both collections); the entity path's
      `Store.count_chunks` and `Store.mention_counts` (the latter over questions that name an entity),
      read once per index generation (`MentionStats`), so these rows are what that cache saves.
    Targets: Oracle p50 at 1× ≤ 30 ms; Oracle p50 10× ÷ 1× ≤ 1.5; baseline p50 ÷ Oracle p50 at 100× ≥ 3;
    the learned fusion adds ≤ 3 ms p50 at every scale.

Indexes are kept in --work DIR (default: a temporary folder, removed at the end). With --work, a
re-run reuses each scale's index without ingesting again (its build time is read back from
`build.json`); --reingest runs the (incremental) real ingest over it anyway.

rank_bm25 is the baseline's library only; the project does not depend on it: `pip install rank_bm25`.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.common import (
    CRD3_NOTES,
    CRD3_QUESTIONS,
    bench_settings,
    console,
    contention,
    cpu_sample,
    ingest_phases,
    log,
    machine,
    offline,
    print_machine,
    read_questions,
    verdict,
)

GENERATOR_VERSION = "1"  # bump when the synthetic copies change
WARMUP = 3
BASELINE_TOP = 20
RRF_K = 60
NOISE_SIGMA = 0.01
TARGET_1X_MS = 30.0
TARGET_SCALING = 1.5
TARGET_SPEEDUP = 3.0
TARGET_LEARNED_MS = 3.0  # what ORACLE_FUSION=learned may add to a question, p50, at every scale
MAX_SESSION_NUMBER = 9999  # oracle/sessions.py reads at most 4 digits
SWAP_WORDS = ["quietly", "briefly", "again", "slowly", "together", "later", "soon", "openly", "finally"]


def others_share(before: tuple, after: tuple) -> float | None:
    """CPU other processes used meanwhile, as a share of all cores: noise in every number."""
    return contention(before, after)["other_processes_share"]


# ---------------------------------------------------------------------------------------------
# The synthetic corpus


@dataclass
class Copies:
    """The enlarged notes folder and, per file, the map from its session numbers to the original's."""

    notes_dir: Path
    origin: dict[str, dict[int, int]] = field(default_factory=dict)  # file -> {new number: original}
    digest: str = ""


def _session_number_span(line: str) -> tuple[int, int] | None:
    """Where the session number sits in a header line (None if the line is not a header)."""
    from oracle.notes.sessions import match_header

    header = match_header(line)
    if header is None:
        return None
    m = re.search(r"(?i)(?:session|sesi[oó]n|sess[aã]o|sessione|s[eé]ance|sitzung|sessie)\s*(?:#|n[o°º]\.?)?\s*(\d{1,4})", line)
    return (m.start(1), m.end(1)) if m else None


def make_copies(src_dir: Path, dst_dir: Path, n: int) -> Copies:
    """N copies of every Markdown file of `src_dir` (one file per copy); writes only what changed."""
    sources = sorted(p for p in src_dir.rglob("*.md") if not any(part.startswith(".") for part in p.relative_to(src_dir).parts))
    if not sources:
        raise SystemExit(f"no Markdown notes under {src_dir}")
    dst_dir.mkdir(parents=True, exist_ok=True)
    copies = Copies(dst_dir)
    wanted: set[str] = set()
    digest = hashlib.sha256(GENERATOR_VERSION.encode())
    for src in sources:
        lines = src.read_text(encoding="utf-8").split("\n")
        spans = [_session_number_span(line) for line in lines]
        numbers = [int(lines[i][s[0]:s[1]]) for i, s in enumerate(spans) if s]
        step = max(numbers, default=0)
        rel = src.relative_to(src_dir)
        for i in range(n):
            out_rel = rel.with_name(f"{rel.stem}-{i:03d}{rel.suffix}").as_posix()
            origin: dict[int, int] = {}
            out = list(lines)
            rng = random.Random(f"{out_rel}")
            session_lines: list[int] = []
            for k, s in enumerate(spans):
                if s is None:
                    if i and session_lines is not None:
                        session_lines.append(k)
                    continue
                if i:
                    _swap_words(out, session_lines, rng)
                session_lines = []
                original = int(lines[k][s[0]:s[1]])
                new = (original + i * step - 1) % MAX_SESSION_NUMBER + 1
                origin[new] = original
                out[k] = lines[k][: s[0]] + str(new) + lines[k][s[1]:]
            if i:
                _swap_words(out, session_lines, rng)
            text = "\n".join(out)
            path = dst_dir / out_rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
            copies.origin[out_rel] = origin
            wanted.add(out_rel)
            digest.update(out_rel.encode() + hashlib.sha256(text.encode()).digest())
    for stale in dst_dir.rglob("*.md"):  # a folder left by a run with other settings
        if stale.relative_to(dst_dir).as_posix() not in wanted:
            stale.unlink()
    copies.digest = digest.hexdigest()
    return copies


def _swap_words(lines: list[str], line_numbers: list[int], rng: random.Random, count: int = 3) -> None:
    """Swap `count` lower-case prose words of a session for other common words (same word count)."""
    candidates = [
        (k, m.start(), m.end())
        for k in line_numbers
        if lines[k].lstrip().startswith(("- ", "* ")) or (lines[k] and lines[k][0].isalpha())
        for m in re.finditer(r"(?<![\w'’-])[a-z]{5,}(?![\w'’-])", lines[k])
    ]
    for k, a, b in sorted(rng.sample(candidates, min(count, len(candidates))), key=lambda c: (c[0], -c[1])):
        lines[k] = lines[k][:a] + rng.choice(SWAP_WORDS) + lines[k][b:]


def corpus_digest(notes_dir: Path) -> str:
    digest = hashlib.sha256(GENERATOR_VERSION.encode())
    for p in sorted(notes_dir.rglob("*.md")):
        digest.update(p.relative_to(notes_dir).as_posix().encode() + hashlib.sha256(p.read_bytes()).digest())
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------
# The embedding trick


def _embedder_class():
    from oracle.index.embed import Embedder

    class ReuseEmbedder(Embedder):
        """Shares a loaded Embedder; serves each window the 1× vector of the window at the same place."""

        def __init__(self, base: Embedder, source: dict[tuple[str, str, int, str], list[np.ndarray]],
                     origin: dict[str, dict[int, int]]) -> None:  # noqa: D107 - no super(): the model is shared
            self.__dict__.update(base.__dict__)
            self._base = base
            self._source = source  # (original file stem, label, part, visibility) -> window vectors by n
            self._origin = origin  # file -> {session number: original number}
            self._by_text: dict[str, np.ndarray] = {}
            self.reused = 0
            self.encoded = 0

        def _key(self, chunk) -> tuple[str, str, int, str] | None:
            m = re.fullmatch(r"(.*)-(\d{3})\.md", Path(chunk.path).name)
            if not m:
                return None
            stem, copy = m.group(1), int(m.group(2))
            label = chunk.label
            if label.startswith("Session "):
                origin = self._origin.get(chunk.path, {})
                try:
                    label = f"Session {origin[int(label.split()[1])]}"
                except (KeyError, ValueError, IndexError):
                    return None
            elif label == f"Note: {stem}-{copy:03d}":
                label = f"Note: {stem}"
            return (stem, label, chunk.part, chunk.visibility)

        def windows(self, chunks, overlap_tokens: int = 32, size: int | None = None):
            out = super().windows(chunks, overlap_tokens, size)
            by_id = {c.id: c for c in chunks}
            for w in out:
                chunk = by_id[w.chunk_id]
                vectors = self._source.get(self._key(chunk) or ("",))
                if not vectors:
                    continue
                n = int(w.id.rsplit(":", 1)[1])
                vector = vectors[min(n, len(vectors) - 1)]
                if not chunk.path.endswith("-000.md"):  # copy 0 keeps the exact 1× vectors
                    rng = np.random.default_rng(zlib.crc32(w.id.encode()))
                    vector = vector + rng.normal(0.0, NOISE_SIGMA, vector.shape).astype(np.float32)
                    vector = (vector / np.linalg.norm(vector)).astype(np.float32)
                self._by_text[w.text] = vector
            return out

        def encode(self, texts, batch_size: int = 32) -> np.ndarray:
            found = [self._by_text.get(t) for t in texts]
            missing = [i for i, v in enumerate(found) if v is None]
            if missing:
                real = self._base.encode([texts[i] for i in missing], batch_size=batch_size)
                for i, v in zip(missing, real, strict=True):
                    found[i] = v
            self.reused += len(texts) - len(missing)
            self.encoded += len(missing)
            return np.stack(found).astype(np.float32) if found else np.zeros((0, self.dim), np.float32)

    return ReuseEmbedder


async def source_vectors(index) -> dict[tuple[str, str, int, str], list[np.ndarray]]:
    """The 1× windows' vectors, keyed by (file stem, label, part, visibility), ordered by window number."""
    store = await index.store()
    vectors = await index.vectors()
    ids, chunk_ids, matrix = await vectors.vectors()
    chunks = {c.id: c for c in await store.chunks_by_ids(sorted(set(chunk_ids)))}
    grouped: dict[tuple[str, str, int, str], list[tuple[int, np.ndarray]]] = {}
    for wid, cid, vec in zip(ids, chunk_ids, matrix, strict=True):
        c = chunks.get(cid)
        if c is None:
            continue
        grouped.setdefault((Path(c.path).stem, c.label, c.part, c.visibility), []).append((int(wid.rsplit(":", 1)[1]), vec))
    return {k: [v for _, v in sorted(pairs, key=lambda p: p[0])] for k, pairs in grouped.items()}


# ---------------------------------------------------------------------------------------------
# Building one scale


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


def _dir_mb(path: Path) -> float:
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


# ---------------------------------------------------------------------------------------------
# Measuring one scale


def _tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def rrf_lists(lists: list[list[str]], k: int = RRF_K) -> list[str]:
    scores: dict[str, float] = {}
    for ids in lists:
        for rank, doc in enumerate(ids, 1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=scores.__getitem__, reverse=True)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


# The table's rows in order, (key, label, group); a group is a section of the table.
ROWS = [(key, label, group) for key, group, label in (line.split(None, 2) for line in """
encode_query  oracle    query embedding alone (encode_query)
keyword       oracle    keyword path (isolated)
semantic      oracle    semantic path, incl. embedding (isolated)
entity        oracle    entity path (isolated)
fusion        oracle    fusion (isolated)
s_expand      search    search: expand + Compendium match
s_keyword     search    search: keyword (concurrent)
s_semantic    search    search: semantic (concurrent)
s_entity      search    search: entity (concurrent)
s_fusion      search    search: fusion
s_load        search    search: load chunks
s_linked      search    search: notes linked to the fused top k
wall          search    search: wall time, as awaited
total         total     ORACLE Oracle.search total (timings_ms)
l_evidence    learned   learned fusion: evidence (features of every candidate)
l_rank        learned   learned fusion: scoring and ordering
l_added       learned   learned fusion: added per question (evidence + scoring)
l_total       total     LEARNED Oracle.search total, ORACLE_FUSION=learned (timings_ms)
b_encode      baseline  baseline: query embedding (torch encode)
b_bm25        baseline  baseline: BM25Okapi get_scores + top 20
b_chroma      baseline  baseline: Chroma query n=20
b_rrf         baseline  baseline: RRF of the two lists
b_total       total     BASELINE total (incl. embedding)
d_vq_where    diag      diag: VectorStore.query n=128, public collection
d_vq_nowhere  diag      diag: the same over public + GM collections
d_count       diag      diag: Store.count_chunks
d_mentions    diag      diag: Store.mention_counts
""".strip().splitlines())]


async def measure_scale(built: Built, embedder, questions: list[str], repeat: int, say) -> dict:
    from rank_bm25 import BM25Okapi

    from oracle.index.index import Index
    from oracle.oracle import Oracle
    from oracle.retrieve import path_depth
    from oracle.retrieve.entity import entity_path
    from oracle.retrieve.keyword import keyword_path
    from oracle.retrieve.semantic import semantic_path
    from oracle.types import Clearance

    settings = bench_settings(Path(built.notes_dir), Path(built.data_dir))
    index = Index(settings, embedder=embedder)
    try:
        store = await index.store()
        vectors = await index.vectors()
        embeddings = await index.embedder()  # the async facade the paths take
        oracle = Oracle(index)
        # The learned fusion over the same index, timed in the same run (an Oracle reads its
        # settings when it is made).
        index.settings = settings.model_copy(update={"fusion": "learned"})
        learned = Oracle(index)
        index.settings = settings
        if learned.pipeline.ranker is None:
            raise SystemExit("bench.retrieval: the learned fusion's model could not be read")
        stats = (await store.stats(settings.model, "")).to_json()  # the game master's counts: every row
        built.chunks, built.windows, built.entities = stats["chunks"], stats["windows"], stats["entities"]
        built.chroma_windows = await vectors.count()
        built.mentions = await store.mention_count()
        built.sqlite_mb = round(sum(p.stat().st_size for p in Path(built.data_dir).glob("oracle.sqlite3*")) / 2**20, 1)
        built.chroma_mb = _dir_mb(settings.chroma_path)

        started = time.perf_counter()
        texts = await store.chunk_texts()  # in index order
        chunk_ids = [t.id for t in texts]
        bm25 = await asyncio.to_thread(lambda rows: BM25Okapi([_tokens(t.text) for t in rows]), texts)
        del texts
        bm25_build = time.perf_counter() - started
        say(f"{built.scale}×: baseline BM25Okapi over {len(chunk_ids)} chunks built in {bm25_build:.1f} s (untimed)")
        collection = vectors.in_thread.collections["public"]  # the tutorial baseline: one collection, no filter

        clearance = Clearance.PLAYER
        k = settings.k
        depth = path_depth(k)
        samples: dict[str, list[float]] = {key: [] for key, _, _ in ROWS}

        async def one(question: str, record: bool) -> None:
            qvec, t_encode = timed(lambda: embedder.encode_query(question))
            retrieval, t_search = await atimed(lambda: oracle.search(question, k=k))
            lt = (await learned.search(question, k=k)).timings_ms

            matcher, mention_stats = await oracle.matchers.lookup(clearance)
            entities = matcher.find(question)
            kw, t_kw = await atimed(lambda: keyword_path(store, question, clearance, depth,
                                                         (settings.fts_head_weight, 1.0)))
            sem, t_sem = await atimed(lambda: semantic_path(store, vectors, embeddings, question, clearance, depth))
            ent, t_ent = await atimed(lambda: entity_path(store, entities, clearance, depth, stats=mention_stats))
            _, t_fuse = timed(lambda: oracle.pipeline.fuse({"keyword": kw, "semantic": sem, "entity": ent}))

            def bm25_top() -> list[str]:
                scores = bm25.get_scores(_tokens(question))
                return [chunk_ids[i] for i in np.argsort(scores)[::-1][:BASELINE_TOP]]

            def dense_top() -> list[str]:
                found = collection.query(query_embeddings=[bvec], n_results=BASELINE_TOP,
                                         include=["metadatas", "distances"])
                return [m["chunk_id"] for m in found["metadatas"][0]]

            bvec, t_b_encode = timed(lambda: embedder.encode([question], batch_size=1)[0])  # the tutorials' torch encode
            bm25_ids, t_bm25 = timed(bm25_top)
            dense_ids, t_chroma = timed(dense_top)
            _, t_rrf = timed(lambda: rrf_lists([bm25_ids, list(dict.fromkeys(dense_ids))]))

            # Diagnostics: the pieces of the semantic and entity paths that grow with the corpus.
            _, t_vq_where = await atimed(lambda: vectors.query(qvec, depth * 8, visibility=clearance.visibilities[0]))
            _, t_vq_nowhere = await atimed(lambda: vectors.query(qvec, depth * 8))
            _, t_count = await atimed(lambda: store.count_chunks(clearance))
            t_mentions = None
            if entities:
                _, t_mentions = await atimed(lambda: store.mention_counts([e.entity_id for e in entities], clearance))

            if record:
                tm = retrieval.timings_ms
                for key, value in [
                    ("encode_query", t_encode), ("keyword", t_kw), ("semantic", t_sem), ("entity", t_ent),
                    ("fusion", t_fuse), ("s_expand", tm.get("expand")), ("s_keyword", tm.get("keyword")),
                    ("s_semantic", tm.get("semantic")), ("s_entity", tm.get("entity")),
                    ("s_fusion", tm.get("fusion")), ("s_load", tm.get("load")), ("s_linked", tm.get("linked")),
                    ("total", tm.get("total")),
                    ("l_evidence", lt["evidence"]), ("l_rank", lt["learned"]),
                    ("l_added", lt["evidence"] + lt["learned"]), ("l_total", lt["total"]),
                    ("wall", t_search),
                    ("b_encode", t_b_encode), ("b_bm25", t_bm25), ("b_chroma", t_chroma), ("b_rrf", t_rrf),
                    ("b_total", t_b_encode + t_bm25 + t_chroma + t_rrf),
                    ("d_vq_where", t_vq_where), ("d_vq_nowhere", t_vq_nowhere), ("d_count", t_count),
                    ("d_mentions", t_mentions),
                ]:
                    if value is not None:
                        samples[key].append(value)

        for q in (questions * WARMUP)[:WARMUP]:
            await one(q, record=False)
        before = cpu_sample()
        started = time.perf_counter()
        for _ in range(repeat):
            for q in questions:
                await one(q, record=True)
        seconds = time.perf_counter() - started
        busy = others_share(before, cpu_sample())
        say(f"{built.scale}×: {len(questions) * repeat} timed questions in {seconds:.1f} s"
            + (f" (other processes used {busy:.0%} of the cores meanwhile)" if busy is not None else ""))
        return {
            "samples": len(questions) * repeat,
            "others_cpu_share": busy,
            "bm25_build_seconds": round(bm25_build, 2),
            "p50": {key: round(pct(v, 0.5), 2) for key, v in samples.items() if v},
            "p95": {key: round(pct(v, 0.95), 2) for key, v in samples.items() if v},
            "mean": {key: round(statistics.fmean(v), 2) for key, v in samples.items() if v},
        }
    finally:
        await index.close()


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000


def timed(fn):
    """(fn(), its wall ms)."""
    started = time.perf_counter()
    return fn(), _ms(started)


async def atimed(fn):
    """(await fn(), its wall ms)."""
    started = time.perf_counter()
    return await fn(), _ms(started)


# ---------------------------------------------------------------------------------------------
# The run


async def run(args, say) -> dict:
    import torch

    import oracle.index.compendium  # noqa: F401
    import oracle.index.ingest  # noqa: F401
    import oracle.index.store  # noqa: F401
    import oracle.index.vectors  # noqa: F401

    # Every module the run uses, imported now: others may edit oracle/ while a long run builds, and
    # a module first imported an hour later could disagree with the ones already loaded.
    import oracle.oracle  # noqa: F401
    import oracle.retrieve.entity  # noqa: F401
    import oracle.retrieve.keyword  # noqa: F401
    import oracle.retrieve.linked  # noqa: F401
    import oracle.retrieve.semantic  # noqa: F401
    from oracle.index.embed import Embedder
    from oracle.index.index import Index
    from oracle.settings import BUNDLED_EMBED_MODEL

    work = args.work
    questions = read_questions(args.questions)[: args.queries or None]
    load_start = os.getloadavg()[0]

    started = time.perf_counter()
    embedder = await asyncio.to_thread(
        Embedder,
        os.environ.get("ORACLE_EMBED_MODEL", BUNDLED_EMBED_MODEL),
        query_backend=os.environ.get("ORACLE_QUERY_BACKEND", "onnx"),
    )
    load_seconds = time.perf_counter() - started
    embedder.encode(["warm-up: the first call pays for lazy initialisation"] * 4)
    await asyncio.to_thread(embedder.prepare_queries)
    worker_threads = await asyncio.to_thread(torch.get_num_threads)

    builds: dict[int, Built] = {}
    source = None
    for scale in args.scales:
        if scale != 1 and source is None:
            if 1 not in builds:  # the 1× index is the source of every enlarged one's vectors
                builds[1] = await build_scale(1, args.notes, work, embedder, None, args.reingest, say)
            one = Index(bench_settings(args.notes, work / "x1" / "data"), embedder=embedder)
            try:
                source = await source_vectors(one)
            finally:
                await one.close()
        if scale not in builds:
            builds[scale] = await build_scale(scale, args.notes, work, embedder, source, args.reingest, say)
    source = None

    results = {}
    for scale in args.scales:
        results[scale] = await measure_scale(builds[scale], embedder, questions, args.repeat, say)

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 2) if a and b else None

    p50 = {s: r["p50"] for s, r in results.items()}
    checks = []
    if 1 in p50:
        checks.append({"name": "Oracle p50 at 1×", "value": p50[1]["total"], "unit": "ms",
                       "target": f"≤ {TARGET_1X_MS:g} ms", "pass": p50[1]["total"] <= TARGET_1X_MS})
    if 1 in p50 and 10 in p50:
        v = ratio(p50[10]["total"], p50[1]["total"])
        checks.append({"name": "Oracle p50 10× ÷ 1×", "value": v, "unit": "×",
                       "target": f"≤ {TARGET_SCALING:g}", "pass": v is not None and v <= TARGET_SCALING})
    for scale in sorted(p50):
        added = p50[scale].get("l_added")
        checks.append({"name": f"learned fusion's added p50 at {scale}×", "value": added, "unit": "ms",
                       "target": f"≤ {TARGET_LEARNED_MS:g} ms", "pass": added is not None and added <= TARGET_LEARNED_MS})
    top = max(p50) if p50 else None
    if top is not None:
        v = ratio(p50[top]["b_total"], p50[top]["total"])
        checks.append({"name": f"baseline p50 ÷ Oracle p50 at {top}×", "value": v, "unit": "×",
                       "target": f"≥ {TARGET_SPEEDUP:g}" + ("" if top == 100 else " (target is for 100×)"),
                       "pass": v is not None and v >= TARGET_SPEEDUP})

    settings = bench_settings(args.notes, work / "x1" / "data")
    return {
        "machine": machine(worker_threads, load_start),
        "model": {"ref": embedder.ref, "fingerprint": embedder.fingerprint, "query_runtime": embedder.query_runtime,
                  "load_seconds": round(load_seconds, 2)},
        "settings": {"k": settings.k, "fusion": settings.fusion, "fused_pool": settings.fused_pool,
                     "window_tokens": settings.window_tokens, "session_max_words": settings.session_max_words},
        "questions": len(questions),
        "repeat": args.repeat,
        "work": str(work),
        "builds": {s: b.__dict__ for s, b in builds.items() if s in args.scales},
        "results": results,
        "checks": checks,
    }


# ---------------------------------------------------------------------------------------------
# Output


def print_table(r: dict) -> None:
    from rich.table import Table

    out = console(200)
    print_machine(out, r["machine"])
    s = r["settings"]
    out.print(
        f"Model {r['model']['ref']} ({r['model']['fingerprint']}; questions on "
        f"{r['model'].get('query_runtime', 'torch')}), loaded in {r['model']['load_seconds']} s (untimed). "
        f"k={s['k']}, fusion={s['fusion']}, fused pool {s['fused_pool']}, windows of {s['window_tokens']} tokens, "
        f"sessions split over {s['session_max_words']} words. {r['questions']} questions × {r['repeat']} "
        f"after {WARMUP} warm-ups. Index folder: {r['work']}"
    )
    scales = sorted(int(k) for k in r["results"])
    t = Table(title="Retrieval latency, ms: the Oracle vs the tutorial baseline (BM25Okapi + Chroma + RRF)")
    t.add_column("Measure", justify="left")
    for sc in scales:
        t.add_column(f"{sc}× p50", justify="right")
        t.add_column(f"{sc}× p95", justify="right")
    res = {sc: r["results"][sc] if sc in r["results"] else r["results"][str(sc)] for sc in scales}
    group = None
    for key, label, g in ROWS:
        if group is not None and g != group:
            t.add_section()
        group = g
        style = "bold" if g == "total" else ("dim" if g in {"search", "diag"} else "")
        cells = []
        for sc in scales:
            for q in ("p50", "p95"):
                v = res[sc][q].get(key)
                cells.append("" if v is None else f"{v:.1f}")
        t.add_row(label, *cells, style=style)
    t.add_section()
    b = {sc: r["builds"][sc] if sc in r["builds"] else r["builds"][str(sc)] for sc in scales}
    for label, fn in [
        ("chunks", lambda x, y: f"{x['chunks']:,}"),
        ("windows (SQLite / Chroma)", lambda x, y: f"{x['windows']:,} / {x['chroma_windows']:,}"),
        ("Compendium entities / mentions", lambda x, y: f"{x['entities']:,} / {x['mentions']:,}"),
        ("index build s", lambda x, y: f"{x['build_seconds']:.0f}" + (" (reused)" if x["reused"] else "")),
        ("windows encoded / reused from 1×", lambda x, y: f"{x['windows_encoded']:,} / {x['windows_reused']:,}"),
        ("SQLite / Chroma MB", lambda x, y: f"{x['sqlite_mb']:.0f} / {x['chroma_mb']:.0f}"),
        ("baseline BM25 build s (untimed)", lambda x, y: f"{y['bm25_build_seconds']:.1f}"),
        ("other processes' CPU share meanwhile",
         lambda x, y: "" if y["others_cpu_share"] is None else f"{y['others_cpu_share']:.0%}"),
    ]:
        cells = []
        for sc in scales:
            cells += [fn(b[sc], res[sc]), ""]
        t.add_row(label, *cells, style="dim")
    out.print(t)
    for sc in scales:
        ph = b[sc].get("build_phases") or {}
        if ph:
            out.print(f"[dim]{sc}× build phases (s): " + ", ".join(f"{k} {v:.1f}" for k, v in ph.items()) + "[/]")
    for c in r["checks"]:
        value = "n/a" if c["value"] is None else f"{c['value']:.2f} {c['unit']}"
        out.print(f"{c['name']}: {value} (target {c['target']}) {verdict(c['pass'])}")
    busy = [res[sc]["others_cpu_share"] for sc in scales if res[sc]["others_cpu_share"] is not None]
    if busy and max(busy) > 0.05:
        out.print(f"[red]Other processes used up to {max(busy):.0%} of the cores while measuring: "
                      "the numbers are noisy.[/]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="1,10,100", help="corpus sizes, comma-separated (default 1,10,100)")
    parser.add_argument("--queries", type=int, default=0, help="use only the first N questions (default: all)")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes over the questions (default 3)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for the indexes, kept between runs (default: a temporary folder, removed)")
    parser.add_argument("--notes", type=Path, default=CRD3_NOTES, help=f"the 1× notes (default {CRD3_NOTES})")
    parser.add_argument("--questions", type=Path, default=CRD3_QUESTIONS, help="one question a line")
    parser.add_argument("--reingest", action="store_true", help="run the incremental ingest even over a kept index")
    args = parser.parse_args(argv)
    try:
        args.scales = sorted({int(s) for s in args.scales.split(",") if s.strip()})
    except ValueError:
        parser.error("--scales takes whole numbers, e.g. 1,10,100")
    if not args.scales or min(args.scales) < 1 or max(args.scales) > 999:
        parser.error("--scales takes whole numbers from 1 to 999")
    if not args.notes.is_dir():
        parser.error(f"{args.notes} is not a folder (the CRD3 notes: --notes DIR)")
    if not read_questions(args.questions):
        parser.error(f"no questions in {args.questions}")
    try:
        import rank_bm25  # noqa: F401
    except ImportError:
        print("bench.retrieval: the baseline needs rank_bm25, which the Oracle itself does not depend on.\n"
              "Install it into this environment first:  pip install rank_bm25", file=sys.stderr)
        return 2

    offline()
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    args.notes = args.notes.resolve()
    temporary = args.work is None
    args.work = Path(tempfile.mkdtemp(prefix="oracle-retrieval-bench-")) if temporary else args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)

    try:
        result = asyncio.run(run(args, log))
    finally:
        if temporary:
            shutil.rmtree(args.work, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

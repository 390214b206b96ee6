"""Measuring one scale: each path, `Oracle.search`, the learned fusion, the baseline and the
diagnostics, timed per question; the table's rows."""
from __future__ import annotations

import asyncio
import re
import statistics
import time
from pathlib import Path

import numpy as np

from bench.common import bench_settings
from bench.machine import contention, cpu_sample
from bench.retrieval.scale import Built, dir_mb

WARMUP = 3
BASELINE_TOP = 20
RRF_K = 60


def others_share(before: tuple, after: tuple) -> float | None:
    """CPU other processes used meanwhile, as a share of all cores: noise in every number."""
    return contention(before, after)["other_processes_share"]


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
    from oracle.retrieve.semantic import semantic_windows
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
        built.chroma_mb = dir_mb(settings.chroma_path)

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
            windows, t_sem = await atimed(lambda: semantic_windows(store, vectors, embeddings, question, clearance, depth))
            sem = [(cid, sims[0]) for cid, sims in windows]
            ent, t_ent = await atimed(lambda: entity_path(store, entities, clearance, depth, stats=mention_stats))
            # Which of them tell a session: read with the chunks in the search, untimed here.
            found = list({cid for hits in (kw, sem, ent) for cid, _ in hits})
            tells = {c.id for c in await store.chunks_by_ids(found) if c.kind == "session"}
            _, t_fuse = timed(lambda: oracle.pipeline.fuse({"keyword": kw, "semantic": sem, "entity": ent}, tells))

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

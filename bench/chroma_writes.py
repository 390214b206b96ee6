"""Chroma writes and the interpreter lock: how long the event loop would wait, side by side.

    python -m bench.chroma_writes [--windows 2862,12800]

Chroma's embedded Rust core holds the interpreter lock for a whole write. This measures, for a
collection built the way an ingest builds it (16 windows a write), the worst hold of a build's writes,
and then the bot's weekly cycle: questions read the collection, then a reingest writes five windows.
Two configurations in one run: Chroma's default (its HNSW index saved every 1,000 windows) and the
Oracle's (saved after every write, `oracle/index/vectors.py`). A thread that sleeps 1 ms and notes how
late it wakes measures the lock: a thread waiting for it is the event loop.
"""
from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from bench.printing import console
from oracle.index import vectors as vectors_mod
from oracle.index.vectors import VectorStore

DIM = 384  # all-MiniLM-L6-v2


class LockWait:
    """The worst lateness of a thread sleeping 1 ms at a time, between `start()` and `stop()`."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._on = threading.Event()
        self._quit = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._quit:
            t = time.perf_counter()
            time.sleep(0.001)
            if self._on.is_set():
                self.worst = max(self.worst, time.perf_counter() - t - 0.001)

    def measure(self, fn) -> tuple[float, float]:
        """(seconds fn took, worst lock wait in ms meanwhile)."""
        self.worst = 0.0
        self._on.set()
        started = time.perf_counter()
        fn()
        took = time.perf_counter() - started
        time.sleep(0.005)
        self._on.clear()
        return took, self.worst * 1000

    def close(self) -> None:
        self._quit = True
        self._thread.join()


def rows(rng, n: int, start: int) -> tuple[list[str], np.ndarray, list[dict]]:
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    ids = [f"c{start + i}#0" for i in range(n)]
    return ids, vectors, [{"chunk_id": f"c{start + i}", "visibility": "public"} for i in range(n)]


def run(windows: int, saving: str, folder: Path, lock: LockWait) -> dict:
    rng = np.random.default_rng(0)
    saved = vectors_mod._HNSW
    if saving == "Chroma's default":
        vectors_mod._HNSW = {"sync_threshold": 1000, "batch_size": 100}  # what Chroma does unasked
    try:
        store = VectorStore(folder, "bench")
    finally:
        vectors_mod._HNSW = saved
    holds = []
    for start in range(0, windows, vectors_mod._WRITE_BATCH):
        ids, vecs, metas = rows(rng, min(vectors_mod._WRITE_BATCH, windows - start), start)
        holds.append(lock.measure(functools.partial(store.upsert, ids, vecs, metas))[1])
    questions_s, _ = lock.measure(lambda: [store.query(rng.standard_normal(DIM).astype(np.float32), 10) for _ in range(5)])
    ids, vecs, metas = rows(rng, 5, windows)
    write_s, write_wait = lock.measure(lambda: store.upsert(ids, vecs, metas))
    store.client.close()
    return {
        "windows": windows,
        "saving": saving,
        "build_wait_p99": float(np.percentile(holds, 99)),
        "build_wait_max": max(holds),
        "questions_ms": questions_s * 1000,
        "reingest_write_ms": write_s * 1000,
        "reingest_write_wait": write_wait,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chroma_writes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", default="2862,12800", help="collection sizes (CRD3's log is 2,862 windows)")
    args = parser.parse_args(argv)
    from rich.table import Table

    lock = LockWait()
    results = []
    with tempfile.TemporaryDirectory(prefix="oracle-chroma-writes-") as tmp:
        for windows in (int(w) for w in args.windows.split(",")):
            for saving in ("Chroma's default", "after every write"):
                results.append(run(windows, saving, Path(tmp) / f"{windows}-{len(results)}", lock))
    lock.close()
    table = Table(title="Chroma writes: the longest the interpreter lock was held (the event loop waits as long)")
    for name in ("windows", "HNSW index saved", "build: lock wait p99 / max, ms", "5 questions, ms",
                 "then a reingest's write of 5 windows: ms / lock wait, ms"):
        table.add_column(name, justify="right")
    for r in results:
        table.add_row(f"{r['windows']:,}", r["saving"], f"{r['build_wait_p99']:.1f} / {r['build_wait_max']:.1f}",
                      f"{r['questions_ms']:.0f}", f"{r['reingest_write_ms']:.0f} / {r['reingest_write_wait']:.0f}")
    console(150).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

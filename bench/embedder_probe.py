"""One measurement of one model, in a fresh process as the Oracle runs it: the bot's first start,
the bot restarted answering questions, the embedding worker embedding windows (bench/embedders.py)."""
from __future__ import annotations

import json
import logging
import shutil
import statistics
import sys
import time
from pathlib import Path

from bench.common import DATA_DIR, EVAL_DIR, log, read_questions
from bench.embedder_shapes import Model, build, by_name, vault_notes, weights_bytes

WINDOW_TOKENS = 128  # ORACLE_WINDOW_TOKENS' default
OVERLAP_TOKENS = 32  # ORACLE_WINDOW_OVERLAP_TOKENS' default
RUNS = 3
WARM_QUESTIONS = 5


def note_chunks(min_chars: int = 2000):
    """Per vault, one `Chunk` per note long enough to give full windows."""
    from oracle.types import Chunk

    out = []
    for vault, paths in vault_notes():
        chunks = []
        for path in paths:
            text = path.read_text(encoding="utf-8", errors="replace").strip()
            if len(text) < min_chars:
                continue
            rel = path.relative_to(EVAL_DIR / "vaults" / vault / "notes").as_posix()
            chunks.append(Chunk(id=f"{vault}/{rel}", path=rel, label=f"Note: {path.stem}", kind="note", part=1,
                                parts=1, heading="", start_line=1, end_line=text.count("\n") + 1, text=text,
                                text_hash=""))
        out.append(chunks)
    return out


def bank_questions() -> list[str]:
    """The vault banks' questions, taken in turn from each bank (every language early on)."""
    banks = [read_questions(p) for p in sorted((DATA_DIR / "vaults").glob("*.dev.jsonl"))]
    out = []
    for i in range(max(map(len, banks), default=0)):
        out += [bank[i] for bank in banks if i < len(bank)]
    if not out:
        raise SystemExit(f"no questions in {DATA_DIR / 'vaults'}")
    return out


# ---------------------------------------------------------------------------------------------
# In a measuring process


def memory() -> dict[str, float]:
    """This process's resident set now and at its peak, MB: psutil's when installed, else the kernel's
    /proc/self/status (VmRSS, VmHWM)."""
    import resource

    status = _status_mb()
    try:
        import psutil  # optional: not a dependency of the Oracle

        rss = psutil.Process().memory_info().rss / 1e6
    except ImportError:
        rss = status.get("VmRSS", 0.0)
    peak = status.get("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6  # kB on Linux
    return {"rss": rss, "peak": max(peak, rss)}


def _status_mb() -> dict[str, float]:
    out = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024 / 1e6  # kB
    except (OSError, ValueError):
        pass
    return out


def import_everything() -> None:
    """What the Oracle has imported before it loads a model: so memory grown after is the model's."""
    import onnxruntime  # noqa: F401
    import sentence_transformers  # noqa: F401
    import torch  # noqa: F401

    import oracle.index.embed  # noqa: F401
    import oracle.index.query_encoder  # noqa: F401


def model_ref(model: Model, work: Path) -> str:
    from oracle.settings import BUNDLED_EMBED_MODEL

    return BUNDLED_EMBED_MODEL if model.arch == "bundled" else str(work / "models" / model.name)


class Refusals(logging.Handler):
    """Why the Oracle put questions on torch: its warning, kept."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def measure_start(model: Model, work: Path) -> dict:
    """The bot's first start with this model: load it and make the question encoder, exporting the
    ONNX graph into an empty cache (the Oracle's `models` folder)."""
    from oracle.index.embed import Embedder

    cache = work / "cache" / model.name
    shutil.rmtree(cache, ignore_errors=True)
    refusals = Refusals()
    logging.getLogger("oracle.index.embed").addHandler(refusals)
    before = memory()
    t = time.perf_counter()
    embedder = Embedder(model_ref(model, work), query_backend="onnx", cache_dir=cache)
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    embedder.prepare_queries()
    prepare_s = time.perf_counter() - t
    after = memory()
    return {
        "source": embedder.source,
        "params": sum(p.numel() for p in embedder.model.parameters()),
        "dim": embedder.dim,
        "max_tokens": embedder.max_tokens,
        "prompts": [embedder.prompts.query, embedder.prompts.passage],
        "fingerprint": embedder.fingerprint,
        "weights_bytes": weights_bytes(Path(embedder.source)),
        "load_s": load_s,
        "query_encoder_s": prepare_s,
        "query_runtime": embedder.query_runtime,
        "torch_reason": "; ".join(refusals.messages),
        "onnx_bytes": sum(p.stat().st_size for p in cache.glob("*.onnx")),
        "rss_after_mb": after["rss"] - before["rss"],
        "peak_mb": after["peak"] - before["rss"],
    }


def measure_questions(model: Model, work: Path, count: int) -> dict:
    """The bot's process as it runs for weeks (a restart: the ONNX graph read from the cache the first
    start wrote): load, question encoder, then `count` questions one at a time after a warm-up."""
    import torch

    from oracle.index.embed import Embedder

    questions = bank_questions()
    before = memory()
    t = time.perf_counter()
    embedder = Embedder(model_ref(model, work), query_backend="onnx", cache_dir=work / "cache" / model.name)
    load_s = time.perf_counter() - t
    loaded = memory()
    t = time.perf_counter()
    embedder.prepare_queries()
    prepare_s = time.perf_counter() - t
    for q in questions[:WARM_QUESTIONS]:
        embedder.encode_query(q)
    times = []
    for i in range(count):
        q = questions[i % len(questions)]
        t = time.perf_counter()
        embedder.encode_query(q)
        times.append((time.perf_counter() - t) * 1000)
    after = memory()
    return {
        "torch_threads": torch.get_num_threads(),
        "load_s": load_s,
        "query_encoder_s": prepare_s,
        "query_runtime": embedder.query_runtime,
        "question_ms": statistics.median(times),
        "question_ms_p90": sorted(times)[int(0.9 * (len(times) - 1))],
        "questions": count,
        "rss_base_mb": before["rss"],
        "rss_loaded_mb": loaded["rss"] - before["rss"],
        "rss_after_mb": after["rss"] - before["rss"],
        "peak_mb": after["peak"] - before["rss"],
    }


def full_windows(embedder, count: int) -> list[str]:
    """`count` windows of the vaults' notes, cut as an ingest cuts them, of nearly the full size, taken
    in turn from each vault."""
    per_vault = []
    for chunks in note_chunks():
        windows = embedder.windows(chunks, OVERLAP_TOKENS, WINDOW_TOKENS)
        texts = [w.text for w in windows]
        sizes = [embedder.token_count(embedder.prompts.passage + t) for t in texts]
        per_vault.append([t for t, n in zip(texts, sizes, strict=True) if n >= 0.85 * min(WINDOW_TOKENS, embedder.max_tokens)])
    out: list[str] = []
    for i in range(max(map(len, per_vault), default=0)):
        out += [texts[i] for texts in per_vault if i < len(texts)]
    if len(out) < count:
        log(f"only {len(out)} full windows in the vaults, not {count}")
    return out[:count]


def measure_windows(model: Model, work: Path, count: int, threads: int | None) -> dict:
    """The embedding worker: load with its thread count, cut windows, embed them `RUNS` times."""
    import torch

    from oracle.index.embed import Embedder
    from oracle.index.worker import worker_threads

    torch.set_num_threads(threads or worker_threads())
    before = memory()
    embedder = Embedder(model_ref(model, work), query_backend="onnx", cache_dir=work / "cache" / model.name)
    loaded = memory()
    t = time.perf_counter()
    texts = full_windows(embedder, count)
    cut_s = time.perf_counter() - t
    tokens = [embedder.token_count(embedder.prompts.passage + text) for text in texts]
    embedder.encode(texts[:32])  # warm-up
    runs = []
    for _ in range(RUNS):
        t = time.perf_counter()
        embedder.encode(texts)
        runs.append(time.perf_counter() - t)
    after = memory()
    return {
        "torch_threads": torch.get_num_threads(),
        "windows": len(texts),
        "tokens_mean": statistics.fmean(tokens) if tokens else 0.0,
        "cut_s": cut_s,
        "runs_s": runs,
        "windows_per_s": len(texts) / statistics.median(runs) if texts else 0.0,
        "rss_loaded_mb": loaded["rss"] - before["rss"],
        "peak_mb": after["peak"] - before["rss"],
    }


def child(kind: str, name: str, work: Path, out: Path, count: int, threads: int | None) -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    model = by_name(name)
    if kind == "build":
        build(model, work / "models" / model.name)
        return
    import_everything()
    if kind == "start":
        got = measure_start(model, work)
    elif kind == "questions":
        got = measure_questions(model, work, count)
    else:
        got = measure_windows(model, work, count, threads)
    out.write_text(json.dumps(got), encoding="utf-8")

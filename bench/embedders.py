"""What each multilingual embedding model would cost the Oracle on this machine, beside the bundled one.

    python -m bench.embedders [--models a,b] [--windows N] [--questions N] [--threads N] [--work DIR]
                              [--json | --markdown] [--save FILE] [--show FILE]

Why
    The bundled all-MiniLM-L6-v2 was trained on English. A game master whose notes are in Polish,
    Spanish or Portuguese sets ORACLE_EMBED_MODEL to a multilingual model instead, and every one of
    those is larger: a vocabulary of 250,000 word pieces instead of 30,000, twice the layers or more.
    This says what that costs here, before anyone downloads gigabytes to find out: the memory of the
    bot, the disk, how long a campaign takes to embed, how long a question waits for its vector.

What runs
    No weights can be downloaded here, so each candidate is built with its real shape (architecture,
    layers, hidden size, feed-forward size, heads, positions, vocabulary, pooling, limit, Normalize:
    `MODELS`, checked against each model's config.json) and random weights (`torch.manual_seed(0)`),
    and saved as a sentence-transformers folder in WORK/models (kept while its shape is the same).
    Time and memory depend on the shape, not on the values of the weights: they are the real models'.
    What the vectors are worth (retrieval quality) is NOT measured here. The tokenizer is a WordPiece
    trained on the shared vaults' notes: windows are cut to a fixed number of tokens whatever the
    tokenizer, so the work per window is the real model's. The embedding matrix has the real
    vocabulary's rows (most of a small model's memory and disk), and the tokenizer's ids are spread
    over all of them, as a real multilingual vocabulary spreads a vault's word pieces.
    The baseline is the real bundled model, loaded as the Oracle loads it (`Embedder()`).

    Each model is measured in three fresh processes, as the Oracle runs it. By default the bot loads
    the model in its own process, for questions, and again in the embedding worker, for windows:
    - the bot's first start: `Embedder(path, query_backend="onnx", cache_dir=...)` and its question
      encoder, exported to ONNX into the empty cache (seconds and peak memory; the graph's size), or
      left on torch where the export is refused or fails (`query_runtime`; the Oracle's reason);
    - the bot restarted (the graph read from that cache, as every later start): the memory grown once
      the model is loaded and once N questions ran, and the median of N `encode_query` calls after a
      warm-up, on the vault banks' questions (bench/data/vaults), with torch's default threads;
    - the embedding worker: the same Embedder with the worker's torch threads (every core but one,
      `oracle.index.worker.worker_threads`; `--threads` to change), which cuts the shared vaults'
      notes into windows of ORACLE_WINDOW_TOKENS (128) with its own `windows(chunks, 32, 128)` and
      embeds N nearly full windows with `encode` three times after a warm-up: the median run gives
      windows per second. bge-m3 gets 64 windows, not 256: it is slow enough that 256 would take
      most of the run.
    Memory is the resident set (VmRSS, VmHWM of /proc/self/status; psutil's when installed) grown
    since torch, sentence-transformers, ONNX Runtime and the Oracle were imported. The weights are
    mapped from the safetensors file and read in as they are used, so a model just loaded holds
    little; the ONNX question encoder holds a full copy of its own. MB are 10^6 bytes.

The table
    One row per model, the baseline first: parameters, vector size, weights on disk (the fp32
    safetensors of the folder), memory (loaded, the bot's process, the worker's peak), windows per
    second, the time to embed a campaign of 10,000 windows (about 100 sessions) at that rate, and a
    question's median milliseconds and where it ran. A second table gives the start-up costs and why
    a model's questions stay on torch. These are timings: a busy machine slows them (the share of the
    machine other processes took is printed). `--json` prints everything instead, `--markdown` the
    tables for a document; `--save FILE` writes the JSON after every model (without it,
    WORK/last-run.json); `--show FILE` prints a saved run and measures nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from bench.common import REPO, log, python_env
from bench.embedder_probe import RUNS, WINDOW_TOKENS, child
from bench.embedder_shapes import DEFAULT_MODELS, Model, built, pick_models
from bench.machine import contention, cpu_model, cpu_sample
from bench.printing import console, markdown_table, new_table

DEFAULT_WORK = Path("/tmp/oracle-embedders")
CAMPAIGN_WINDOWS = 10_000  # about a hundred sessions of notes


# ---------------------------------------------------------------------------------------------
# The run


def run_child(kind: str, model: Model, work: Path, count: int, threads: int | None) -> dict | None:
    """A fresh process of `kind` for `model`: its result, or None (the reason is logged)."""
    out = work / "results" / f"{model.name}.{kind}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    log_file = work / "logs" / f"{model.name}.{kind}.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    args = [sys.executable, "-m", "bench.embedders", "--child", kind, "--child-model", model.name,
            "--work", str(work), "--child-out", str(out), "--child-count", str(count)]
    if threads:
        args += ["--threads", str(threads)]
    with log_file.open("w", encoding="utf-8") as err:
        done = subprocess.run(args, cwd=REPO, env=python_env(HF_HUB_OFFLINE="1"), stdout=err, stderr=err, check=False)
    if done.returncode:
        tail = log_file.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
        log(f"{model.name}: the {kind} process failed ({done.returncode}), see {log_file}: {' | '.join(tail)}")
        return None
    return json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}


def cpu_with_children() -> tuple[float, float, float, float]:
    """`cpu_sample`, this process's CPU counting its finished children's: they do the work here."""
    wall, busy, steal, _ = cpu_sample()
    return wall, busy, steal, sum(os.times()[:4])


def measure_model(model: Model, work: Path, windows: int | None, questions: int, threads: int | None) -> dict:
    row: dict = {"model": asdict(model), "build_s": None}
    before = cpu_with_children()
    if model.arch != "bundled":
        folder = work / "models" / model.name
        if built(model, folder):
            log(f"{model.name}: reusing {folder}")
        else:
            log(f"{model.name}: building {model.layers} layers × {model.hidden}, vocabulary {model.vocab:,}")
            t = time.perf_counter()
            if run_child("build", model, work, 0, None) is None:
                return row | {"failed": "build"}
            row["build_s"] = time.perf_counter() - t
    log(f"{model.name}: the bot's first start (load, question encoder exported)")
    row["start"] = run_child("start", model, work, 0, None)
    log(f"{model.name}: the bot's process restarted ({questions} questions)")
    row["questions"] = run_child("questions", model, work, questions, None)
    count = windows or model.windows
    log(f"{model.name}: the embedding worker ({count} windows × {RUNS})")
    row["windows"] = run_child("windows", model, work, count, threads)
    row["contention"] = contention(before, cpu_with_children())
    row["failed"] = None if row["start"] and row["questions"] and row["windows"] else "measure"
    return row


def machine_info() -> dict:
    import onnxruntime
    import torch

    from oracle.index.worker import worker_threads
    from oracle.offload import usable_cores

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable_cores(),
        "torch_threads": torch.get_num_threads(),
        "worker_threads": worker_threads(),
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "load_average_at_start": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def measure(models: list[Model], work: Path, windows: int | None, questions: int, threads: int | None,
            save: Path) -> dict:
    result = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine_info(), "threads": threads,
              "window_tokens": WINDOW_TOKENS, "campaign_windows": CAMPAIGN_WINDOWS, "models": []}
    before = cpu_with_children()
    started = time.perf_counter()
    for model in models:
        result["models"].append(measure_model(model, work, windows, questions, threads))
        result["seconds"] = time.perf_counter() - started
        result["machine"].update(contention(before, cpu_with_children()))
        save.parent.mkdir(parents=True, exist_ok=True)
        save.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    return result


# ---------------------------------------------------------------------------------------------
# Printing


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


COLUMNS = (("model", "left"), ("params (M)", "right"), ("vector", "right"), ("weights MB", "right"),
           ("RAM loaded MB", "right"), ("RAM bot MB", "right"), ("RAM worker MB", "right"),
           ("windows/s", "right"), ("10k windows", "right"), ("question ms", "right"), ("questions on", "left"))
START_COLUMNS = (("model", "left"), ("reads (tokens)", "right"), ("prompts (query / passage)", "left"),
                 ("first start s", "right"), ("first start peak MB", "right"), ("ONNX MB", "right"),
                 ("restart s", "right"), ("tokens/window", "right"), ("question p90 ms", "right"),
                 ("why torch", "left"))
_TORCH_PREFIX = "questions are embedded with torch (slower): "


def cost_row(row: dict) -> list[str]:
    name = row["model"]["name"]
    s, q, w = row.get("start"), row.get("questions"), row.get("windows")
    if not s or not q or not w:
        return [name, "failed", *([""] * (len(COLUMNS) - 2))]
    wps = w["windows_per_s"]
    cut = f" ({w['windows']} windows)" if w["windows"] != 256 else ""
    return [
        name,
        f"{s['params'] / 1e6:.0f}",
        str(s["dim"]),
        f"{s['weights_bytes'] / 1e6:,.0f}",
        f"{q['rss_loaded_mb']:,.0f}",
        f"{q['rss_after_mb']:,.0f}",
        f"{w['peak_mb']:,.0f}",
        f"{wps:.1f}{cut}",
        duration(CAMPAIGN_WINDOWS / wps) if wps else "—",
        f"{q['question_ms']:.0f}",
        q["query_runtime"],
    ]


def start_row(row: dict) -> list[str]:
    s, q, w = row.get("start") or {}, row.get("questions") or {}, row.get("windows") or {}
    prompts = s.get("prompts") or ["", ""]
    return [
        row["model"]["name"],
        str(s.get("max_tokens", "—")),
        " / ".join(repr(p) for p in prompts) if any(prompts) else "—",
        f"{s['load_s'] + s['query_encoder_s']:.1f}" if s else "—",
        f"{s['peak_mb']:,.0f}" if s else "—",
        f"{s['onnx_bytes'] / 1e6:,.0f}" if s.get("onnx_bytes") else "—",
        f"{q['load_s'] + q['query_encoder_s']:.1f}" if q else "—",
        f"{w['tokens_mean']:.0f}" if w else "—",
        f"{q['question_ms_p90']:.0f}" if q else "—",
        (s.get("torch_reason") or "").replace(_TORCH_PREFIX, ""),
    ]


def machine_text(r: dict) -> str:
    m = r["machine"]
    threads = r.get("threads") or m["worker_threads"]
    busy = m.get("other_processes_share")
    return (f"Machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable); torch {m['torch']} "
            f"({m['torch_threads']} threads: questions; {threads} for windows, as the embedding worker), "
            f"ONNX Runtime {m['onnxruntime']}; load {m['load_average_at_start']} at start"
            + (f"; other processes took {busy:.1%} of all cores meanwhile" if busy is not None else ""))


def print_table(r: dict) -> None:
    out = console(190)
    out.print(machine_text(r))
    busy = r["machine"].get("other_processes_share")
    if busy is not None and busy > 0.05:
        out.print("[red]The machine was busy: the timings are slower than they would be.[/]")
    table = new_table(f"What each model costs the Oracle here (random weights, real shapes; windows of "
                      f"{r['window_tokens']} tokens)", list(COLUMNS))
    starts = new_table("Start-up, and where questions run", list(START_COLUMNS))
    for row in r["models"]:
        table.add_row(*cost_row(row))
        starts.add_row(*start_row(row))
    table.caption = ("RAM: grown since the imports. Loaded: right after the model is loaded (its weights are "
                     "mapped from disk, read in as they are used); bot: once its questions ran; worker: the "
                     "embedding worker's peak while it embedded windows. The Oracle runs both processes. "
                     f"10k windows: {r['campaign_windows']:,} / windows per second (about 100 sessions).")
    out.print(table)
    out.print(starts)


def print_markdown(r: dict) -> None:
    print(machine_text(r))
    print()
    print(markdown_table([c for c, _ in COLUMNS], [cost_row(row) for row in r["models"]], left=1))
    print()
    print(markdown_table([c for c, _ in START_COLUMNS], [start_row(row) for row in r["models"]], left=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.embedders", description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help=f"models to run, comma-separated (default: {', '.join(DEFAULT_MODELS)}; "
                                         "also: multilingual-e5-large)")
    parser.add_argument("--windows", type=int, help="windows embedded per run (default 256, 64 for the largest)")
    parser.add_argument("--questions", type=int, default=50, help="questions timed (default 50)")
    parser.add_argument("--threads", type=int, help="torch threads for windows (default: the embedding worker's)")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK,
                        help=f"the built models, the logs and the last run (default {DEFAULT_WORK})")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    parser.add_argument("--save", type=Path, help="also write the JSON here (default WORK/last-run.json)")
    parser.add_argument("--show", type=Path, help="print the tables of a saved run; measure nothing")
    for hidden in ("--child", "--child-model", "--child-out"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    parser.add_argument("--child-count", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    work = args.work.resolve()
    if args.child:
        child(args.child, args.child_model, work, Path(args.child_out), args.child_count, args.threads)
        return 0
    if args.show:
        result = json.loads(args.show.read_text(encoding="utf-8"))
    else:
        models = pick_models(args.models)
        work.mkdir(parents=True, exist_ok=True)
        log(f"{len(models)} models: {', '.join(m.name for m in models)}; work folder {work}")
        result = measure(models, work, args.windows, args.questions, args.threads, args.save or work / "last-run.json")
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    elif args.markdown:
        print_markdown(result)
    else:
        print_table(result)
    return 1 if any(row.get("failed") for row in result["models"]) else 0


if __name__ == "__main__":
    sys.exit(main())

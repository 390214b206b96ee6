"""Train the learned fusion (oracle/retrieve/learned.py) on the dev banks, reproducibly.

    python -m tools.train_fusion [--out oracle/retrieve/fusion_model.json] [--seed 0]
        [--cache var/fusion-train] [--eval-root EVAL_DIR] [--loco] [--vaults]

It writes oracle/retrieve/fusion_model.json, which the package ships. --eval-root defaults to the
shared evaluation data, `EVAL_DIR` of bench/common.py ($ORACLE_EVAL_DIR, else ../shared/eval beside
the checkout, else /work/shared/eval).

Dev banks only (the shared eval README's splits): LoCoMo conv-26, -30, -41, -42, -43; SciFact train;
the CRD3 dev bank (bench/data/crd3_dev.jsonl); the sample campaign's bank (notes/questions.jsonl); with
--vaults, the real vaults' dev banks (bench/data/vaults), each vault a corpus of its own. Test
splits are never read here.

1. Collect. Each bank's notes are indexed where `oracle eval` keeps them (var/eval/<folder>-<hash>,
   built by the real ingest if missing), and every question is searched by the real
   `Oracle.search` with ORACLE_FUSION=learned, which records every candidate's features
   (`Retrieval.evidence`) whether or not a model is there: the features never depend on the model.
   A candidate is relevant when a gold entry names it (`oracle.eval.matches`). The rows are cached
   per bank in --cache (a JSON file keyed by the bank's and the code's content), so retraining is quick.
2. Train. A pairwise logistic model (RankSVM's pairs, Joachims 2002, with a logistic loss): for
   each question, every relevant candidate against the irrelevant ones the current fusion puts in
   its top 20 (where a better order changes what a player reads), as feature differences,
   both signs. Features standardised; each corpus weighs the same in total, each question the
   same within its corpus, so 809 SciFact claims do not drown 52 campaign questions. The model
   weighs the current fusion's score unshrunk and, with a strong L2 (C = 0.01), only the evidence
   the current fusion does not use (`USED`): it corrects that order rather than replacing it.
   scikit-learn fits it; the model is written as JSON coefficients.
3. Report. Dev scores of the current fusion and the learned one per corpus, on the units `oracle
   eval` counts (a session's parts count once): any gold in the top 5 / 10, all gold in the top 10
   for multi-session (`arc`) questions, nDCG@10, recall@8, MRR. With --loco, the
   leave-one-corpus-out table: trained on every other corpus, scored on the one left out.

Same collected rows, same seed: the same JSON, byte for byte. Searching the banks again over the same
indexes gives the same rows, except where Chroma's approximate search returns another set of windows
(seen: the window count of a few candidates in a few questions).
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.common import DATA_DIR, EVAL_DIR, REPO, SAMPLE_NOTES
from oracle.eval_bank import hit, load_bank, matches, mrr, ndcg, recall
from oracle.retrieve.evidence import FEATURES
from oracle.retrieve.learned import FORMAT, VERSION

LOCOMO_DEV = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
NEGATIVES_FROM_TOP = 20
C = 0.01
# The features the model weighs: the current fusion's verdict and the evidence it does not already
# use. The paths' own ranks and scores stay inside the current fusion's score: weighed anew, they
# re-balanced the paths for the corpora the model saw and lost on the one left out (the
# leave-one-corpus-out table in README), while these transferred.
PATH_SIGNALS = tuple(f"{p}_{w}" for p in ("keyword", "semantic", "entity") for w in ("found", "rr", "lr", "norm", "rel"))
USED = tuple(f for f in FEATURES if f not in PATH_SIGNALS)
# Not shrunk: the model starts from the current fusion's order and L2 shrinks only the corrections.
UNPENALISED = ("fused_score",)


@dataclass(frozen=True)
class Bank:
    corpus: str  # the leave-one-out unit
    name: str
    bank: Path
    notes: Path


def dev_banks(eval_root: Path) -> list[Bank]:
    banks = [Bank("locomo", c, eval_root / "locomo" / c / "questions.jsonl", eval_root / "locomo" / c / "notes")
             for c in LOCOMO_DEV]
    banks.append(Bank("scifact", "scifact-train", eval_root / "scifact" / "questions.train.jsonl",
                      eval_root / "scifact" / "notes"))
    banks.append(Bank("crd3", "crd3-dev", DATA_DIR / "crd3_dev.jsonl", eval_root / "crd3" / "notes"))
    banks.append(Bank("sample", "sample", SAMPLE_NOTES / "questions.jsonl", SAMPLE_NOTES))
    return banks


def vault_banks(eval_root: Path) -> list[Bank]:
    """The real vaults' dev banks (bench/data/vaults), each vault a corpus of its own."""
    return [Bank(f"vault {bank.name.removesuffix('.dev.jsonl')}", bank.name.removesuffix(".dev.jsonl"), bank,
                 eval_root / "vaults" / bank.name.removesuffix(".dev.jsonl") / "notes")
            for bank in sorted((DATA_DIR / "vaults").glob("*.dev.jsonl"))]


@dataclass
class Unit:
    """What the metrics read of a chunk: its citation label and its note's path."""

    label: str
    path: str
    sessions: tuple[int, ...] = ()  # what it records: a gold `Session 12` names a hub's section of it


@dataclass
class Row:
    """One question's candidates, in the current fusion's order."""

    id: str
    kind: str
    relevant: list[str]
    units: list[Unit]
    features: np.ndarray
    labels: np.ndarray
    linked: list[Unit]


def data_dir(notes: Path) -> Path:
    """Where `oracle eval` keeps this folder's index (oracle/cli.py `_slug`)."""
    resolved = str(notes.resolve())
    return REPO / "var" / "eval" / f"{notes.resolve().name}-{hashlib.sha1(resolved.encode()).hexdigest()[:8]}"


def code_digest() -> str:
    """The code the features come from (notes, index, retrieval paths; not the model's scoring): a
    change to it invalidates the cache."""
    h = hashlib.sha256()
    for folder in ("notes", "index", "retrieve"):
        for path in sorted((REPO / "oracle" / folder).rglob("*.py")):
            if path.name != "learned.py":
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


async def collect(bank: Bank, cache: Path | None, say) -> list[Row]:
    key = hashlib.sha256(bank.bank.read_bytes() + code_digest().encode() + b"sessions").hexdigest()[:16]
    cached = cache / f"{bank.name}-{key}.json" if cache else None
    if cached and cached.exists():
        return [_row(r) for r in json.loads(cached.read_text())]

    from oracle.index.index import Index
    from oracle.index.ingest import ingest
    from oracle.oracle import Oracle
    from oracle.settings import Settings

    settings = Settings(
        _env_file=None, notes_dir=bank.notes, data_dir=data_dir(bank.notes), fusion="learned",
        fusion_model=Path("/nonexistent/no-model.json"), ollama_host="http://127.0.0.1:9", annotate=False,
    )
    questions = [q for q in load_bank(bank.bank) if q.relevant]
    rows: list[dict] = []
    logging.getLogger("oracle.retrieve.learned").setLevel(logging.ERROR)  # no model on purpose
    async with Index(settings) as index:
        if not settings.sqlite_path.exists():
            say(f"{bank.name}: indexing {bank.notes} into {settings.data_dir}")
        await ingest(index, by="tools.train_fusion")
        oracle = Oracle(index)
        for q in questions:
            r = await oracle.search(q.question, history=q.history, k=settings.k)
            chunks = {h.chunk.id: h.chunk for hits in r.paths.values() for h in hits}
            ev = r.evidence
            units = [Unit(chunks[cid].label, chunks[cid].path, tuple(chunks[cid].sessions)) for cid in ev.ids]
            rows.append({
                "id": q.id, "kind": q.kind, "relevant": list(q.relevant),
                "units": [[u.label, u.path, list(u.sessions)] for u in units],
                "features": np.round(ev.features, 10).tolist(),
                "labels": [int(any(matches(e, chunks[cid]) for e in q.relevant)) for cid in ev.ids],
                "linked": [[h.chunk.label, h.chunk.path, list(h.chunk.sessions)] for h in r.linked],
            })
    say(f"{bank.name}: {len(rows)} questions searched")
    if cached:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(rows))
    return [_row(r) for r in rows]


def _row(r: dict) -> Row:
    return Row(r["id"], r["kind"], r["relevant"], [_unit(u) for u in r["units"]],
               np.asarray(r["features"], dtype=np.float64).reshape(-1, len(FEATURES)),
               np.asarray(r["labels"], dtype=np.int8), [_unit(u) for u in r["linked"]])


def _unit(u: list) -> Unit:
    return Unit(u[0], u[1], tuple(u[2]) if len(u) > 2 else ())


# ---------------------------------------------------------------------------------------------
# Training


def pairs(rows_by_corpus: dict[str, list[Row]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Feature differences (relevant − irrelevant, and the reverse), labels and weights."""
    xs, ys, ws = [], [], []
    for rows in rows_by_corpus.values():
        usable = [r for r in rows if r.labels.any() and not r.labels[:NEGATIVES_FROM_TOP].all()]
        for r in usable:
            pos = np.flatnonzero(r.labels)
            neg = np.flatnonzero(r.labels[:NEGATIVES_FROM_TOP] == 0)
            if not len(neg):
                continue
            diff = (r.features[pos][:, None, :] - r.features[neg][None, :, :]).reshape(-1, len(FEATURES))
            weight = 1.0 / (len(usable) * len(diff))
            xs += [diff, -diff]
            ys += [np.ones(len(diff)), np.zeros(len(diff))]
            ws += [np.full(len(diff), weight)] * 2
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(ws)


def train(rows_by_corpus: dict[str, list[Row]], seed: int) -> dict:
    from sklearn.linear_model import LogisticRegression

    every = np.concatenate([r.features for rows in rows_by_corpus.values() for r in rows])
    mean = every.mean(axis=0)
    scale = every.std(axis=0)
    scale[scale < 1e-9] = 1.0
    # A column multiplied by 100 needs a weight 100 times smaller for the same effect, so L2 all but
    # ignores it; an unused column is zero, so its weight is.
    stretch = np.array([100.0 if f in UNPENALISED else 1.0 if f in USED else 0.0 for f in FEATURES])
    standardised = {c: [Row(r.id, r.kind, r.relevant, r.units, (r.features - mean) / scale * stretch, r.labels,
                            r.linked) for r in rows] for c, rows in rows_by_corpus.items()}
    x, y, w = pairs(standardised)
    model = LogisticRegression(C=C, fit_intercept=False, max_iter=5000, random_state=seed)
    model.fit(x, y, sample_weight=w * len(w))
    return {"weights": model.coef_[0] * stretch, "mean": mean, "scale": scale}


def score(model: dict, features: np.ndarray) -> np.ndarray:
    return ((features - model["mean"]) / model["scale"]) @ model["weights"]


# ---------------------------------------------------------------------------------------------
# Metrics


def ordered(row: Row, model: dict | None, pool: int = 40) -> list[Unit]:
    """The list `oracle eval` scores: the fused pool (≤ 40), then the linked notes."""
    if model is None:
        order = list(range(len(row.units)))
    else:
        s = score(model, row.features)
        order = sorted(range(len(row.units)), key=lambda i: (-round(float(s[i]), 9), i))
    return [row.units[i] for i in order[:pool]] + row.linked


def metrics(rows: list[Row], model: dict | None) -> dict[str, float]:
    out: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        final = ordered(r, model)
        out["hit@5"].append(hit(r.relevant, final, 5))
        out["hit@10"].append(hit(r.relevant, final, 10))
        out["recall@8"].append(recall(r.relevant, final, 8))
        out["ndcg@10"].append(ndcg(r.relevant, final))
        out["mrr"].append(mrr(r.relevant, final))
        if r.kind == "arc":
            out["arc all@10"].append(float(recall(r.relevant, final, 10) == 1.0))
    return {k: round(float(np.mean(v)), 4) for k, v in out.items()}


COLUMNS = ("hit@5", "hit@10", "arc all@10", "ndcg@10", "recall@8", "mrr")


def table(title: str, rows: list[tuple[str, dict, dict]]) -> str:
    lines = [title, f"{'bank':<16} {'fusion':<8} " + " ".join(f"{c:>10}" for c in COLUMNS)]
    for name, base, learned in rows:
        for label, m in (("current", base), ("learned", learned)):
            lines.append(f"{name:<16} {label:<8} " + " ".join(
                f"{m[c]:>10.3f}" if c in m else f"{'—':>10}" for c in COLUMNS))
    return "\n".join(lines)


def model_json(model: dict, seed: int, banks: list[Bank], counts: dict[str, int], dev: dict) -> str:
    data = {
        "format": FORMAT,
        "version": VERSION,
        "kind": "linear",
        "features": list(FEATURES),
        "weights": [round(float(v), 8) for v in model["weights"]],
        "mean": [round(float(v), 8) for v in model["mean"]],
        "scale": [round(float(v), 8) for v in model["scale"]],
        "trained": {
            "by": "tools/train_fusion.py",
            "seed": seed,
            "pairs": f"every relevant candidate against the irrelevant ones in the current fusion's top {NEGATIVES_FROM_TOP}",
            "C": C,
            "weighed": list(USED),
            "unpenalised": list(UNPENALISED),
            "banks": {b.name: counts[b.name] for b in banks},
        },
        "dev": dev,
    }
    return json.dumps(data, indent=1) + "\n"


async def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.train_fusion", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(REPO / "oracle" / "retrieve" / "fusion_model.json"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", default=str(REPO / "var" / "fusion-train"), help="collected rows ('' : none)")
    p.add_argument("--eval-root", default=str(EVAL_DIR), help=f"the shared evaluation data (default {EVAL_DIR})")
    p.add_argument("--loco", action="store_true", help="also print the leave-one-corpus-out table")
    p.add_argument("--vaults", action="store_true", help="also train on the real vaults' dev banks")
    p.add_argument("--collect-only", default="", help="only search these banks (comma-separated) into the cache")
    args = p.parse_args(argv)

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    banks = dev_banks(Path(args.eval_root)) + (vault_banks(Path(args.eval_root)) if args.vaults else [])
    if args.collect_only:
        for b in banks:
            if b.name in args.collect_only.split(","):
                await collect(b, Path(args.cache), say)
        return 0
    cache = Path(args.cache) if args.cache else None
    rows_by_bank = {b.name: await collect(b, cache, say) for b in banks}
    by_corpus: dict[str, list[Row]] = defaultdict(list)
    for b in banks:
        by_corpus[b.corpus] += rows_by_bank[b.name]

    model = train(by_corpus, args.seed)
    dev = {name: {"current": metrics(rows, None), "learned": metrics(rows, model)} for name, rows in by_corpus.items()}
    counts = {name: len(rows) for name, rows in rows_by_bank.items()}
    Path(args.out).write_text(model_json(model, args.seed, banks, counts, dev))
    print(table(f"dev scores (trained on all {len(dev)} dev corpora)",
                [(c, d["current"], d["learned"]) for c, d in dev.items()]))
    print("weights (per standardised feature):")
    for name, w in sorted(zip(FEATURES, model["weights"], strict=True), key=lambda t: -abs(t[1])):
        print(f"  {name:<16} {w:+.3f}")
    if args.loco:
        rows = []
        for held in by_corpus:
            m = train({c: r for c, r in by_corpus.items() if c != held}, args.seed)
            rows.append((held, metrics(by_corpus[held], None), metrics(by_corpus[held], m)))
        print(table(f"leave one corpus out (trained on the other {len(by_corpus) - 1}, scored on this one)", rows))
    print(f"model written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))

"""The simple retrieval baselines the Oracle has to beat, on each real-vault dev bank, per note path.

    python -m bench.baselines [--oracle RUN.json] [--banks a,b] [--language vault=code ...]
                              [--work DIR] [--markdown | --json]

Why
    The Oracle cuts notes into sessions and chunks, searches three paths (keyword, semantic, entity)
    and fuses them. All of that earns its keep only if it finds the right note more often than what
    anyone would build in an afternoon: BM25 over whole notes, the same small embedding model over
    windows of whole notes, and the two fused by rank. This measures those on the vault banks
    (bench/data/vaults/<vault>.dev.jsonl), whose gold is by note path, and puts the Oracle's own
    numbers from a saved `bench.banks --save` run (`--oracle`) beside them, counted the same way.

What runs
    Each vault's notes (EVAL_DIR/vaults/<vault>/notes/**/*.md, hidden folders skipped) are read as
    whole documents, one per file: the file name's stem as a title line, then the whole text. Its
    language is `oracle.lexicon.detect_language` over the notes, as the Oracle detects it
    (`--language vault=code` overrides). Then, per question (a follow-up, one with a `history`, is
    searched as its last history turn followed by the question, since the baselines keep no thread):
    bm25-porter: an in-memory SQLite FTS5 table (`porter unicode61 remove_diacritics 2`), the question
      as an OR query of its quoted word tokens (no FTS5 syntax survives), ranked by `bm25()`.
    bm25-snowball: the same with text and question folded (lower case, accents dropped) and stemmed
      by Snowball in the vault's language, tokenizer
      `unicode61 remove_diacritics 2`.
    minilm-windows: the bundled embedding model, loaded as the Oracle loads it (`Embedder`), each
      note cut by `Embedder.windows` into windows of 128 tokens overlapping 32, its title line
      heading each; a note scores the highest cosine of its windows to the question. The window
      vectors are cached in `--work` (default /tmp/oracle-baselines) keyed by a hash of the vault's
      notes and the model, so a second run only embeds the questions.
    rrf, rrf-porter: Reciprocal Rank Fusion (k = 60) of minilm-windows with bm25-snowball (rrf) or
      with bm25-porter (rrf-porter).
    The Oracle's row reads each question's `fused` places from the saved run, collapsed by note path
    (a note ranks at its first place).

The table
    One per bank; a row per system (oracle, then the baselines); means over the answerable questions
    (an empty `relevant` is skipped), a gold entry naming a note by its path (case-insensitive, with
    or without `.md`): recall@8 (share of the gold notes in the top 8), hit@5 (any gold in the top 5),
    MRR (1 / rank of the first gold note, 0 when none is ranked), paraphrase recall@8 and MRR (over
    the questions of kind "paraphrase" only, asked in words the notes do not use; "—" when the bank
    has none). The best baseline in each column is marked (bold, and `*` in the rich table; ties all
    marked). The baselines rank every note while the Oracle ranks only its fused pool (12–37 notes on
    these banks), so a baseline's MRR may gain a little from golds ranked past the Oracle's pool (cut
    to the Oracle's pool per question, no baseline's MRR on these banks moved by more than 0.003).
    These are quality numbers; the model runs on CPU and only the first run's embedding takes time.
    `--json` prints the numbers instead.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from bench.baseline_rank import (
    Doc,
    bank_measures,
    oracle_rankings,
    porter_index,
    rrf,
    search_text,
    snowball_index,
    vault_docs,
)
from bench.common import DATA_DIR, EVAL_DIR, log
from bench.printing import console, markdown_table, new_table

WINDOW_TOKENS = 128  # ORACLE_WINDOW_TOKENS' default
OVERLAP_TOKENS = 32  # ORACLE_WINDOW_OVERLAP_TOKENS' default
SYSTEMS = ("oracle", "bm25-porter", "bm25-snowball", "minilm-windows", "rrf-porter", "rrf")
COLUMNS = ("recall@8", "hit@5", "MRR", "paraphrase recall@8", "paraphrase MRR")


def read_bank(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ---------------------------------------------------------------------------------------------
# The embedding baseline


def load_embedder(work: Path):
    from oracle.index.embed import Embedder
    from oracle.settings import BUNDLED_EMBED_MODEL

    return Embedder(BUNDLED_EMBED_MODEL, cache_dir=work / "models")


def window_vectors(embedder, vault: str, docs: list[Doc], work: Path):
    """(vectors, owners): each window's normalized vector and the index of its note in `docs`, cached
    in `work` under a hash of the notes, the model and the window sizes."""
    import numpy as np

    from oracle.types import Chunk

    digest = hashlib.sha1(f"{embedder.fingerprint}|{WINDOW_TOKENS}|{OVERLAP_TOKENS}".encode())
    for d in docs:
        digest.update(f"{d.path}\0{d.title}\0{d.text}\0".encode("utf-8", "surrogatepass"))
    stem = work / f"{vault}-{digest.hexdigest()[:16]}"
    vec_file, own_file = stem.with_suffix(".vectors.npy"), stem.with_suffix(".owners.npy")
    if vec_file.exists() and own_file.exists():
        return np.load(vec_file), np.load(own_file)
    chunks = [Chunk(id=f"{vault}/{d.path}", path=d.path, label=d.title, kind="note", part=1, parts=1, heading="",
                    start_line=1, end_line=d.text.count("\n") + 1, text=d.text, text_hash="") for d in docs]
    index = {c.id: i for i, c in enumerate(chunks)}
    windows = embedder.windows(chunks, OVERLAP_TOKENS, WINDOW_TOKENS)
    log(f"{vault}: embedding {len(windows)} windows of {len(docs)} notes")
    parts = []
    for start in range(0, len(windows), 512):
        parts.append(embedder.encode([w.text for w in windows[start:start + 512]]))
        log(f"{vault}: {min(start + 512, len(windows))}/{len(windows)} windows")
    vectors = np.concatenate(parts) if parts else np.zeros((0, embedder.dim), np.float32)
    owners = np.array([index[w.chunk_id] for w in windows], dtype=np.int64)
    work.mkdir(parents=True, exist_ok=True)
    for file, array in ((vec_file, vectors), (own_file, owners)):
        tmp = file.with_name(file.name + ".tmp.npy")
        np.save(tmp, array)
        tmp.replace(file)
    return vectors, owners


def dense_ranking(embedder, vectors, owners, paths: list[str], text: str) -> list[str]:
    """Every note with a window, by its best window's cosine to `text` (vectors are normalized)."""
    import numpy as np

    sims = vectors @ embedder.encode_query(text).astype(np.float32)
    best = np.full(len(paths), -np.inf, dtype=np.float32)
    np.maximum.at(best, owners, sims)
    order = np.argsort(-best, kind="stable")
    return [paths[i] for i in order if np.isfinite(best[i])]


# ---------------------------------------------------------------------------------------------
# One bank


def run_bank(vault: str, questions: list[dict], embedder, work: Path, language: str | None, run: dict | None) -> dict:
    from oracle.lexicon import detect_language

    docs = vault_docs(EVAL_DIR / "vaults" / vault / "notes")
    if not docs:
        raise SystemExit(f"no notes for {vault} under {EVAL_DIR / 'vaults' / vault / 'notes'}")
    code = language or detect_language(d.text for d in docs)
    porter, snowball = porter_index(docs), snowball_index(docs, code)
    vectors, owners = window_vectors(embedder, vault, docs, work)
    paths = [d.path for d in docs]
    rankings: dict[str, list] = {name: [] for name in SYSTEMS[1:]}
    for q in questions:
        text = search_text(q)
        got = {"bm25-porter": porter.search(text), "bm25-snowball": snowball.search(text),
               "minilm-windows": dense_ranking(embedder, vectors, owners, paths, text)}
        got["rrf-porter"] = rrf(got["bm25-porter"], got["minilm-windows"])
        got["rrf"] = rrf(got["bm25-snowball"], got["minilm-windows"])
        for name, ranking in got.items():
            rankings[name].append((q, ranking))
    systems = {name: bank_measures(rows) for name, rows in rankings.items()}
    oracle_rows = oracle_rankings(run, vault) if run is not None else None
    systems = {"oracle": bank_measures(oracle_rows) if oracle_rows is not None else None} | systems
    return {"name": vault, "language": code, "notes": len(docs), "windows": int(len(owners)),
            "questions": len(questions), "answerable": sum(1 for q in questions if q.get("relevant")),
            "systems": systems}


# ---------------------------------------------------------------------------------------------
# Printing


def best_baselines(bank: dict) -> dict[str, set[str]]:
    """Per column, the baselines with the best value (ties all), rounded as printed."""
    out: dict[str, set[str]] = {}
    for column in COLUMNS:
        values = {name: round(m[column], 3) for name, m in bank["systems"].items()
                  if name != "oracle" and m is not None and m[column] is not None}
        top = max(values.values(), default=None)
        out[column] = {name for name, v in values.items() if v == top} if top is not None else set()
    return out


def cells(bank: dict, name: str, bold) -> list[str]:
    m = bank["systems"].get(name)
    if m is None:
        return ["—"] * len(COLUMNS)
    best = best_baselines(bank)
    return [("—" if m[c] is None else bold(f"{m[c]:.3f}") if name in best[c] else f"{m[c]:.3f}") for c in COLUMNS]


def title(bank: dict) -> str:
    oracle = bank["systems"].get("oracle")
    extra = "" if oracle is None or oracle["questions"] == bank["answerable"] else \
        f"; the Oracle's run scored {oracle['questions']}"
    para = bank["systems"]["rrf"]["paraphrase"]
    return (f"{bank['name']} ({bank['language']}, {bank['notes']} notes, {bank['windows']} windows; "
            f"{bank['answerable']} answerable questions, {para} paraphrases{extra})")


def print_rich(banks: list[dict]) -> None:
    out = console(120)
    for bank in banks:
        table = new_table(title(bank), [("system", "left"), *((c, "right") for c in COLUMNS)])
        for name in SYSTEMS:
            table.add_row(name, *cells(bank, name, lambda s: f"[bold green]{s}*[/]"))
        out.print(table)
    out.print("*: the best baseline in the column. Means over answerable questions, gold by note path.")


def print_markdown(banks: list[dict]) -> None:
    for bank in banks:
        print(f"### {title(bank)}\n")
        rows = [[name, *cells(bank, name, lambda s: f"**{s}**")] for name in SYSTEMS]
        print(markdown_table(["system", *COLUMNS], rows, left=1) + "\n")
    print("Bold: the best baseline in the column. Means over answerable questions, gold by note path.")


def parse_languages(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        vault, sep, code = pair.partition("=")
        if not sep or not vault or not code:
            raise SystemExit(f"--language takes vault=code, not {pair!r}")
        out[vault] = code
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.baselines", description=__doc__.split("\n\n")[0])
    parser.add_argument("--oracle", type=Path, help="a bench.banks --save file: the Oracle's row")
    parser.add_argument("--banks", help="vaults to measure, comma-separated (default: every vault bank)")
    parser.add_argument("--language", action="append", default=[], metavar="VAULT=CODE",
                        help="a vault's language instead of the detected one (repeatable)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/oracle-baselines"), help="cached window vectors")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args(argv)
    languages = parse_languages(args.language)
    files = sorted((DATA_DIR / "vaults").glob("*.dev.jsonl"))
    if args.banks:
        wanted = set(args.banks.split(","))
        unknown = wanted - {f.name.removesuffix(".dev.jsonl") for f in files}
        if unknown:
            raise SystemExit(f"no vault bank named {', '.join(sorted(unknown))} in {DATA_DIR / 'vaults'}")
        files = [f for f in files if f.name.removesuffix(".dev.jsonl") in wanted]
    run = json.loads(args.oracle.read_text(encoding="utf-8")) if args.oracle else None
    log("loading the bundled embedding model")
    embedder = load_embedder(args.work)
    banks = []
    for file in files:
        vault = file.name.removesuffix(".dev.jsonl")
        log(f"{vault}: searching")
        banks.append(run_bank(vault, read_bank(file), embedder, args.work, languages.get(vault), run))
    if args.json:
        print(json.dumps({"oracle_run": str(args.oracle) if args.oracle else None, "banks": banks}, indent=2))
    elif args.markdown:
        print_markdown(banks)
    else:
        print_rich(banks)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`oracle eval`: retrieval quality per stage, or the answers end to end, from a question bank."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from ..eval import run_eval
from ..eval_answers import run_answers
from ..eval_bank import load_bank
from ..index.ingest import ingest
from ..oracle import Oracle
from ..types import Clearance
from .common import chosen, console, out, snippet
from .ingest import IngestBars


async def cmd_eval(args: argparse.Namespace) -> int:
    bank_path = Path(args.bank)
    questions = load_bank(bank_path)
    notes = Path(args.notes) if args.notes else _bank_notes(bank_path)
    picked = chosen(args, one=True, overrides_apply=False)
    data = None
    if args.data:
        data = Path(args.data)
    elif notes:  # one index per corpus, so evaluating several never thrashes one index
        data = picked.settings().data_dir / "eval" / _slug(notes)
    picked = picked.moved(notes=notes, data=data)
    settings = picked.settings()
    bars = IngestBars(enabled=not args.json and console.is_terminal)
    async with picked.index() as index:
        if settings.sqlite_path.exists():
            built_from = (await (await index.store()).meta()).get("notes_dir")
            if built_from and Path(built_from) != settings.notes_dir.resolve():  # say so: it is not an update
                console.print(f"the index in {settings.data_dir} was built from {built_from}; "
                              f"indexing {settings.notes_dir} into it instead", soft_wrap=True)
        with bars.progress:
            await ingest(index, progress=bars, by="oracle eval")
        if args.answers:
            result = await run_answers(Oracle(index), questions, clearance=Clearance.of(args.gm))
        else:
            result = await run_eval(Oracle(index), questions, clearance=Clearance.of(args.gm), k=args.k or settings.k)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    elif args.answers:
        print_answers(result)
    else:
        print_eval(result, args.k or settings.k)
    return 0


def _bank_notes(bank: Path) -> Path | None:
    """A bank beside a `notes/` folder evaluates that folder (the layout of the shared banks)."""
    sibling = bank.parent / "notes"
    return sibling if sibling.is_dir() else None


def _slug(path: Path) -> str:
    import hashlib

    resolved = str(path.resolve())
    return f"{path.resolve().name}-{hashlib.sha1(resolved.encode()).hexdigest()[:8]}"


def print_eval(result: dict[str, Any], k: int) -> None:
    rows = _eval_rows(result, k)
    kinds = list(result["by_kind"])
    title = f"{result['answerable']} answerable questions ({result['unanswerable']} unanswerable)"
    table = Table(title=f"{title}; reranker reordered {result['reranked']} of {result['questions']}")
    table.add_column("metric")
    table.add_column("overall", justify="right")
    for kind in kinds:
        table.add_column(f"{kind} ({result['by_kind'][kind]['questions']})", justify="right")

    def cell(value: float | None) -> str:
        return "—" if value is None else f"{value:.3f}"

    for key, name in rows:
        table.add_row(name, cell(result["overall"][key]), *(cell(result["by_kind"][kd][key]) for kd in kinds))
    out.print(table)
    if result["overall"]["answers"]:
        out.print(f"answer shown: over the {result['overall']['answers']} answerable questions with a gold answer, "
                  "all its key terms (stemmed content words) in the text of the passages a player reads")
    if result["misses"]:
        _print_misses(result["misses"])


def _eval_rows(result: dict[str, Any], k: int) -> list[tuple[str, str]]:
    """The table's rows, in order: each measure's key in the result and the name the table gives it."""
    return [
        ("union_recall", "recall in the union of the paths and links"),
        ("paths_union_recall", "recall in the union of the three paths"),
        ("keyword_recall", "recall, keyword path"),
        ("semantic_recall", "recall, semantic path"),
        ("entity_recall", "recall, entity path"),
        ("linked_recall", f"recall, notes linked to the fused top {k}"),
        ("keyword_recall_at_k", f"recall, keyword top {k}"),
        ("semantic_recall_at_k", f"recall, semantic top {k}"),
        ("entity_recall_at_k", f"recall, entity top {k}"),
        ("fused_recall_at_k", f"recall in the fused top {k}"),
        ("pool_recall", "recall in the pool: fused and linked (what a reranker sees)"),
        ("hit_in_pool", "any gold in the pool"),
        ("final_recall_at_k", f"recall in the final top {k}"),
        ("recall_at_5", "recall@5 (final list)"),
        ("recall_at_10", "recall@10 (final list)"),
        ("hit_at_5", "any gold in the top 5"),
        ("hit_at_10", "any gold in the top 10"),
        ("context_recall", "recall in the packed context"),
        ("mrr", "MRR (final list)"),
        ("ndcg_at_10", "nDCG@10 (final list)"),
        ("all_gold_at_10", "all gold in the top 10"),
        ("arc_coverage_union", "arc coverage, union"),
        ("arc_coverage_at_k", f"arc coverage, top {k}"),
        ("arc_coverage_context", "arc coverage, context"),
        ("ann_recall", "approximate vs exact dense search"),
        *((f"fused_{key}", f"fused stage ({result.get('fusion', 'fused')}): {name}") for key, name in (
            ("hit_at_5", "any gold in the top 5"), ("hit_at_10", "any gold in the top 10"),
            ("recall_at_k", f"recall@{k}"), ("mrr", "MRR"), ("ndcg_at_10", "nDCG@10"),
            ("all_gold_at_10", "all gold in the top 10"))),
        ("answer_shown", "answer shown: passages (all key terms)"),
        ("answer_shown_first_words", "answer shown: first 60 words (baseline)"),
        ("answer_terms_shown", "answer key terms shown: passages"),
        ("answer_terms_shown_first_words", "answer key terms shown: first 60 words"),
    ]


def _print_misses(misses: list[dict[str, Any]]) -> None:
    """Print the misses table: each answerable question whose gold was lost, and the stage it was lost at."""
    table = Table(title="misses: where the evidence was lost", title_justify="left")
    for col in ("id", "kind", "question", "lost"):
        table.add_column(col)
    for m in misses:
        lost = ", ".join(f"{entry} at {stage}" for entry, stage in m["lost"].items())
        table.add_row(escape(str(m["id"])), m["kind"], escape(snippet(m["question"], 60)), escape(lost))
    out.print(table)


def print_answers(result: dict[str, Any]) -> None:
    def cell(value: float | None) -> str:
        return "—" if value is None else f"{value:.3f}"

    def spread(values: dict[str, float] | None) -> str:
        return "—" if values is None else f"{values['p50']:g} / {values['p95']:g} (n={values['n']})"

    modes = result["modes"]
    rows = [
        ("answers by the model (llm)", cell(modes["llm"])),
        ("answers shown as passages", cell(modes["passages"])),
        ("answers: the notes hold nothing (not_found)", cell(modes["not_found"])),
        ("citation validity (cited labels the context held)",
         f"{cell(result['citation_validity'])} ({result['citations']['valid']} valid, {result['citations']['unknown']} unknown)"),
        ("citation support (claims whose cited text holds ≥ half their key terms)",
         f"{cell(result['citation_support'])} ({result['claims']['supported']} of {result['claims']['cited']})"),
        ("gold labels cited", cell(result["gold_citation_recall"])),
        (f"correct abstention ({result['unanswerable']} unanswerable)", cell(result["correct_abstention"])),
        (f"false abstention ({result['answerable']} answerable)", cell(result["false_abstention"])),
        ("uncited sentences: total / per model answer",
         f"{result['uncited_sentences']['total']} / {cell(result['uncited_sentences']['per_answer'])}"),
        ("tokens per request, the trace's total: p50 / p95", spread(result["tokens_per_request"]["total"])),
        ("tokens per request, Ollama's prompt_eval_count: p50 / p95",
         spread(result["tokens_per_request"]["prompt_eval_count"])),
        ("rerank ms: p50 / p95", spread(result["latency_ms"]["rerank"])),
        ("answer ms: p50 / p95", spread(result["latency_ms"]["answer"])),
        ("first words ms, from the question: p50 / p95", spread(result["latency_ms"]["first_words"])),
        ("passages: no first words within ORACLE_FIRST_WORDS_SECONDS", cell(result["late"])),
        (f"answer shown in the reply ({result['answers']} gold answers)", cell(result["answer_shown"])),
        ("answer key terms shown in the reply", cell(result["answer_terms_shown"])),
    ]  # fmt: skip
    table = Table(title=f"answers to {result['questions']} questions, model {result['model']}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in rows:
        table.add_row(name, value)
    out.print(table)

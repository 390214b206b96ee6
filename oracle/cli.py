"""`oracle …`: the game master's and the measurer's command line.

Human output goes through rich (progress bars, tables); `--json` prints one JSON object for machines.
Domain errors print one line and exit 1, never a traceback.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from .answer.prompt import Turn
from .answer.results import Answer
from .campaigns import Campaigns, CampaignsError
from .errors import OracleError
from .eval import load_bank, run_eval
from .eval_answers import run_answers
from .index.embed import Embedder
from .index.index import Index
from .index.ingest import ingest
from .index.seam import Embeddings, off_loop
from .index.status import index_status, is_indexed
from .index.store import StoreError
from .journal import Journal
from .llm import describe_loaded, describe_window
from .oracle import Oracle
from .retrieve.results import Hit
from .settings import Settings, settings_problem
from .types import INGEST_STAGES, IngestReport
from .types import Progress as IngestProgress
from .visibility import VisibilityReport, note_visibility, players_view
from .watch import WatchError, watch_notes

console = Console(stderr=True)
out = Console(width=None if sys.stdout.isatty() else 150)

# What a user can act on: the Oracle's own errors, and a folder that is missing or not theirs.
DOMAIN_ERRORS = (OracleError, FileNotFoundError, PermissionError)


def build_settings(args: argparse.Namespace) -> Settings:
    """The settings of the one campaign a command works on (`--campaign`, or the only one)."""
    return one_campaign(campaign_settings(args))


def one_campaign(chosen: dict[str, Settings]) -> Settings:
    if len(chosen) > 1:
        names = ", ".join(chosen)
        raise CampaignsError(f"ORACLE_CAMPAIGNS lists several campaigns: name one with --campaign ({names})")
    return next(iter(chosen.values()))


def campaign_settings(args: argparse.Namespace, *, overrides_apply: bool = True) -> dict[str, Settings]:
    """Each chosen campaign's settings by name: `--campaign NAME`, else every campaign of
    ORACLE_CAMPAIGNS, else the default one of ORACLE_NOTES_DIR. `--notes`/`--data` apply to one only."""
    base = Settings()
    campaigns = Campaigns.from_settings(base)
    name = getattr(args, "campaign", None)
    chosen = [campaigns.get(name)] if name else list(campaigns)
    settings = {c.name: c.settings(base) for c in chosen}
    if not overrides_apply:
        return settings
    overrides: dict[str, Any] = {}
    if getattr(args, "notes", None):
        overrides["notes_dir"] = Path(args.notes)
    if getattr(args, "data", None):
        overrides["data_dir"] = Path(args.data)
    if overrides and len(settings) > 1:
        raise CampaignsError("--notes and --data name one campaign's folders: add --campaign NAME")
    return {n: s.model_copy(update=overrides) if overrides else s for n, s in settings.items()}


async def open_indexes(chosen: dict[str, Settings]) -> dict[str, Index]:
    """One index per campaign; several share one model, loaded once."""
    if len(chosen) == 1:
        return {name: Index(s) for name, s in chosen.items()}
    first = next(iter(chosen.values()))
    model = await off_loop(Embedder, first.embed_model, query_backend=first.query_backend, cache_dir=first.models_path)
    shared = Embeddings(model)
    return {name: Index(s, embedder=shared) for name, s in chosen.items()}


# ---------------------------------------------------------------------------------------------
# ingest


class _Bars:
    """Progress bars for files, windows embedded and annotations, on stderr."""

    def __init__(self, enabled: bool) -> None:
        self.progress = Progress(
            TextColumn("{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[detail]}"),
            console=console,
            disable=not enabled,
        )
        self.tasks: dict[str, Any] = {}

    def __call__(self, event: IngestProgress) -> None:
        if event.stage == "done":
            return
        task = self.tasks.get(event.stage)
        if task is None:
            task = self.progress.add_task(INGEST_STAGES[event.stage], total=event.total or None, detail="")
            self.tasks[event.stage] = task
        self.progress.update(task, completed=event.done, total=event.total or None, detail=event.detail[:40])


async def cmd_ingest(args: argparse.Namespace) -> int:
    """The chosen campaign, or every campaign of ORACLE_CAMPAIGNS in turn."""
    indexes = await open_indexes(campaign_settings(args))
    reports: dict[str, dict] = {}
    try:
        for name, index in indexes.items():
            if len(indexes) > 1 and not args.json:
                out.print(f"[bold]campaign {escape(name)}[/] ({escape(str(index.settings.notes_dir))})")
            bars = _Bars(enabled=not args.json and console.is_terminal)
            with bars.progress:
                report = await ingest(index, progress=bars, by="the command line")
            reports[name] = report.to_json()
            if not args.json:
                print_ingest_report(report)
    finally:
        for index in indexes.values():
            await index.close()
    if args.json:
        single = next(iter(reports.values())) if len(reports) == 1 else {"campaigns": reports}
        print(json.dumps(single, ensure_ascii=False))
    return 0


async def cmd_watch(args: argparse.Namespace) -> int:
    """Reingest each chosen campaign (every one of ORACLE_CAMPAIGNS by default) whenever its notes
    have changed and then stayed quiet; one summary per reingest. Runs until interrupted."""
    chosen = campaign_settings(args)
    indexes = await open_indexes(chosen)
    quiet = args.quiet if args.quiet is not None else next(iter(chosen.values())).watch_quiet

    def printer(name: str):
        async def show(report: IngestReport) -> None:
            if args.json:
                paths = {"added": report.added, "changed": report.changed, "removed": report.removed}
                print(json.dumps({"campaign": name, "paths": paths, **report.to_json()}, ensure_ascii=False), flush=True)
                return
            if not (report.added or report.changed or report.removed or report.skipped):
                out.print(f"[bold]campaign {escape(name)}[/]: up to date")
                return
            out.print(f"[bold]campaign {escape(name)}[/]: the notes changed")
            print_ingest_report(report)
        return show

    def complain(name: str):
        async def show(error: OracleError) -> None:
            console.print(f"[red]oracle watch:[/] campaign {escape(name)}: {escape(str(error))}", soft_wrap=True)
        return show

    try:
        for index in indexes.values():
            if not index.settings.notes_dir.is_dir():
                raise WatchError(f"cannot watch the notes folder {index.settings.notes_dir}: it does not exist")
        for name, index in indexes.items():
            if not args.json:
                console.print(f"watching {escape(str(index.settings.notes_dir))} (campaign {escape(name)}); "
                              f"reingesting after {quiet:g} s of quiet. Ctrl-C stops.", soft_wrap=True)
        await asyncio.gather(*(
            watch_notes(index, quiet=quiet, on_change=printer(name), on_error=complain(name), catch_up=not args.no_catch_up,
                        by="oracle watch")
            for name, index in indexes.items()
        ))
    finally:
        for index in indexes.values():
            await index.close()
    return 0


def print_ingest_report(report: IngestReport) -> None:
    table = Table(title="Ingest", show_header=False)
    table.add_row("files added / changed / removed / unchanged",
                  f"{len(report.added)} / {len(report.changed)} / {len(report.removed)} / {report.unchanged}")
    table.add_row("chunks in the index", str(report.chunks))
    table.add_row("windows embedded", str(report.windows_embedded))
    table.add_row("annotations done / missing", f"{report.annotations_done} / {report.annotations_missing}")
    table.add_row("entities", str(report.entities))
    table.add_row("seconds", f"{report.seconds:.1f}")
    out.print(table)
    if report.annotation_note:
        out.print(f"[yellow]annotations:[/] {escape(report.annotation_note)}")
    for s in report.skipped:
        out.print(f"[red]skipped[/] {escape(str(s.path))}: {escape(s.reason)}")
    for s in report.warnings:
        out.print(f"[yellow]repaired[/] {escape(str(s.path))}: {escape(s.reason)}")
    for path, secrets in report.secrets.items():
        rule = report.rules.get(path, "")
        out.print(f"[magenta]secret[/] {escape(str(path))}: {secret_count(secrets)}" + (f" ({escape(rule)})" if rule else ""))


def secret_count(secrets: int) -> str:
    """`IngestReport.secrets` as a game master reads it."""
    if secrets < 0:
        return "the whole note is game-master-only"
    return f"{secrets} secret block{'s' if secrets != 1 else ''} kept from players"


# ---------------------------------------------------------------------------------------------
# status


async def cmd_status(args: argparse.Namespace) -> int:
    """What is indexed and whether the model answers, as a player reads it (`/oracle status`): public
    counts, no host, path or error. With --gm, the game master's: GM-only counts, the Ollama host and
    why it does not answer, the policy of who reads what, the answers withheld from players."""
    settings = build_settings(args)
    if not settings.sqlite_path.exists():
        if not settings.notes_dir.is_dir():
            raise StoreError(f"no index at {settings.sqlite_path}, and the notes folder {settings.notes_dir} does not "
                             "exist: set ORACLE_NOTES_DIR to your vault, then run `oracle ingest`")
        raise StoreError(f"no index at {settings.sqlite_path}: run `oracle ingest` first")
    async with Index(settings) as index:
        if not await is_indexed(index):
            raise StoreError(f"no ingest has finished into {settings.data_dir} (one was stopped or failed): "
                             "run `oracle ingest`")
        status = await index_status(index, gm=args.gm)
    if args.json:
        print(json.dumps(status, ensure_ascii=False))
        return 0
    table = Table(title="Oracle index" if args.gm else "Oracle index, as players read it", show_header=False)
    ok = status["ollama"]["ok"]
    if args.gm:
        table.add_row("notes", escape(str(status["notes_dir"])))
        table.add_row("who reads what", escape(status["policy"]))
    table.add_row("files indexed (skipped)", f"{status['files']} ({status['files_skipped']})")
    if args.gm:
        table.add_row("sessions (players can read / game-master-only)",
                      f"{status['sessions']} / {status['sessions_gm_only']}")
    else:
        numbers = status.get("session_numbers")
        table.add_row("sessions", f"{status['sessions']} (numbered {numbers})" if numbers else str(status["sessions"]))
    kinds = ", ".join(f"{k} {v}" for k, v in status["chunks_by_kind"].items())
    table.add_row("chunks", f"{status['chunks']} ({kinds})")
    if args.gm:
        table.add_row("game-master-only chunks", str(status["chunks_by_visibility"].get("gm", 0)))
        table.add_row("dense windows", str(status["windows"]))
        table.add_row("Compendium entries (players / game master)", f"{status['entities']} / {status['entities_gm']}")
    else:
        table.add_row("Compendium entries", str(status["entities"]))
    table.add_row("annotation coverage", f"{status['annotated']}/{status['chunks']} ({status['annotation_coverage']:.0%})")
    table.add_row("last ingest", f"{status['last_ingest']} ({status['last_ingest_seconds']} s)")
    table.add_row("embedding model", escape(str(status["embed_model"])))
    table.add_row("answer model", escape(str(status["model"])))
    if args.gm:
        table.add_row("ollama", escape(f"{status['ollama']['host']}: " + ("answers" if ok else status["ollama"]["reason"])))
    else:
        table.add_row("ollama", "answers" if ok else escape(status["ollama"]["reason"]))
    table.add_row("context window", escape(describe_window(status["context"])))
    table.add_row("model loaded", escape(describe_loaded(status["model_loaded"])))
    if not args.gm:
        out.print(table)
        out.print("[dim]The game master's status (GM-only counts, Ollama's host, the policy): oracle status --gm[/]")
        return 0
    withheld = status["withheld"]
    table.add_row("answers withheld from players", str(withheld["count"]))
    out.print(table)
    for event in withheld["last"]:
        seen = f"{event['at']}: {event['question']!r} ({event['reason']})"
        out.print(f"[yellow]withheld[/] {escape(seen)}")
    return 0


# ---------------------------------------------------------------------------------------------
# who


async def cmd_who(args: argparse.Namespace) -> int:
    """The dossier `/oracle who` shows, as a player sees it (or, with --gm, as the game master)."""
    settings = build_settings(args)
    async with Index(settings) as index:
        await ensure_index(index, quiet=args.json)
        oracle = Oracle(index)
        dossier = await oracle.dossiers.who(args.name, gm=args.gm)
        suggestions = [] if dossier is not None else await oracle.dossiers.names(args.name, gm=args.gm, limit=10)
    if args.json:
        print(json.dumps({"dossier": dossier.to_json() if dossier else None, "suggestions": suggestions},
                         ensure_ascii=False))
        return 0 if dossier is not None else 1
    if dossier is None:
        out.print(f"The Compendium has no entry for “{args.name}”.", markup=False)
        if suggestions:
            out.print("Names that start like it: " + ", ".join(suggestions), markup=False)
        return 1
    data = dossier.to_json()
    out.print(f"[bold]{escape(dossier.name)}[/] ({escape(dossier.kind)})")
    if dossier.aliases:
        out.print("also called " + ", ".join(dossier.aliases), markup=False)
    if data["first"]:
        out.print(f"first seen {data['first']}, last seen {data['last']}", markup=False)
    table = Table("label", "where", "mentions")
    for m in dossier.mentions:
        table.add_row(escape(m.label), escape(f"{m.path}:{m.start_line}-{m.end_line}"), str(m.count))
    out.print(table)
    return 0


# ---------------------------------------------------------------------------------------------
# search


def snippet(text: str, width: int = 110) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def hits_table(title: str, hits: list[Hit]) -> Table:
    table = Table(title=title, title_justify="left", expand=True)
    table.add_column("#", justify="right", width=3)
    table.add_column("label", no_wrap=True)
    table.add_column("score", justify="right", width=8)
    table.add_column("lines", no_wrap=True)
    table.add_column("text", ratio=1)
    for h in hits:
        c = h.chunk
        part = f" ({c.part}/{c.parts})" if c.parts > 1 else ""
        table.add_row(str(h.rank), escape(c.label + part), f"{h.score:.4f}", escape(f"{c.path}:{c.start_line}-{c.end_line}"),
                      escape(snippet(c.text)))
    return table


async def cmd_search(args: argparse.Namespace) -> int:
    settings = build_settings(args)
    async with Index(settings) as index:
        await ensure_index(index, quiet=args.json)
        retrieval = await Oracle(index).search(args.question, history=args.history, gm=args.gm, k=args.k)
    if args.json:
        print(json.dumps(retrieval.to_json(), ensure_ascii=False))
        return 0
    k = args.k or settings.k
    out.print(f"[bold]question[/] {escape(retrieval.question)}")
    if retrieval.search_query != retrieval.question:
        out.print(f"[bold]searched as[/] {escape(retrieval.search_query)}")
    names = ", ".join(f"{e.name} (\"{e.matched}\")" for e in retrieval.entities) or "none"
    out.print(f"[bold]entities[/] {escape(names)}")
    for name, hits in retrieval.paths.items():
        out.print(hits_table(f"{name} path", hits[:k]))
    fusion = {"dbsf": "distribution-based score fusion", "rrf": "reciprocal rank fusion",
              "learned": "learned fusion of the paths' evidence"}.get(
        settings.fusion, "weighted reciprocal rank fusion"
    )
    out.print(hits_table(f"fused ({fusion})", retrieval.fused[:k]))
    if retrieval.linked:
        out.print(hits_table(f"linked to the fused top {k} (after the pool, for the reranker)", retrieval.linked))
    timings = "  ".join(f"{name} {ms:.1f} ms" for name, ms in retrieval.timings_ms.items())
    out.print(f"[dim]{timings}[/]")
    return 0


async def cmd_ask(args: argparse.Namespace) -> int:
    settings = build_settings(args)
    async with Index(settings) as index:
        await ensure_index(index, quiet=args.json)
        oracle = Oracle(index)

        async def show_stage(name: str) -> None:
            if not args.json:
                console.print(f"[dim]{name}…[/]")

        stream = _Stream()
        show_text = stream
        history = [Turn("user", h) for h in args.history]
        answer = await oracle.ask(
            args.question, history=history, gm=args.gm, on_stage=show_stage, on_text=None if args.json else show_text
        )
    return print_answer(answer, stream.text, args)


class _Stream:
    """What the model writes, printed as it comes; `text` is what was printed."""

    def __init__(self) -> None:
        self.text = ""

    async def __call__(self, text: str) -> None:
        sys.stdout.write(text[len(self.text):])
        sys.stdout.flush()
        self.text = text


def print_answer(answer: Answer, streamed: str, args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps(answer.to_json(), ensure_ascii=False))
        return 0
    if streamed:
        sys.stdout.write("\n\n")
    if answer.mode == "passages":
        out.print("[yellow bold]Passages, not an answer[/]")
        out.print(answer.text, markup=False, soft_wrap=True)
    elif not streamed:
        out.print(answer.text, markup=False, soft_wrap=True)
    elif answer.text != streamed:  # citations the notes do not hold were removed, or the stream was cut
        out.print("[bold]Checked against the notes:[/]")
        out.print(answer.text, markup=False, soft_wrap=True)
    if answer.citations:
        sources = Table(title="sources", title_justify="left")
        for col in ("label", "note", "lines"):
            sources.add_column(col)
        for c in answer.citations:
            sources.add_row(escape(c.label), escape(str(c.path)), f"{c.start_line}–{c.end_line}")
        out.print(sources)
    if getattr(args, "trace", False):
        out.print_json(json.dumps(answer.shown_trace().to_json(), ensure_ascii=False))  # a player's: no host
    return 0


async def cmd_recap(args: argparse.Namespace) -> int:
    settings = build_settings(args)
    async with Index(settings) as index:
        await ensure_index(index, quiet=args.json)
        stream = _Stream()
        answer = await Oracle(index).recap(args.session, gm=args.gm, on_text=None if args.json else stream)
    return print_answer(answer, stream.text, args)


async def cmd_questions(args: argparse.Namespace) -> int:
    settings = build_settings(args)
    async with await Journal.open(settings.journal_path) as journal:
        if args.confirm is not None:
            await journal.confirm(args.confirm, args.label, by="oracle questions")
            console.print(f"confirmed question {args.confirm}: "
                          + (", ".join(args.label) if args.label else "the notes do not hold the answer"))
        if args.bank:
            bank = await journal.bank()
            Path(args.bank).write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in bank))
            console.print(f"wrote {len(bank)} confirmed questions to {args.bank}")
            if not args.unanswered:
                return 0
        if args.unanswered:
            groups = await journal.unanswered(limit=args.limit)
            if args.json:
                print(json.dumps({"unanswered": [g.to_json() for g in groups]}, ensure_ascii=False))
                return 0
            table = Table(title="what the notes could not answer, newest first", title_justify="left")
            for col in ("asked", "last", "why", "question", "ids"):
                table.add_column(col)
            for g in groups:
                table.add_row(str(g.asked), g.last, escape(", ".join(sorted(g.why))), escape(g.question), " ".join(map(str, g.ids)))
            out.print(table)
            return 0
        if args.confirm is not None:
            return 0
        recent = await journal.recent(args.limit)
    if args.json:
        print(json.dumps({"questions": [
            {"id": r.id, "created": r.created, "kind": r.kind, "question": r.question, "mode": r.mode,
             "abstained": r.abstained, "citations": list(r.citations), "asker": r.asker} for r in recent
        ]}, ensure_ascii=False))
        return 0
    table = Table(title="questions asked, newest first", title_justify="left")
    for col in ("id", "when", "who", "question", "mode", "cited"):
        table.add_column(col)
    for r in recent:
        table.add_row(str(r.id), r.created, escape(r.asker), escape(r.question), r.mode,
                      escape(", ".join(dict.fromkeys(c["label"] for c in r.citations))))
    out.print(table)
    return 0


async def ensure_index(index: Index, *, quiet: bool) -> None:
    """Ingest when the index is missing, or no ingest finished into it (stopped, failed): a question
    is never answered from nothing."""
    if index.settings.sqlite_path.exists() and await is_indexed(index):
        return
    if not quiet:
        console.print(f"no index in {escape(str(index.settings.data_dir))}: ingesting "
                      f"{escape(str(index.settings.notes_dir))} first", soft_wrap=True)
    await ingest(index, by="the command line")


# ---------------------------------------------------------------------------------------------
# eval


async def cmd_eval(args: argparse.Namespace) -> int:
    bank_path = Path(args.bank)
    questions = load_bank(bank_path)
    overrides: dict[str, Any] = {}
    notes = Path(args.notes) if args.notes else _bank_notes(bank_path)
    if notes:
        overrides["notes_dir"] = notes
    campaign = one_campaign(campaign_settings(args, overrides_apply=False))
    base = campaign.model_copy(update=overrides)
    if args.data:
        overrides["data_dir"] = Path(args.data)
    elif notes:  # one index per corpus, so evaluating several never thrashes one index
        overrides["data_dir"] = base.data_dir / "eval" / _slug(notes)
    settings = campaign.model_copy(update=overrides)
    bars = _Bars(enabled=not args.json and console.is_terminal)
    async with Index(settings) as index:
        if settings.sqlite_path.exists():
            built_from = (await (await index.store()).meta()).get("notes_dir")
            if built_from and Path(built_from) != settings.notes_dir.resolve():  # say so: it is not an update
                console.print(f"the index in {settings.data_dir} was built from {built_from}; "
                              f"indexing {settings.notes_dir} into it instead", soft_wrap=True)
        with bars.progress:
            await ingest(index, progress=bars, by="oracle eval")
        if args.answers:
            result = await run_answers(Oracle(index), questions, gm=args.gm)
        else:
            result = await run_eval(Oracle(index), questions, gm=args.gm, k=args.k or settings.k)
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


def print_eval(result: dict, k: int) -> None:
    rows = [
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
        misses = Table(title="misses: where the evidence was lost", title_justify="left")
        for col in ("id", "kind", "question", "lost"):
            misses.add_column(col)
        for m in result["misses"]:
            lost = ", ".join(f"{entry} at {stage}" for entry, stage in m["lost"].items())
            misses.add_row(escape(str(m["id"])), m["kind"], escape(snippet(m["question"], 60)), escape(lost))
        out.print(misses)


def print_answers(result: dict) -> None:
    def cell(value: float | None) -> str:
        return "—" if value is None else f"{value:.3f}"

    def spread(values: dict | None) -> str:
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


# ---------------------------------------------------------------------------------------------
# visibility


async def cmd_visibility(args: argparse.Namespace) -> int:
    """Who reads each note and each hidden passage, with the rule; `--players`: the notes as players
    read them. Reads the notes folder only: no index, no Ollama."""
    settings = build_settings(args)
    report = note_visibility(settings, args.paths, players_text=args.players)
    if args.players:
        readable = [n for n in report.notes if n.players]
        if args.json:
            print(json.dumps({"notes_dir": report.notes_dir, "notes": [{"path": n.path, "text": n.text} for n in readable]},
                             ensure_ascii=False))
            return 0
        for n in readable:
            out.rule(f"[bold]{escape(n.path)}[/]", align="left")
            out.print(players_view(n.text or ""), markup=False, highlight=False, soft_wrap=True)
        out.print(f"{_many(len(readable), 'note')} players read", highlight=False)
        return 0
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False))
        return 0
    print_visibility(report)
    return 0


def print_visibility(report: VisibilityReport) -> None:
    out.print(f"[bold]notes[/] {escape(report.notes_dir)}: {escape(report.policy)}", soft_wrap=True, highlight=False)
    width = min(max((len(n.path) for n in (*report.notes, *report.skipped)), default=0), 60)
    for n in report.notes:
        reader = "[green]players[/]" if n.players else "[magenta]GM[/]     "
        rule = escape(n.rule) if n.rule else "[dim]no rule keeps it from players[/]"
        out.print(f"{escape(n.path.ljust(width))}  {reader}  {rule}", soft_wrap=True, highlight=False)
        for h in n.hidden:
            lines = f"line {h.start_line}" if h.start_line == h.end_line else f"lines {h.start_line}–{h.end_line}"
            out.print(f"    {lines}  {escape(h.rule)}", soft_wrap=True, highlight=False)
        for w in n.warnings:
            out.print(f"    [yellow]warning[/] {escape(w)}", soft_wrap=True, highlight=False)
    for s in report.skipped:
        out.print(f"{escape(s.path.ljust(width))}  [red]skipped[/]  {escape(s.reason)}", soft_wrap=True, highlight=False)
    for u in report.unmatched:
        out.print(f"[yellow]policy[/] {escape(u)}", soft_wrap=True, highlight=False)
    count = (f"{_many(len(report.notes), 'note')}: {report.players} read by players, {report.game_master} "
             f"game-master-only, {_many(report.hidden, 'hidden passage')}")
    if report.skipped:
        count += f"; {_many(len(report.skipped), 'file')} skipped"
    out.print(count, highlight=False)


def _many(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


# ---------------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="oracle", description="Answers questions from a campaign's notes.")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser, notes: bool = True) -> None:
        sp.add_argument("--campaign", help="the campaign of ORACLE_CAMPAIGNS to work on (without the file: default)")
        if notes:
            sp.add_argument("--notes", help="the notes folder (default: ORACLE_NOTES_DIR or ./notes)")
        sp.add_argument("--data", help="where the index lives (default: ORACLE_DATA_DIR or ./var)")
        sp.add_argument("--json", action="store_true", help="print one JSON object")

    common(sub.add_parser("ingest", help="index the notes folder (only what changed; every campaign without --campaign)"))
    watch = sub.add_parser("watch", help="reingest by itself whenever the notes change and then stay quiet")
    common(watch)
    watch.add_argument("--quiet", type=_seconds, help="seconds of quiet before a reingest (default: ORACLE_WATCH_QUIET, 60)")
    watch.add_argument("--no-catch-up", action="store_true", help="do not ingest once at the start")
    status = sub.add_parser("status", help="what is indexed and whether Ollama answers, as players (or --gm) read it")
    common(status, notes=False)
    status.add_argument("--gm", action="store_true",
                        help="the game master's status: GM-only counts, Ollama's host, the policy, withheld answers")

    search = sub.add_parser("search", help="retrieval only: what each path found and the fused order")
    search.add_argument("question")
    common(search)
    search.add_argument("--gm", action="store_true", help="include game-master-only notes")
    search.add_argument("--history", action="append", default=[], help="an earlier question of the thread (repeatable)")
    search.add_argument("--k", type=int, help="results per path shown, and the final k")

    ask = sub.add_parser("ask", help="answer a question from the notes, with sources")
    ask.add_argument("question")
    common(ask)
    ask.add_argument("--gm", action="store_true", help="include game-master-only notes")
    ask.add_argument("--history", action="append", default=[], help="an earlier question of the thread (repeatable)")
    ask.add_argument("--trace", action="store_true", help="print every stage's ranked ids, scores and timings")

    who = sub.add_parser("who", help="the Compendium dossier of a name, as players (or --gm) see it")
    who.add_argument("name")
    common(who)
    who.add_argument("--gm", action="store_true", help="the game master's dossier, secret names included")

    evaluate = sub.add_parser("eval", help="retrieval quality per stage, or the answers, from a question bank")
    evaluate.add_argument("bank", help="a JSON Lines bank (see README)")
    common(evaluate)
    evaluate.add_argument("--gm", action="store_true", help="evaluate with game-master clearance")
    evaluate.add_argument("--k", type=int, help="the final k (default ORACLE_K, 8)")
    evaluate.add_argument("--answers", action="store_true",
                          help="ask every question end to end and measure the answers (needs Ollama for `llm` answers)")

    recap = sub.add_parser("recap", help="\"previously on…\": the last session (or SESSION) retold for players")
    recap.add_argument("session", nargs="?", help="a session number or a word of its title (default: the last)")
    common(recap)
    recap.add_argument("--gm", action="store_true", help="retell it with game-master-only notes")

    questions = sub.add_parser("questions", help="the questions asked in Discord: unanswered ones, a bank of them")
    common(questions, notes=False)
    questions.add_argument("--unanswered", action="store_true",
                           help="what the notes could not answer (and 👎 answers), grouped, newest first")
    questions.add_argument("--bank", metavar="FILE", help="write the confirmed questions as an evaluation bank")
    questions.add_argument("--confirm", type=int, metavar="ID", help="confirm the sources of question ID")
    questions.add_argument("--label", action="append", default=[],
                           help="with --confirm: a gold source label (repeatable; none: the notes do not hold it)")
    questions.add_argument("--limit", type=int, default=50, help="how many rows (default 50)")

    visibility = sub.add_parser("visibility", help="who reads each note and each hidden passage, and the rule that decided")
    visibility.add_argument("paths", nargs="*", metavar="PATH",
                            help="only these files or folders (relative to the notes folder, or inside it)")
    common(visibility)
    visibility.add_argument("--players", action="store_true",
                            help="print the notes as players read them (--json: their text, line for line)")
    return p


COMMANDS: dict[str, Callable[[argparse.Namespace], Coroutine[Any, Any, int]]] = {
    "ingest": cmd_ingest,
    "watch": cmd_watch,
    "status": cmd_status,
    "search": cmd_search,
    "ask": cmd_ask,
    "who": cmd_who,
    "eval": cmd_eval,
    "recap": cmd_recap,
    "questions": cmd_questions,
    "visibility": cmd_visibility,
}


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text}")
    return value


class Stopped(KeyboardInterrupt):
    """SIGTERM (systemd stopping a unit, `kill`): unwound like Ctrl-C, so open indexes are closed."""


def _stop(signum: int, frame: object) -> None:
    raise Stopped


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        return asyncio.run(COMMANDS[args.command](args))
    except DOMAIN_ERRORS as exc:
        console.print(f"[red]oracle {args.command}:[/] {escape(str(exc))}", soft_wrap=True)
        return 1
    except ValidationError as exc:
        console.print(f"[red]oracle {args.command}:[/] a setting is wrong: {escape(settings_problem(exc))}", soft_wrap=True)
        return 2
    except KeyboardInterrupt as exc:
        what = "stopped" if isinstance(exc, Stopped) else "interrupted"
        if args.command == "watch":
            console.print(f"[red]{what}[/]: no longer watching (a reingest cut short leaves the previous index served)")
        else:
            console.print(f"[red]{what}[/]: the previous index is still served; run the command again")
        return 143 if isinstance(exc, Stopped) else 130
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())

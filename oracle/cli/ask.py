"""`oracle search`, `oracle ask`, `oracle recap` and `oracle questions`: questions, as players (or --gm) ask them."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from ..answer.prompt import Turn
from ..answer.results import Answer
from ..journal import Journal
from ..oracle import Oracle
from ..retrieve.retrieval import Hit
from ..texts import texts
from ..types import Clearance
from .common import asked, build_settings, campaign_index, console, ensure_index, out, snippet


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
    asked(args.question)
    async with campaign_index(args) as index:
        settings = index.settings
        await ensure_index(index, quiet=args.json)
        retrieval = await Oracle(index).search(args.question, history=args.history, clearance=Clearance.of(args.gm), k=args.k)
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
    asked(args.question)
    async with campaign_index(args) as index:
        await ensure_index(index, quiet=args.json)
        oracle = Oracle(index)

        async def show_stage(name: str) -> None:
            if not args.json:
                console.print(f"[dim]{name}…[/]")

        stream = _Stream()
        show_text = stream
        history = [Turn("user", h) for h in args.history]
        answer = await oracle.ask(
            args.question, history=history, clearance=Clearance.of(args.gm), on_stage=show_stage,
            on_text=None if args.json else show_text,
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
        out.print(texts(answer.language).passages_title, style="yellow bold", markup=False)
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
    async with campaign_index(args) as index:
        await ensure_index(index, quiet=args.json)
        stream = _Stream()
        answer = await Oracle(index).recap(args.session, clearance=Clearance.of(args.gm), on_text=None if args.json else stream)
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
                table.add_row(
                    str(g.asked), g.last, escape(", ".join(sorted(g.why))), escape(g.question), " ".join(map(str, g.ids))
                )
            out.print(table)
            return 0
        if args.confirm is not None:
            return 0
        recent = await journal.recent(args.limit)
    if args.json:
        print(json.dumps({"questions": [
            {"id": r.id, "created": r.created, "kind": r.kind, "question": r.question, "mode": r.mode,
             "abstained": r.abstained, "citations": [c.to_json() for c in r.citations], "asker": r.asker} for r in recent
        ]}, ensure_ascii=False))
        return 0
    table = Table(title="questions asked, newest first", title_justify="left")
    for col in ("id", "when", "who", "question", "mode", "cited"):
        table.add_column(col)
    for r in recent:
        table.add_row(str(r.id), r.created, escape(r.asker), escape(r.question), r.mode,
                      escape(", ".join(dict.fromkeys(c.label for c in r.citations))))
    out.print(table)
    return 0

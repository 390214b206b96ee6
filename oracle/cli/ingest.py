"""`oracle ingest` and `oracle watch`: index the notes, once or whenever they change."""
from __future__ import annotations

import argparse
import json
from typing import Any

from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from ..campaigns import Campaign
from ..errors import OracleError
from ..index.ingest import ingest
from ..index.lock import IngestBusy
from ..index.report import VaultReport
from ..index.status import is_indexed
from ..types import INGEST_STAGES, IngestProgress, IngestReport
from ..watch import WatchError, watch_campaigns
from .common import chosen, console, out

_STARTING = {"scan": "reading the notes in", "embed": "embedding windows", "commit": "writing the index",
             "annotate": "annotating passages"}


class IngestBars:
    """Progress bars for files, windows embedded and annotations, on stderr; on a stderr that is no
    terminal (a log, a pipe), one line as each stage starts, with how much it has to do."""

    def __init__(self, enabled: bool, *, lines: bool = False) -> None:
        self.lines = lines and not enabled
        self.progress = Progress(
            TextColumn("{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[detail]}"),
            console=console,
            disable=not enabled,
        )
        self.tasks: dict[str, TaskID] = {}

    def __call__(self, event: IngestProgress) -> None:
        if event.stage == "done":
            return
        task = self.tasks.get(event.stage)
        if task is None and self.lines:
            count = f": {event.total:,}" if event.total else ""
            console.print(f"{_STARTING.get(event.stage, event.stage)}{count}{' ' + event.detail if event.detail else ''}",
                          soft_wrap=True, markup=False)
        if task is None:
            task = self.progress.add_task(INGEST_STAGES[event.stage], total=event.total or None, detail="")
            self.tasks[event.stage] = task
        self.progress.update(task, completed=event.done, total=event.total or None, detail=event.detail[:40])


async def cmd_ingest(args: argparse.Namespace) -> int:
    """The chosen campaign, or every campaign of ORACLE_CAMPAIGNS in turn. With --if-idle, a campaign
    another ingest is indexing (the bot's /oracle reingest) is skipped, said, and not a failure: the
    timer's next run catches up."""
    reports: dict[str, dict[str, Any]] = {}
    async with chosen(args).library() as library:
        indexes = library.indexes()
        for name, index in indexes.items():
            if len(indexes) > 1 and not args.json:
                out.print(f"[bold]campaign {escape(name)}[/] ({escape(str(index.settings.notes_dir))})")
            bars = IngestBars(enabled=not args.json and console.is_terminal, lines=not args.json)
            # What a stop (Ctrl-C, SIGTERM) leaves served: said by `cli.main`.
            args.nothing_indexed = not (index.settings.sqlite_path.exists() and await is_indexed(index))
            try:
                with bars.progress:
                    report = await ingest(index, progress=bars, by="the command line")
            except IngestBusy as exc:
                if not args.if_idle:
                    raise
                reports[name] = {"skipped": str(exc)}
                if not args.json:
                    out.print(f"skipped: {escape(str(exc))}", soft_wrap=True)
                continue
            reports[name] = report.to_json()
            if not args.json:
                print_ingest_report(report)
    if args.json:
        single = next(iter(reports.values())) if len(reports) == 1 else {"campaigns": reports}
        print(json.dumps(single, ensure_ascii=False))
    return 0


async def cmd_watch(args: argparse.Namespace) -> int:
    """Reingest each chosen campaign (every one of ORACLE_CAMPAIGNS by default) whenever its notes
    have changed and then stayed quiet; one summary per reingest. Runs until interrupted."""
    library = chosen(args).library()
    indexes = library.indexes()
    quiet = args.quiet if args.quiet is not None else library.settings.watch_quiet

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
        async def changed(campaign: Campaign, report: IngestReport) -> None:
            await printer(campaign.name)(report)

        async def failed(campaign: Campaign, error: OracleError) -> None:
            await complain(campaign.name)(error)

        # Supervised: a campaign's watch that stops is said and started again, the others go on.
        await watch_campaigns(library, quiet=quiet, on_change=changed, on_error=failed,
                              catch_up=not args.no_catch_up, by="oracle watch")
    finally:
        await library.close()
    return 0


def print_ingest_report(report: IngestReport) -> None:
    table = Table(title="Ingest", show_header=False)
    table.add_row("files added / changed / removed / unchanged",
                  f"{len(report.added)} / {len(report.changed)} / {len(report.removed)} / {report.unchanged}")
    table.add_row("chunks in the index", str(report.chunks))
    table.add_row("windows embedded", str(report.windows_embedded)
                  + (f" ({report.windows_reused} more stored again unchanged)" if report.windows_reused else ""))
    table.add_row("annotations done / missing", f"{report.annotations_done} / {report.annotations_missing}")
    table.add_row("entities", str(report.entities))
    table.add_row("seconds", f"{report.seconds:.1f}")
    out.print(table)
    if report.annotation_note:
        out.print(f"[yellow]annotations:[/] {escape(report.annotation_note)}")
    for s in report.skipped:
        out.print(f"[red]skipped[/] {escape(str(s.path))}: {escape(s.reason)}")
    for s in report.warnings:
        out.print(f"[yellow]note[/] {escape(str(s.path))}: {escape(s.reason)}")
    for path, secrets in report.secrets.items():
        rule = report.rules.get(path, "")
        out.print(f"[magenta]secret[/] {escape(str(path))}: {secret_count(secrets)}" + (f" ({escape(rule)})" if rule else ""))
    print_vault_report(report.vault)


def print_vault_report(report: VaultReport | dict[str, Any]) -> None:
    """What the Oracle made of the notes (`index.report`), a line each."""
    if isinstance(report, dict):
        if not report:
            return
        report = VaultReport.from_json(report)
    out.print("[bold]What the Oracle made of your notes[/]")
    for line in report.lines():
        out.print(escape(line), soft_wrap=True, highlight=False)


def secret_count(secrets: int) -> str:
    """`IngestReport.secrets` as a game master reads it."""
    if secrets < 0:
        return "the whole note is game-master-only"
    return f"{secrets} secret block{'s' if secrets != 1 else ''} kept from players"

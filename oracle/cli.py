"""`oracle …`: the game master's and the measurer's command line.

Human output goes through rich (progress bars, tables); `--json` prints one JSON object for machines.
Domain errors print one line and exit 1, never a traceback.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .annotate import PROMPT_VERSION
from .embed import EmbedError
from .index import Index
from .ingest import IngestBusy, ingest
from .settings import Settings
from .store import Store, StoreError
from .types import IngestReport
from .types import Progress as IngestProgress
from .vectors import VectorStoreError

console = Console(stderr=True)
out = Console()

DOMAIN_ERRORS = (IngestBusy, StoreError, EmbedError, VectorStoreError, FileNotFoundError, PermissionError)


def build_settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    if getattr(args, "notes", None):
        overrides["notes_dir"] = Path(args.notes)
    if getattr(args, "data", None):
        overrides["data_dir"] = Path(args.data)
    return Settings(**overrides)


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
        names = {"scan": "files", "embed": "windows", "commit": "index", "annotate": "annotations"}
        task = self.tasks.get(event.stage)
        if task is None:
            task = self.progress.add_task(names[event.stage], total=event.total or None, detail="")
            self.tasks[event.stage] = task
        self.progress.update(task, completed=event.done, total=event.total or None, detail=event.detail[:40])


async def cmd_ingest(args: argparse.Namespace) -> int:
    settings = build_settings(args)
    bars = _Bars(enabled=not args.json and console.is_terminal)
    async with Index(settings) as index:
        with bars.progress:
            report = await ingest(index, progress=bars, by="the command line")
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False))
    else:
        print_ingest_report(report)
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
        out.print(f"[yellow]annotations:[/] {report.annotation_note}")
    for s in report.skipped:
        out.print(f"[red]skipped[/] {s.path}: {s.reason}")
    for s in report.warnings:
        out.print(f"[yellow]repaired[/] {s.path}: {s.reason}")


# ---------------------------------------------------------------------------------------------
# status


async def cmd_status(args: argparse.Namespace) -> int:
    settings = build_settings(args)
    store = await Store.open(settings.sqlite_path, create=False)
    try:
        stats = await store.stats(settings.model, PROMPT_VERSION)
        meta = await store.meta()
    finally:
        await store.close()
    index = Index(settings)
    reason = await index.llm.probe(settings.ollama_probe_timeout)
    status = {
        **stats,
        "annotation_coverage": round(stats["annotated"] / stats["chunks"], 3) if stats["chunks"] else 0.0,
        "last_ingest": meta.get("last_ingest"),
        "last_ingest_seconds": float(meta["last_ingest_seconds"]) if "last_ingest_seconds" in meta else None,
        "notes_dir": meta.get("notes_dir"),
        "embed_model": meta.get("embed_model", settings.embed_model),
        "model": settings.model,
        "ollama": {"host": settings.ollama_host, "ok": reason is None, "reason": reason},
    }
    if args.json:
        print(json.dumps(status, ensure_ascii=False))
        return 0
    table = Table(title="Oracle index", show_header=False)
    table.add_row("notes", str(status["notes_dir"]))
    table.add_row("files indexed (skipped)", f"{status['files']} ({status['files_skipped']})")
    table.add_row("sessions", str(status["sessions"]))
    kinds = ", ".join(f"{k} {v}" for k, v in status["chunks_by_kind"].items())
    table.add_row("chunks", f"{status['chunks']} ({kinds})")
    gm = status["chunks_by_visibility"].get("gm", 0)
    table.add_row("game-master-only chunks", str(gm))
    table.add_row("dense windows", str(status["windows"]))
    table.add_row("entities", str(status["entities"]))
    table.add_row("annotation coverage", f"{status['annotated']}/{status['chunks']} ({status['annotation_coverage']:.0%})")
    table.add_row("last ingest", f"{status['last_ingest']} ({status['last_ingest_seconds']} s)")
    table.add_row("embedding model", str(status["embed_model"]))
    table.add_row("answer model", settings.model)
    table.add_row("ollama", f"{settings.ollama_host}: " + ("answers" if reason is None else reason))
    out.print(table)
    return 0


# ---------------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="oracle", description="Answers questions from a campaign's notes.")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser, notes: bool = True) -> None:
        if notes:
            sp.add_argument("--notes", help="the notes folder (default: ORACLE_NOTES_DIR or ./notes)")
        sp.add_argument("--data", help="where the index lives (default: ORACLE_DATA_DIR or ./var)")
        sp.add_argument("--json", action="store_true", help="print one JSON object")

    common(sub.add_parser("ingest", help="index the notes folder (only what changed)"))
    common(sub.add_parser("status", help="what is indexed and whether Ollama answers"), notes=False)
    return p


COMMANDS: dict[str, Callable[[argparse.Namespace], Coroutine[Any, Any, int]]] = {
    "ingest": cmd_ingest,
    "status": cmd_status,
}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return asyncio.run(COMMANDS[args.command](args))
    except DOMAIN_ERRORS as exc:
        console.print(f"[red]oracle {args.command}:[/] {exc}")
        return 1
    except KeyboardInterrupt:
        console.print("[red]interrupted[/]: the previous index is still served; run the command again")
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""`oracle status`, `oracle who` and `oracle visibility`: what is indexed, a dossier, who reads what."""
from __future__ import annotations

import argparse
import json

from rich.markup import escape
from rich.table import Table

from ..index.index import Index
from ..index.lock import running
from ..index.status import GMStatus, IndexStatus, index_status, is_indexed
from ..index.store import StoreError
from ..oracle import Oracle
from ..settings import Settings
from ..types import Clearance
from ..visibility import VisibilityReport, note_visibility, players_view, suggest_policy
from .common import _many, asked, build_settings, campaign_index, ensure_index, out
from .ingest import print_vault_report


async def cmd_status(args: argparse.Namespace) -> int:
    """What is indexed and whether the model answers, as a player reads it (`/oracle status`): public
    counts, no host, path or error. With --gm, the game master's: GM-only counts, the Ollama host and
    why it does not answer, the policy of who reads what, the answers withheld from players."""
    settings = build_settings(args)
    _require_index(settings)
    ingesting = running(settings.lock_path)
    async with campaign_index(args) as index:
        await _require_finished_ingest(index, settings, ingesting)
        status = await index_status(index, clearance=Clearance.of(args.gm))
    if args.json:
        print(json.dumps(status.to_json() | {"ingesting": ingesting}, ensure_ascii=False))
        return 0
    table = _status_table(status, ingesting)
    gm = status.gm
    if not gm:
        out.print(table)
        out.print("[dim]The game master's status (GM-only counts, Ollama's host, the policy): oracle status --gm[/]")
        return 0
    table.add_row("answers withheld from players", str(gm.withheld.count))
    out.print(table)
    _print_gm_notices(gm)
    return 0


def _require_index(settings: Settings) -> None:
    """Refuse when no index file exists, saying what to do first."""
    if not settings.sqlite_path.exists():
        if not settings.notes_dir.is_dir():
            raise StoreError(f"no index at {settings.sqlite_path}, and the notes folder {settings.notes_dir} does not "
                             "exist: set ORACLE_NOTES_DIR to your vault, then run `oracle ingest`")
        raise StoreError(f"no index at {settings.sqlite_path}: run `oracle ingest` first")


async def _require_finished_ingest(index: Index, settings: Settings, ingesting: str | None) -> None:
    """Refuse when no ingest has finished into the index yet (the first one still running, or stopped)."""
    if not await is_indexed(index):
        if ingesting:
            raise StoreError(f"the first ingest into {settings.data_dir} is not done yet: {ingesting}")
        raise StoreError(f"no ingest has finished into {settings.data_dir} (one was stopped or failed): "
                         "run `oracle ingest`")


def _status_table(status: IndexStatus, ingesting: str | None) -> Table:
    """The status table: what is indexed, then the models and whether Ollama answers."""
    gm = status.gm
    table = Table(title="Oracle index" if gm else "Oracle index, as players read it", show_header=False)
    if gm:
        table.add_row("notes", escape(str(gm.notes_dir)))
        table.add_row("who reads what", escape(gm.policy))
    _add_index_rows(table, status, ingesting)
    _add_model_rows(table, status)
    return table


def _add_index_rows(table: Table, status: IndexStatus, ingesting: str | None) -> None:
    """Add the rows of what is indexed: files, sessions, chunks, Compendium, annotations, last ingest."""
    stats = status.stats
    table.add_row("files indexed (skipped)", f"{stats.files} ({stats.files_skipped})")
    if stats.gm:
        table.add_row("sessions (players can read / game-master-only)", f"{stats.sessions} / {stats.gm.sessions_gm_only}")
    else:
        numbers = stats.session_numbers
        table.add_row("sessions", f"{stats.sessions} (numbered {numbers})" if numbers else str(stats.sessions))
    kinds = ", ".join(f"{k} {v}" for k, v in stats.chunks_by_kind.items())
    table.add_row("chunks", f"{stats.chunks} ({kinds})")
    if stats.gm:
        table.add_row("game-master-only chunks", str(stats.gm.chunks_by_visibility.get("gm", 0)))
        table.add_row("dense windows", str(stats.gm.windows))
        table.add_row("Compendium entries (players / game master)", f"{stats.entities} / {stats.gm.entities_gm}")
    else:
        table.add_row("Compendium entries", str(stats.entities))
    table.add_row("annotation coverage", f"{stats.annotated}/{stats.chunks} ({status.annotation_coverage:.0%})")
    table.add_row("last ingest", f"{status.last_ingest} ({status.last_ingest_seconds} s)")
    if ingesting:
        table.add_row("now", escape(ingesting))


def _add_model_rows(table: Table, status: IndexStatus) -> None:
    """Add the rows of the models: the notes' language, both models, Ollama, the context window."""
    if status.language:
        table.add_row("language of the notes", escape(status.language_line()))
    table.add_row("embedding model", escape(str(status.embed_model)))
    table.add_row("answer model", escape(str(status.model)))
    reach = status.ollama
    table.add_row("ollama", escape(f"{reach.host}: {reach.said()}" if status.gm else reach.said()))
    table.add_row("context window", escape(status.context.describe()))
    table.add_row("model loaded", escape(status.model_loaded.describe()))


def _print_gm_notices(gm: GMStatus) -> None:
    """Print what only the game master reads under the table: withheld answers, a stale policy, the vault report."""
    for event in gm.withheld.last:
        seen = f"{event.at}: {event.question!r} ({event.reason})"
        out.print(f"[yellow]withheld[/] {escape(seen)}")
    if not gm.policy_current:
        out.print(f"[red]policy[/] the index was built under “{escape(gm.built_under or 'an older policy')}”; "
                  f"this process's is “{escape(gm.policy)}”: players are refused until `oracle ingest` runs again",
                  soft_wrap=True, highlight=False)
    if gm.vault is not None:
        print_vault_report(gm.vault)


async def cmd_who(args: argparse.Namespace) -> int:
    """The dossier `/oracle who` shows, as a player sees it (or, with --gm, as the game master). A
    name the Compendium lacks is an honest answer (exit 0), as "the notes hold nothing on that" is."""
    asked(args.name, "name")
    async with campaign_index(args) as index:
        await ensure_index(index, quiet=args.json)
        oracle = Oracle(index)
        dossier = await oracle.dossiers.who(args.name, clearance=Clearance.of(args.gm))
        suggestions = (
            [] if dossier is not None else await oracle.dossiers.names(args.name, clearance=Clearance.of(args.gm), limit=10)
        )
    if args.json:
        print(json.dumps({"dossier": dossier.to_json() if dossier else None, "suggestions": suggestions},
                         ensure_ascii=False))
        return 0
    if dossier is None:
        out.print(f"The Compendium has no entry for “{args.name}”.", markup=False)
        if suggestions:
            out.print("Names that start like it: " + ", ".join(suggestions), markup=False)
        return 0
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


async def cmd_visibility(args: argparse.Namespace) -> int:
    """Who reads each note and each hidden passage, with the rule; `--players`: the notes as players
    read them. Reads the notes folder only: no index, no Ollama."""
    settings = build_settings(args)
    if args.suggest:
        suggestion = suggest_policy(settings)
        if args.json:
            print(json.dumps(suggestion.to_json(), ensure_ascii=False))
        else:
            for line in suggestion.lines(str(settings.notes_dir)):
                out.print(line, markup=False, highlight=False, soft_wrap=True)
        return 0
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
    paths = [n.path for n in report.notes] + [s.path for s in report.skipped]
    width = min(max(map(len, paths), default=0), 60)
    for n in report.notes:
        reader = "[green]players[/]" if n.players else "[magenta]GM[/]     "
        rule = escape(n.rule) if n.rule else "[dim]no rule keeps it from players[/]"
        out.print(f"{escape(n.path.ljust(width))}  {reader}  {rule}", soft_wrap=True, highlight=False)
        for h in n.hidden:
            lines = f"line {h.start_line}" if h.start_line == h.end_line else f"lines {h.start_line}–{h.end_line}"
            out.print(f"    {lines}  {escape(h.rule)}", soft_wrap=True, highlight=False)
        for a in n.asides:
            lines = f"line {a.start_line}" if a.start_line == a.end_line else f"lines {a.start_line}–{a.end_line}"
            out.print(f"    {lines}  [dim]{escape(a.rule)}[/]", soft_wrap=True, highlight=False)
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

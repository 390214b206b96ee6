"""`oracle …`: the game master's and the measurer's command line.

Human output goes through rich (progress bars, tables); `--json` prints one JSON object for machines.
Domain errors print one line and exit 1, never a traceback. One module per group of commands:
`ingest` (ingest, watch), `ask` (search, ask, recap, questions), `status` (status, who, visibility),
`measure` (eval), `backup` (backup, restore); `common` holds what they share.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from pydantic import ValidationError
from rich.markup import escape

from ..errors import InputError
from ..settings import settings_problem
from .ask import cmd_ask, cmd_questions, cmd_recap, cmd_search
from .backup import cmd_backup, cmd_restore
from .common import DOMAIN_ERRORS, console
from .ingest import cmd_ingest, cmd_watch
from .measure import cmd_eval
from .status import cmd_status, cmd_visibility, cmd_who


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="oracle", description="Answers questions from a campaign's notes.",
        epilog="Exit status, on every command: 0 for an answer, including an honest \"the notes hold nothing "
               "on that\"; 1 when something failed (Ollama aside: without it the passages are the answer); "
               "2 for bad input or a wrong setting (an empty question, a notes folder that is not one).",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    sub = p.add_subparsers(dest="command", required=True)
    # The helpers add the commands in the order `oracle --help` lists them.
    _add_index_commands(sub)
    _add_question_commands(sub)
    _add_review_commands(sub)
    _add_upkeep_commands(sub)
    return p


def _common(sp: argparse.ArgumentParser, notes: bool = True) -> None:
    """Add the options most commands share: the campaign, the notes folder, the data folder, --json."""
    sp.add_argument("--campaign", help="the campaign of ORACLE_CAMPAIGNS to work on (without the file: default)")
    if notes:
        sp.add_argument("--notes", help="the notes folder (default: ORACLE_NOTES_DIR or ./notes)")
    sp.add_argument("--data", help="where the index lives (default: ORACLE_DATA_DIR or ./var)")
    sp.add_argument("--json", action="store_true", help="print one JSON object")


def _add_index_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `ingest`, `watch` and `status`: build the index, keep it current, say what it holds."""
    ingest_cmd = sub.add_parser("ingest", help="index the notes folder (only what changed; every campaign without --campaign)")
    ingest_cmd.add_argument("--if-idle", action="store_true",
                            help="skip a campaign another ingest is indexing, and exit 0 (for a timer)")
    _common(ingest_cmd)
    watch = sub.add_parser("watch", help="reingest by itself whenever the notes change and then stay quiet")
    _common(watch)
    watch.add_argument("--quiet", type=_seconds, help="seconds of quiet before a reingest (default: ORACLE_WATCH_QUIET, 60)")
    watch.add_argument("--no-catch-up", action="store_true", help="do not ingest once at the start")
    status = sub.add_parser("status", help="what is indexed and whether Ollama answers, as players (or --gm) read it")
    _common(status, notes=False)
    status.add_argument("--gm", action="store_true",
                        help="the game master's status: GM-only counts, Ollama's host, the policy, withheld answers")


def _add_question_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `search`, `ask` and `who`: what the notes say of a question or a name."""
    search = sub.add_parser("search", help="retrieval only: what each path found and the fused order")
    search.add_argument("question")
    _common(search)
    search.add_argument("--gm", action="store_true", help="include game-master-only notes")
    search.add_argument("--history", action="append", default=[], help="an earlier question of the thread (repeatable)")
    search.add_argument("--k", type=int, help="results per path shown, and the final k")

    ask = sub.add_parser("ask", help="answer a question from the notes, with sources")
    ask.add_argument("question")
    _common(ask)
    ask.add_argument("--gm", action="store_true", help="include game-master-only notes")
    ask.add_argument("--history", action="append", default=[], help="an earlier question of the thread (repeatable)")
    ask.add_argument("--trace", action="store_true", help="print every stage's ranked ids, scores and timings")

    who = sub.add_parser("who", help="the Compendium dossier of a name, as players (or --gm) see it")
    who.add_argument("name")
    _common(who)
    who.add_argument("--gm", action="store_true", help="the game master's dossier, secret names included")


def _add_review_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `eval`, `recap` and `questions`: retrieval quality, the last session retold, the questions asked."""
    evaluate = sub.add_parser("eval", help="retrieval quality per stage, or the answers, from a question bank")
    evaluate.add_argument("bank", help="a JSON Lines bank: one {\"question\", \"relevant\": [labels or note paths]} "
                                       "a line (README, \"A question bank\")")
    _common(evaluate)
    evaluate.add_argument("--gm", action="store_true", help="evaluate with game-master clearance")
    evaluate.add_argument("--k", type=int, help="the final k (default ORACLE_K, 8)")
    evaluate.add_argument("--answers", action="store_true",
                          help="ask every question end to end and measure the answers (needs Ollama for `llm` answers)")

    recap = sub.add_parser("recap", help="\"previously on…\": the last session (or SESSION) retold for players")
    recap.add_argument("session", nargs="?", help="a session number or a word of its title (default: the last)")
    _common(recap)
    recap.add_argument("--gm", action="store_true", help="retell it with game-master-only notes")

    questions = sub.add_parser("questions", help="the questions asked in Discord: unanswered ones, a bank of them")
    _common(questions, notes=False)
    questions.add_argument("--unanswered", action="store_true",
                           help="what the notes could not answer (and 👎 answers), grouped, newest first")
    questions.add_argument("--bank", metavar="FILE", help="write the confirmed questions as an evaluation bank")
    questions.add_argument("--confirm", type=int, metavar="ID", help="confirm the sources of question ID")
    questions.add_argument("--label", action="append", default=[],
                           help="with --confirm: a gold source label (repeatable; none: the notes do not hold it)")
    questions.add_argument("--limit", type=int, default=50, help="how many rows (default 50)")


def _add_upkeep_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `visibility`, `backup` and `restore`: who reads each note, and what an ingest cannot rebuild."""
    visibility = sub.add_parser("visibility", help="who reads each note and each hidden passage, and the rule that decided")
    visibility.add_argument("paths", nargs="*", metavar="PATH",
                            help="only these files or folders (relative to the notes folder, or inside it)")
    _common(visibility)
    visibility.add_argument("--suggest", action="store_true",
                            help="propose ORACLE_PLAYER_NOTES / ORACLE_GM_NOTES from the vault's own folders, to check and paste")
    visibility.add_argument("--players", action="store_true",
                            help="print the notes as players read them (--json: their text, line for line)")

    saved = sub.add_parser("backup", help="copy what an ingest cannot rebuild (journals, the bot's threads), safe during play")
    saved.add_argument("to", metavar="FOLDER", help="where the backup folder (oracle-<UTC time>) is made")
    saved.add_argument("--campaign", help="one campaign of ORACLE_CAMPAIGNS (default: every one)")
    saved.add_argument("--index", action="store_true", help="the indexes too (else rebuilt by `oracle ingest`)")
    saved.add_argument("--keep", type=int, default=0, metavar="N", help="leave only the newest N backups in FOLDER")
    saved.add_argument("--json", action="store_true", help="print one JSON object")
    restoring = sub.add_parser("restore", help="put a backup back (made by `oracle backup`)")
    restoring.add_argument("backup", metavar="BACKUP", help="the backup folder (oracle-<UTC time>)")
    restoring.add_argument("--json", action="store_true", help="print one JSON object")


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
    "backup": cmd_backup,
    "restore": cmd_restore,
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
    except InputError as exc:
        console.print(f"[red]oracle {args.command}:[/] {escape(str(exc))}", soft_wrap=True)
        return 2
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
        elif getattr(args, "nothing_indexed", False):
            console.print(f"[red]{what}[/]: nothing was indexed yet; run the command again")
        else:
            console.print(f"[red]{what}[/]: the previous index is still served; run the command again")
        return 143 if isinstance(exc, Stopped) else 130
    finally:
        signal.signal(signal.SIGTERM, previous)


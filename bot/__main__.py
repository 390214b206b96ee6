"""`python -m bot`: open every campaign's index once, then run the Discord client until stopped."""
from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping

import discord
from pydantic import ValidationError

from oracle import (
    SWITCH_INTERVAL,
    Campaigns,
    Index,
    Library,
    OracleError,
    Settings,
    VectorStoreUnreachable,
    is_indexed,
    settings_problem,
)

from .client import OracleBot
from .history import ThreadHistory
from .places import Places
from .settings import BotSettings
from .startup import StartupError
from .tables import Tables, open_table

log = logging.getLogger("bot")

FIRST_PAUSE, LAST_PAUSE = 2.0, 300.0  # seconds between tries to reach Discord


async def run(settings: Settings, bot_settings: BotSettings) -> int:
    token = bot_settings.token.get_secret_value()
    if not token:
        log.error("DISCORD_TOKEN is not set: put it in .env or the environment (see .env.example)")
        return 2
    read = _campaigns(settings)
    if read is None:
        return 2
    campaigns, places = read
    stop = _stop_on_signals()
    try:
        library = await Library.open(settings, campaigns)
    except OracleError as exc:
        log.error("%s", exc)
        return 2
    async with library:
        tables = []
        for campaign in campaigns:
            index = library.index(campaign)
            code = await _ready_index(campaign.name, index, stop)
            if code is not None:
                return code
            default_announce = bot_settings.announce_channel if campaigns.is_single else None
            tables.append(await open_table(campaign, places[campaign.name], index, default_announce=default_announce))
        _settle_for_serving()
        history = await ThreadHistory.open(settings.threads_path)
        try:
            return await connect(
                lambda message_content: OracleBot(
                    settings=bot_settings, tables=Tables(places, tables, bot_settings), history=history,
                    library=library, watch=settings.watch, message_content=message_content,
                ),
                token, stop, bot_settings.stop_seconds,
            )
        finally:
            await history.close()
            for table in tables:
                await table.journal.close()


def _campaigns(settings: Settings) -> tuple[Campaigns, Places] | None:
    """The campaigns and their places on Discord, read and each notes folder checked: None (the
    problem logged) when one is wrong."""
    try:
        # A bad campaigns file stops here, naming the line, before anything is loaded or connected.
        campaigns = Campaigns.from_settings(settings)
        places = Places.of(campaigns)
    except OracleError as exc:
        log.error("%s", exc)
        return None
    for campaign in campaigns:
        if not campaign.notes.is_dir():
            where = "" if campaigns.is_single else f" of campaign {campaign.name}"
            log.error("the notes folder %s%s does not exist: set ORACLE_NOTES_DIR (or the campaign's notes) to "
                      "your vault", campaign.notes, where)
            return None
    return campaigns, places


def _stop_on_signals() -> asyncio.Event:
    """An event that SIGTERM and SIGINT (Ctrl-C) set."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return stop


async def _ready_index(name: str, index: Index, stop: asyncio.Event) -> int | None:
    """A campaign's stores opened and its index checked: the exit code when the bot cannot go on, else None."""
    try:
        # Open both stores before the gateway connects: a broken index is reported once,
        # with what to run, instead of failing every question.
        if not await _open_stores(name, index, stop):
            return 0  # stopped while waiting for the Chroma server
    except OracleError as exc:
        log.error("campaign %s: %s", name, exc)
        return 2
    await check_index(name, index)
    return None


async def check_index(name: str, index: Index) -> None:
    """Log an index that cannot answer players yet (empty, or built under another policy), or answers them
    with fewer matches than it should (its keyword copies written by another stemmer)."""
    if not await is_indexed(index):
        # The bot still starts, so a game master can run /oracle reingest; every question says so.
        log.error(
            "the index of campaign %s at %s is empty: nothing has been ingested from %s. Run `oracle ingest`, "
            "or /oracle reingest as a game master, before players ask.",
            name, index.settings.data_dir, index.settings.notes_dir,
        )
    elif (await index.built_under())[0] != index.settings.policy.key:
        log.warning(
            "the index of campaign %s was built under another policy of who reads what (%s) than this "
            "bot's (%s): players are refused until /oracle reingest (or `oracle ingest`) runs.",
            name, (await index.built_under())[1] or "an earlier release's", index.settings.policy.describe(),
        )
    elif not await index.stemmer_current():
        log.warning(
            "the keyword index of campaign %s was written by another stemmer than this release's: a word in "
            "another form is missed until /oracle reingest (or `oracle ingest`) runs.", name,
        )


def _settle_for_serving() -> None:
    """Ready the process for serving: what start-up loaded frozen out of collection, a shorter switch interval."""
    # torch, transformers and chromadb leave ~500k tracked objects: a full collection walks them
    # all holding the GIL (measured with `bench.load`: docs/decisions.md) and stalls the gateway heartbeat.
    # Frozen, they are never walked again.
    gc.collect()
    gc.freeze()
    sys.setswitchinterval(SWITCH_INTERVAL)  # the loop waits less for threads' interpreter lock


async def _open_stores(name: str, index: Index, stop: asyncio.Event) -> bool:
    """The campaign's stores, opened; a Chroma server that does not answer yet (starting at boot as
    the bot does) is waited for, a pause that doubles up to five minutes between tries. False when
    `stop` came first."""
    pause = FIRST_PAUSE
    while True:
        try:
            await index.vectors()
            return True
        except VectorStoreUnreachable as exc:
            log.error("campaign %s: %s: trying again in %.0f s", name, exc, pause)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), pause)
        if stop.is_set():
            return False
        pause = min(pause * 2, LAST_PAUSE)


async def connect(make: Callable[[bool], OracleBot], token: str, stop: asyncio.Event, grace: float) -> int:
    """Run the client until `stop` (SIGTERM, Ctrl-C): 0 then. Without the Message Content intent, again
    without it; Discord unreachable, again after a pause that doubles up to five minutes; a refusal
    that retrying cannot mend, 2."""
    message_content, pause = True, FIRST_PAUSE
    while not stop.is_set():
        bot = make(message_content)
        try:
            async with bot:
                await _until_stopped(bot, bot.start(token), stop, grace)
            return 0
        except discord.PrivilegedIntentsRequired:
            log.warning(
                "the Message Content intent is not enabled for this application: follow-ups in threads "
                "are answered only when the bot is mentioned (enable it in the Developer Portal)"
            )
            message_content = False
        except discord.LoginFailure:
            log.error("Discord refused the token (DISCORD_TOKEN): check it in the Developer Portal")
            return 2
        except StartupError as exc:
            log.error("%s", exc)
            return 2
        except (TimeoutError, OSError, discord.GatewayNotFound, discord.DiscordServerError) as exc:
            log.error("cannot reach Discord (%s): trying again in %.0f s", _reason(exc), pause)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), pause)
            pause = min(pause * 2, LAST_PAUSE)
    return 0


async def _until_stopped(bot: OracleBot, running: Awaitable[None], stop: asyncio.Event, grace: float) -> None:
    """Run `bot.start(...)` until it ends or `stop` is set; on stop, a clean shutdown (questions under
    way finish or are told, then the gateway is closed with a close frame)."""
    task = asyncio.ensure_future(running)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([task, stopping], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if task.done():
        task.result()  # raises what ended it
        return
    await bot.shutdown(grace)
    await task


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


# The HTTP clients' INFO line for every request (each Ollama call, each Discord call) says nothing the
# Oracle's own lines do not; their warnings and errors still show.
QUIET = ("httpx", "httpcore")


def log_format(environ: Mapping[str, str]) -> str:
    """Each line's layout: under systemd (JOURNAL_STREAM is set) the journal stamps every line with its
    time, so the line carries none of its own."""
    stamp = "" if environ.get("JOURNAL_STREAM") else "%(asctime)s "
    return stamp + "%(levelname)s %(name)s: %(message)s"


def configure_logging(environ: Mapping[str, str] = os.environ) -> None:
    logging.basicConfig(level=logging.INFO, format=log_format(environ))
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)


def main() -> int:
    configure_logging()
    try:
        settings, bot_settings = Settings(), BotSettings()
    except ValidationError as exc:
        # Exit status 2: systemd does not restart into the same mistake (RestartPreventExitStatus=2).
        log.error("a setting is wrong: %s", settings_problem(exc))
        return 2
    try:
        return asyncio.run(run(settings, bot_settings))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())

"""`python -m bot`: open every campaign's index once, then run the Discord client until stopped."""
from __future__ import annotations

import asyncio
import gc
import logging
import sys

import discord
from pydantic import ValidationError

from oracle.campaigns import Campaigns
from oracle.errors import OracleError
from oracle.index.library import Library
from oracle.index.seam import SWITCH_INTERVAL
from oracle.index.status import is_indexed
from oracle.settings import Settings, settings_problem

from .client import OracleBot
from .history import ThreadHistory
from .settings import BotSettings
from .tables import Tables, open_table

log = logging.getLogger("bot")


async def run(settings: Settings, bot_settings: BotSettings) -> int:
    token = bot_settings.token.get_secret_value()
    if not token:
        log.error("DISCORD_TOKEN is not set: put it in .env or the environment (see .env.example)")
        return 2
    try:
        # A bad campaigns file stops here, naming the line, before anything is loaded or connected.
        campaigns = Campaigns.from_settings(settings)
        library = await Library.open(settings, campaigns)
    except OracleError as exc:
        log.error("%s", exc)
        return 2
    async with library:
        tables = []
        for campaign in campaigns:
            index = library.index(campaign)
            try:
                # Open both stores before the gateway connects: a broken index is reported once,
                # with what to run, instead of failing every question.
                await index.vectors()
            except OracleError as exc:
                log.error("campaign %s: %s", campaign.name, exc)
                return 2
            if not await is_indexed(index):
                # The bot still starts, so a game master can run /oracle reingest; every question says so.
                log.error(
                    "the index of campaign %s at %s is empty: nothing has been ingested from %s. Run `oracle ingest`, "
                    "or /oracle reingest as a game master, before players ask.",
                    campaign.name, index.settings.data_dir, index.settings.notes_dir,
                )
            default_announce = bot_settings.announce_channel if campaigns.is_single else None
            tables.append(await open_table(campaign, index, default_announce=default_announce))
        # torch, transformers and chromadb leave ~500k tracked objects: a full collection walks them
        # all holding the GIL (300+ ms, measured by bench/load.py) and stalls the gateway heartbeat.
        # Frozen, they are never walked again.
        gc.collect()
        gc.freeze()
        sys.setswitchinterval(SWITCH_INTERVAL)  # the loop waits less for threads' interpreter lock
        history = await ThreadHistory.open(settings.data_dir / "bot.sqlite3")
        try:
            for message_content in (True, False):
                bot = OracleBot(settings=bot_settings, tables=Tables(campaigns, tables, bot_settings), history=history,
                                library=library, watch=settings.watch, message_content=message_content)
                try:
                    async with bot:
                        await bot.start(token)
                    return 0
                except discord.PrivilegedIntentsRequired:
                    log.warning(
                        "the Message Content intent is not enabled for this application: follow-ups in threads "
                        "are answered only when the bot is mentioned (enable it in the Developer Portal)"
                    )
                except discord.LoginFailure:
                    log.error("Discord refused the token (DISCORD_TOKEN): check it in the Developer Portal")
                    return 2
        finally:
            await history.close()
            for table in tables:
                await table.journal.close()
    return 1


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
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

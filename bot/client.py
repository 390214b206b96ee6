"""The discord.py client: resources come in from `main()`, commands come from the cog."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

import discord
from discord.ext import commands

from oracle import Campaign, IngestReport, Library, OracleError, Watching, watch_campaigns

from .cog import OracleCog, announce
from .errors import report_failure
from .history import ThreadHistory
from .questions import Questions
from .settings import BotSettings
from .startup import sync_commands_if_changed, warn_about_places
from .tables import Tables
from .views import DYNAMIC_ITEMS

log = logging.getLogger(__name__)


def make_intents(message_content: bool) -> discord.Intents:
    intents = discord.Intents.default()
    intents.message_content = message_content  # privileged: needed to read replies in threads
    return intents


class OracleBot(commands.Bot):
    def __init__(
        self,
        *,
        settings: BotSettings,
        tables: Tables,
        history: ThreadHistory,
        library: Library | None = None,
        watch: bool = False,
        message_content: bool = True,
        **options: Any,  # passed on to discord.py's Bot as they are
    ) -> None:
        """`library` (an `oracle.index.library.Library` over the same campaigns) and `watch`: reingest
        each campaign by itself when its notes change (ORACLE_WATCH)."""
        super().__init__(
            command_prefix=commands.when_mentioned,
            intents=make_intents(message_content),
            allowed_mentions=discord.AllowedMentions.none(),  # an answer never pings anyone
            help_command=None,
            **options,
        )
        self.settings = settings
        self.tables = tables
        self.history = history
        self.library = library
        self.watch = watch
        self.watching: dict[str, Watching] = {}  # each campaign's watch, for the game master's status
        self.background: list[asyncio.Task[None]] = []
        self.warming: asyncio.Task[None] | None = None
        self.questions = Questions(settings.max_questions)
        self.checked_places = False

    async def setup_hook(self) -> None:
        # The model loads (10-60 s for a 14B model) while the gateway connects, not on the first question.
        self.warming = asyncio.create_task(self.warm_models())
        self.background.append(self.warming)
        await self.add_cog(OracleCog(self))
        # The answers' buttons, matched by their custom ids: clicks on answers an earlier process posted work.
        self.add_dynamic_items(*DYNAMIC_ITEMS)
        if self.watch and self.library is not None:
            self.background.append(asyncio.create_task(self.watch_notes()))
        self.tree.error(report_failure)  # every failed command gets one sentence, not "This interaction failed"
        synced = await sync_commands_if_changed(self, self.settings.guild_id)
        if synced is None:
            log.info("the application commands are as last registered: not synced again")
        else:
            log.info("synced %d application commands", synced)

    async def warm_models(self) -> None:
        for llm in {id(t.index.llm): t.index.llm for t in self.tables}.values():
            reason = await llm.load()
            if reason is None:
                log.info("model %s loaded", llm.model)
            else:
                log.warning("could not load the model at startup (%s): the first question will wait for it", reason)

    async def watch_notes(self) -> None:
        """ORACLE_WATCH: each campaign reingested once its notes have been quiet; players told what is new."""

        async def changed(campaign: Campaign, report: IngestReport) -> None:
            table = self.tables.get(campaign.name)
            if table is not None:
                await announce(self, table)

        async def failed(campaign: Campaign, error: OracleError) -> None:
            log.error("reingesting campaign %s after its notes changed failed: %s", campaign.name, error)

        if self.library is None:  # started only with a library (`setup_hook`)
            return
        # Catching up first: notes edited while the bot was down are not left for the next change.
        await watch_campaigns(self.library, on_change=changed, on_error=failed, catch_up=True, states=self.watching)

    async def shutdown(self, grace: float) -> None:
        """A clean stop: no new question, those under way `grace` seconds to finish (the rest told to
        ask again), then the gateway closed with a close frame."""
        await self.questions.stop(grace)
        await self.close()

    async def close(self) -> None:
        for task in self.background:
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        await super().close()

    async def on_message(self, message: discord.Message) -> None:
        """No prefix commands: thread follow-ups are the cog's listener, and a mention must not be
        read as an unknown command."""

    async def on_ready(self) -> None:
        log.info("ready as %s in %d servers", self.user, len(self.guilds))
        if not self.checked_places:  # on_ready comes again after a reconnection
            self.checked_places = True
            warn_about_places(self)

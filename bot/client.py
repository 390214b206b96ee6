"""The discord.py client: resources come in from `main()`, commands come from the cog."""
from __future__ import annotations

import asyncio
import logging

import discord
from discord.ext import commands

from oracle.index.index import Index
from oracle.journal import Journal
from oracle.oracle import Oracle

from .cog import OracleCog
from .history import ThreadHistory
from .settings import BotSettings
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
        index: Index,
        oracle: Oracle,
        history: ThreadHistory,
        journal: Journal,
        message_content: bool = True,
        **options: object,
    ) -> None:
        super().__init__(
            command_prefix=commands.when_mentioned,
            intents=make_intents(message_content),
            allowed_mentions=discord.AllowedMentions.none(),  # an answer never pings anyone
            help_command=None,
            **options,
        )
        self.settings = settings
        self.index = index
        self.oracle = oracle
        self.history = history
        self.journal = journal
        self.warming: asyncio.Task | None = None

    async def setup_hook(self) -> None:
        # The model loads (10-60 s for a 14B model) while the gateway connects, not on the first question.
        self.warming = asyncio.create_task(self.warm_model())
        await self.add_cog(OracleCog(self))
        # The answers' buttons, matched by their custom ids: clicks on answers an earlier process posted work.
        self.add_dynamic_items(*DYNAMIC_ITEMS)
        if self.settings.guild_id:
            guild = discord.Object(id=self.settings.guild_id)
            self.tree.copy_global_to(guild=guild)
            synced = await self.tree.sync(guild=guild)
        else:
            synced = await self.tree.sync()
        log.info("synced %d application commands", len(synced))

    async def warm_model(self) -> None:
        reason = await self.index.llm.load()
        if reason is None:
            log.info("model %s loaded", self.index.settings.model)
        else:
            log.warning("could not load the model at startup (%s): the first question will wait for it", reason)

    async def close(self) -> None:
        if self.warming is not None and not self.warming.done():
            self.warming.cancel()
        await super().close()

    async def on_message(self, message: discord.Message) -> None:
        """No prefix commands: thread follow-ups are the cog's listener, and a mention must not be
        read as an unknown command."""

    async def on_ready(self) -> None:
        log.info("ready as %s in %d servers", self.user, len(self.guilds))

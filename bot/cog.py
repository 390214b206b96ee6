"""The `/oracle` commands, thread follow-ups, the answer buttons and *Ask the Oracle*. Thin: every
answer comes from `oracle.Oracle`; what is said and how it fits Discord is in `formatting`."""
from __future__ import annotations

import logging
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from oracle import Answer, Clearance, IngestBusy, IngestError, Oracle, PolicyChanged, index_status

from .answering import Answering, OracleHost
from .errors import UserError
from .formatting import (
    MESSAGE_LIMIT,
    Asker,
    clip,
    dossier_embed,
    excerpt_embeds,
    split_message,
    vault_lines,
)
from .reingest import announce as announce_to
from .reingest import announce_channel, progress_message, run_reingest
from .reports import fallback_line, unanswered_text, watching_line
from .tables import Table

log = logging.getLogger(__name__)

CAMPAIGN = "Which campaign (default: this channel's)"


# In a server only: a direct message has no campaign, no thread for follow-ups, no game master.
@app_commands.guild_only()
class OracleCog(commands.GroupCog, group_name="oracle", group_description="Ask the campaign's notes"):
    def __init__(self, bot: OracleHost) -> None:
        self.bot = bot
        self.answering = Answering(bot)
        self.ask_about = app_commands.guild_only(
            app_commands.ContextMenu(name="Ask the Oracle", callback=self.ask_about_message))
        super().__init__()

    async def cog_load(self) -> None:
        self.bot.tree.add_command(self.ask_about)

    async def cog_unload(self) -> None:
        self.bot.tree.remove_command(self.ask_about.name, type=self.ask_about.type)

    # -- helpers ---------------------------------------------------------------------------------

    def table(self, interaction: discord.Interaction, campaign: str | None = None) -> Table:
        """The campaign a command is about: the one named (if the member can see it), else the one of
        the channel (its thread's parent, its category). Where no campaign is mapped, the asker is
        told privately where the Oracle answers."""
        tables = self.bot.tables
        if campaign:
            table = next((t for t in tables.visible_to(interaction.user) if t.name == campaign), None)
            if table is None:
                raise UserError(f"There is no campaign “{campaign}” here.")
            return table
        table = tables.route(interaction.channel)
        if table is None:
            raise UserError(f"This channel belongs to no campaign. The Oracle answers in {tables.where(interaction.user)}.")
        return table

    # -- /oracle ask ---------------------------------------------------------------------------

    @app_commands.command(name="ask", description="Ask a question about the campaign")
    @app_commands.describe(question="What do you want to know?", private="Only you see the answer (no thread)",
                           campaign=CAMPAIGN)
    async def ask(
        self, interaction: discord.Interaction, question: app_commands.Range[str, 1, 1000], private: bool = False,
        campaign: str | None = None,
    ) -> None:
        async def produce(oracle: Oracle, clearance: Clearance, show, text, history) -> Answer:
            return await oracle.ask(question, history=history, clearance=clearance, on_stage=show, on_text=text)

        user = interaction.user
        await self.answering.answer_interaction(
            interaction, table=self.table(interaction, campaign), kind="ask", question=question, private=private,
            produce=produce, thread_title=question, asker=Asker(user.display_name, question, user.display_avatar.url),
        )

    # -- Ask the Oracle (a message's context menu) ---------------------------------------------------

    async def ask_about_message(self, interaction: discord.Interaction, message: discord.Message) -> None:
        text = message_text(message)
        if not text:
            raise UserError("That message has no text to ask the notes about.")
        question = f"What do the notes say about this? “{clip(text, 900)}”"

        async def produce(oracle: Oracle, clearance: Clearance, show, on_text, history) -> Answer:
            return await oracle.ask(question, history=history, clearance=clearance, on_stage=show, on_text=on_text)

        user = interaction.user
        await self.answering.answer_interaction(
            interaction, table=self.table(interaction), kind="message", question=question, private=False, produce=produce,
            thread_title=f"About: {text}",
            asker=Asker(user.display_name, f"About {message.author.display_name}'s message: “{clip(text, 180)}”",
                        user.display_avatar.url, message.jump_url),
        )

    # -- /oracle recap -----------------------------------------------------------------------------

    @app_commands.command(name="recap", description="Previously on…: the last session (or one you name) retold")
    @app_commands.describe(session="A session number or a word of its title (default: the last)",
                           private="Only you see the recap (no thread)", campaign=CAMPAIGN)
    async def recap(self, interaction: discord.Interaction, session: app_commands.Range[str, 1, 100] | None = None,
                    private: bool = False, campaign: str | None = None) -> None:
        title = f"Previously on… {session}" if session else "Previously on…"

        async def produce(oracle: Oracle, clearance: Clearance, show, text, history) -> Answer:
            return await oracle.recap(session, clearance=clearance, on_stage=show, on_text=text)

        user = interaction.user
        await self.answering.answer_interaction(
            interaction, table=self.table(interaction, campaign), kind="recap", question=f"recap {session or ''}".strip(),
            private=private, produce=produce, thread_title=title, asker=Asker(user.display_name, title, user.display_avatar.url),
        )

    @recap.autocomplete("session")
    async def recap_autocomplete(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        # Shown to whoever types: public session titles only, of the campaign the command is about.
        try:
            table = self.table(interaction, interaction.namespace.campaign)
        except UserError:
            return []
        async with table.index.snapshot() as store:
            titles = await store.titles(Clearance.PLAYER, kind="session")
        needle = current.casefold().strip()
        found = [t for t in titles if needle in t.title.casefold()]
        found.sort(key=lambda t: -max(t.sessions, default=0))
        return [app_commands.Choice(name=clip(t.title, 100), value=t.label[:100]) for t in found][:25]

    # -- follow-ups in a thread ------------------------------------------------------------------

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        await self.answering.thread_message(message)

    # -- the answer's buttons ------------------------------------------------------------------------

    async def show_sources(self, interaction: discord.Interaction, campaign: str, answer_id: int) -> None:
        """The cited lines, read again with the clicker's clearance, to the clicker alone."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        table = self.bot.tables.get(campaign)
        recorded = await table.journal.get(answer_id) if table is not None else None
        if table is None or recorded is None or not recorded.citations:
            await interaction.followup.send("This answer has no sources on record.", ephemeral=True)
            return
        citations = list(recorded.citations)
        clearance = Clearance.of(self.answering.is_game_master(interaction.user, table))  # the reply is private
        cited = await table.oracle.cited(citations, clearance=clearance)
        embeds = excerpt_embeds([(c.citation.label, c.citation.path, c.citation.start_line, c.citation.end_line,
                                  c.text) for c in cited])
        await interaction.followup.send(embeds=embeds, ephemeral=True)

    async def record_vote(self, interaction: discord.Interaction, campaign: str, answer_id: int, vote: int) -> None:
        table = self.bot.tables.get(campaign)
        if table is None or await table.journal.get(answer_id) is None:
            await interaction.response.send_message("This answer is no longer on record.", ephemeral=True)
            return
        gm = self.answering.is_game_master(interaction.user, table)
        votes = await table.journal.vote(answer_id, interaction.user.id, vote, gm=gm,
                                            by=f"{interaction.user.display_name} ({interaction.user.id})")
        said = "👍 Thanks: noted as helpful" if vote > 0 else "👎 Thanks: noted as not helpful"
        extra = " The game master will see it with `/oracle unanswered`." if vote < 0 else ""
        confirmed = " As a game master, you confirmed its sources for the question bank." if gm and vote > 0 else ""
        await interaction.response.send_message(
            f"{said} (👍 {votes.up} · 👎 {votes.down}); you can change your vote.{extra}{confirmed}", ephemeral=True
        )

    # -- /oracle reingest --------------------------------------------------------------------------

    @app_commands.command(name="reingest", description="Game master: index the notes again after writing them")
    @app_commands.describe(campaign=CAMPAIGN)
    async def reingest(self, interaction: discord.Interaction, campaign: str | None = None) -> None:
        table = self.table(interaction, campaign)
        if not self.answering.is_game_master(interaction.user, table):
            raise UserError("Only a game master can reingest the notes.")
        await interaction.response.defer(ephemeral=True, thinking=True)
        report_to = await progress_message(interaction, gm_channel=self.bot.tables.is_gm_channel(interaction.channel, table))
        by = f"{interaction.user.display_name} ({interaction.user.id})"
        try:
            await run_reingest(table.index, by=by, report_to=report_to)
        except IngestBusy as exc:
            raise UserError(f"Not started: {exc}.") from None
        except IngestError as exc:
            raise UserError(f"Reingest failed: {exc}.") from None
        await announce(self.bot, table)

    # -- /oracle unanswered --------------------------------------------------------------------------

    @app_commands.command(name="unanswered", description="Game master: the questions the notes could not answer")
    @app_commands.describe(campaign=CAMPAIGN)
    async def unanswered(self, interaction: discord.Interaction, campaign: str | None = None) -> None:
        table = self.table(interaction, campaign)
        if not self.answering.is_game_master(interaction.user, table):
            raise UserError("Only a game master can read the unanswered questions.")
        await interaction.response.defer(ephemeral=True, thinking=True)
        groups = await table.journal.unanswered(limit=25)
        await interaction.edit_original_response(content=split_message(unanswered_text(groups))[0])

    # -- /oracle status ----------------------------------------------------------------------------

    @app_commands.command(name="status", description="What the Oracle has indexed and whether its model answers")
    @app_commands.describe(campaign=CAMPAIGN)
    async def status(self, interaction: discord.Interaction, campaign: str | None = None) -> None:
        table = self.table(interaction, campaign)
        await interaction.response.defer(ephemeral=True, thinking=True)
        gm = self.answering.is_game_master(interaction.user, table)  # the reply is private
        status = await index_status(table.index, clearance=Clearance.of(gm))
        intent = self.bot.intents.message_content
        stats = status.stats
        lines = [
            f"**Notes:** {stats.files} files, {stats.sessions} sessions, {stats.chunks} passages, "
            f"{stats.entities} Compendium entries",
            f"**Last ingest:** {status.last_ingest or 'never'}",
            *([f"**Language of the notes:** {status.language_line()}"] if status.language else []),
            f"**Annotations:** {stats.annotated}/{stats.chunks}",
            f"**Models:** answers with `{status.model}`, embeds with `{status.embed_model}`",
            f"**Ollama:** {status.ollama.said()}",
            f"**Context window:** {status.context.describe()}",
            f"**Model loaded:** {status.model_loaded.describe()}",
            "**Thread follow-ups:** "
            + ("on (message-content intent enabled)" if intent else
               "only when the bot is mentioned. To read every reply in a thread, enable the Message Content "
               "intent for this application in the Discord Developer Portal (Bot → Privileged Gateway Intents) "
               "and restart the bot."),
        ]
        if status.last_ingest is None:
            lines.insert(0, f"⚠️ {self.answering.not_indexed(table)}")
        if not self.bot.tables.single:
            lines.insert(0, f"**Campaign:** {table.name}")
        if status.gm is not None and stats.gm is not None:
            withheld = status.gm.withheld
            lines.append(f"**Who reads what:** {status.gm.policy}")
            lines.append(
                f"**Game master only:** {stats.gm.sessions_gm_only} sessions, "
                f"{stats.gm.chunks_by_visibility.get('gm', 0)} passages, {stats.gm.entities_gm} Compendium entries; "
                f"{withheld.count} answers withheld from players"
                + (f" (last: “{withheld.last[0].question[:200]}”, {withheld.last[0].reason})" if withheld.last else "")
            )
            lines.append(fallback_line(table.oracle.fallbacks))
            if self.bot.watch:
                lines.append(watching_line(self.bot.watching.get(table.name)))
            if not status.gm.policy_current:
                lines.append(f"⚠️ **Policy:** the notes were indexed under “{status.gm.built_under or 'an older policy'}”;"
                             " players are refused until `/oracle reingest`.")
            if status.gm.vault is not None:
                lines += vault_lines(status.gm.vault, MESSAGE_LIMIT - len("\n".join(lines)) - 1)
        await interaction.edit_original_response(content="\n".join(lines)[:MESSAGE_LIMIT])

    # -- /oracle who -------------------------------------------------------------------------------

    @app_commands.command(name="who", description="A Compendium dossier: who or what, and where the notes mention it")
    @app_commands.describe(name="A name or nickname from the campaign", private="Only you see the answer",
                           campaign=CAMPAIGN)
    async def who(self, interaction: discord.Interaction, name: app_commands.Range[str, 1, 100], private: bool = False,
                  campaign: str | None = None) -> None:
        table = self.table(interaction, campaign)
        private = private or self.answering.elsewhere(interaction, table)
        await interaction.response.defer(ephemeral=private, thinking=True)
        dossier = await table.oracle.dossiers.who(name, clearance=self.answering.clearance(interaction, table, private))
        if dossier is None:
            await interaction.edit_original_response(content=f"The Compendium has no entry for “{name}”.")
            return
        await interaction.edit_original_response(content=None, embed=dossier_embed(dossier))

    @who.autocomplete("name")
    async def who_autocomplete(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        # Autocomplete shows names to whoever types: never game-master-only ones.
        try:
            table = self.table(interaction, interaction.namespace.campaign)
        except UserError:
            return []
        try:
            names = await table.oracle.dossiers.names(current, clearance=Clearance.PLAYER, limit=25)
        except PolicyChanged:  # the notes must be ingested again under this bot's policy
            return []
        return [app_commands.Choice(name=n[:100], value=n[:100]) for n in names][:25]

    @ask.autocomplete("campaign")
    @recap.autocomplete("campaign")
    @reingest.autocomplete("campaign")
    @unanswered.autocomplete("campaign")
    @status.autocomplete("campaign")
    @who.autocomplete("campaign")
    async def campaign_autocomplete(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        """The campaigns the member can see (a channel of theirs they may view)."""
        needle = current.casefold().strip()
        names = [t.name for t in self.bot.tables.visible_to(interaction.user) if needle in t.name.casefold()]
        return [app_commands.Choice(name=n, value=n) for n in names][:25]


async def announce(client: Any, table: Table) -> None:
    """Tell a campaign's players what they can read now that they could not before."""
    channel = announce_channel(client, table.announce_channel)
    if channel is not None:
        await announce_to(channel, await table.news())


def message_text(message: discord.Message) -> str:
    """What a message says: its text, else its embeds' titles and descriptions."""
    parts = [message.content] + [p for e in message.embeds for p in (e.title, e.description) if p]
    return " ".join(" ".join(parts).split())

"""The `/oracle` commands and thread follow-ups. Thin: every answer comes from `oracle.Oracle`."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import discord
from discord import app_commands
from discord.ext import commands

from oracle.answer.prompt import Turn
from oracle.index.index import Index
from oracle.index.ingest import IngestBusy, IngestError, ingest
from oracle.index.status import index_status, is_indexed
from oracle.llm import describe_loaded, describe_window
from oracle.oracle import Oracle
from oracle.types import INGEST_STAGES, IngestReport, Progress

from .formatting import (
    PROGRESS,
    answer_text,
    dossier_embed,
    sources_embed,
    split_message,
    thread_name,
)
from .history import ThreadHistory
from .settings import BotSettings
from .streaming import LiveReply


class OracleHost(Protocol):
    """What the cog uses of the bot that hosts it (`client.OracleBot`), so that the client imports
    the cog and never the other way round."""

    settings: BotSettings
    index: Index
    oracle: Oracle
    history: ThreadHistory
    intents: discord.Intents
    user: discord.ClientUser | None

log = logging.getLogger(__name__)

PROGRESS_EVERY = 2.0  # seconds between edits of the reingest progress line
FAILED = "Something went wrong answering that; the game master can find the details in the log."


class UserError(Exception):
    """Shown to the user as one short sentence."""


def is_game_master(member: discord.abc.User, gm_roles: list[str]) -> bool:
    if not isinstance(member, discord.Member):
        return False
    if member.guild_permissions.manage_guild or member.guild_permissions.administrator:
        return True
    return any(role.name.casefold() in gm_roles or str(role.id) in gm_roles for role in member.roles)


class OracleCog(commands.GroupCog, group_name="oracle", group_description="Ask the campaign's notes"):
    def __init__(self, bot: OracleHost) -> None:
        self.bot = bot
        self.last_ask: dict[int, float] = {}
        super().__init__()

    # -- helpers ---------------------------------------------------------------------------------

    def clearance(self, interaction: discord.Interaction, private: bool) -> bool:
        """Game-master answers only where only game masters read them."""
        if not is_game_master(interaction.user, self.bot.settings.gm_roles):
            return False
        return private or interaction.channel_id in self.bot.settings.gm_channels

    def not_indexed(self) -> str:
        """What to say while the notes have never been indexed, and who can fix it."""
        roles = ", ".join(self.bot.settings.gm_roles)
        who = f"a game master (role {roles}, or Manage Server)" if roles else "a member with Manage Server"
        return f"The notes have not been indexed yet, so the Oracle has nothing to answer from: {who} can run `/oracle reingest`."

    def check_cooldown(self, user_id: int) -> None:
        now = time.monotonic()
        wait = self.bot.settings.cooldown_seconds - (now - self.last_ask.get(user_id, -1e9))
        if wait > 0:
            raise UserError(f"Slow down: you can ask again in {wait:.0f} s.")
        self.last_ask[user_id] = now

    def live(self, edit) -> LiveReply:
        return LiveReply(edit, self.bot.settings.stream_edit_seconds)

    async def send_answer(self, interaction: discord.Interaction, answer, private: bool) -> discord.Message | None:
        return await deliver(
            answer,
            lambda text, embed: interaction.edit_original_response(content=text, embed=embed),
            lambda text, embed: interaction.followup.send(text, embed=embed, ephemeral=private),
        )

    # -- /oracle ask ---------------------------------------------------------------------------

    @app_commands.command(name="ask", description="Ask a question about the campaign")
    @app_commands.describe(question="What do you want to know?", private="Only you see the answer (no thread)")
    async def ask(
        self, interaction: discord.Interaction, question: app_commands.Range[str, 1, 1000], private: bool = False
    ) -> None:
        self.check_cooldown(interaction.user.id)
        if not await is_indexed(self.bot.index):
            raise UserError(self.not_indexed())
        await interaction.response.defer(ephemeral=private, thinking=True)
        gm = self.clearance(interaction, private)

        live = self.live(lambda text: interaction.edit_original_response(content=text))

        async def show(stage: str) -> None:
            await interaction.edit_original_response(content=PROGRESS.get(stage, stage))
            live.touch()

        # Players read while the model writes; citations are checked and the sources added at the end.
        answer = await self.bot.oracle.ask(question, gm=gm, on_stage=show, on_text=live.update)
        message = await self.send_answer(interaction, answer, private)
        if private or message is None or not isinstance(interaction.channel, discord.TextChannel):
            return
        thread = await message.create_thread(name=thread_name(question))
        await self.bot.history.add_thread(thread.id, interaction.guild_id, interaction.channel_id, interaction.user.id)
        await self.bot.history.add_turns(thread.id, [Turn("user", question), Turn("assistant", answer.text)])

    # -- follow-ups in a thread ------------------------------------------------------------------

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        if message.author.bot or not isinstance(message.channel, discord.Thread):
            return
        if not await self.bot.history.is_oracle_thread(message.channel.id):
            return
        content = message.content
        if self.bot.user is not None:
            content = content.replace(f"<@{self.bot.user.id}>", "").replace(f"<@!{self.bot.user.id}>", "")
        question = " ".join(content.split())
        if not question:
            return  # no message-content intent and not mentioned: nothing to read
        try:
            self.check_cooldown(message.author.id)
        except UserError as exc:
            await message.reply(str(exc))
            return
        try:
            history = await self.bot.history.turns(message.channel.id, self.bot.settings.history_turns)
            reply: discord.Message | None = None

            async def edit(text: str) -> None:
                nonlocal reply
                if reply is None:
                    reply = await message.channel.send(text)
                else:
                    await reply.edit(content=text)

            live = self.live(edit)
            async with message.channel.typing():
                # A thread is public: everyone reading it gets the player answer.
                answer = await self.bot.oracle.ask(question, history=history, gm=False, on_text=live.update)
            streamed = reply  # the streamed message becomes the answer's first piece

            async def first(text: str, embed: discord.Embed | None) -> object:
                if streamed is not None:
                    return await streamed.edit(content=text, embed=embed)
                return await message.channel.send(text, embed=embed or discord.utils.MISSING)

            await deliver(answer, first, lambda text, embed: message.channel.send(text, embed=embed))
            await self.bot.history.add_turns(
                message.channel.id, [Turn("user", question), Turn("assistant", answer.text)]
            )
        except Exception:
            log.exception("follow-up %r in thread %s failed", question, message.channel.id)
            await message.reply(FAILED)

    # -- /oracle reingest --------------------------------------------------------------------------

    @app_commands.command(name="reingest", description="Game master: index the notes again after writing them")
    async def reingest(self, interaction: discord.Interaction) -> None:
        if not is_game_master(interaction.user, self.bot.settings.gm_roles):
            raise UserError("Only a game master can reingest the notes.")
        await interaction.response.defer(ephemeral=True, thinking=True)
        latest: dict[str, Progress] = {}

        def record(event: Progress) -> None:
            latest[event.stage] = event

        async def report_progress() -> None:
            while True:
                await asyncio.sleep(PROGRESS_EVERY)
                if latest:
                    await interaction.edit_original_response(content=progress_line(latest))

        by = f"{interaction.user.display_name} ({interaction.user.id})"
        updater = asyncio.create_task(report_progress())
        try:
            report = await ingest(self.bot.index, progress=record, by=by)
        except IngestBusy as exc:
            raise UserError(f"Not started: {exc}.") from None
        except IngestError as exc:
            raise UserError(f"Reingest failed: {exc}.") from None
        finally:
            updater.cancel()
        await interaction.edit_original_response(content=ingest_summary(report))

    # -- /oracle status ----------------------------------------------------------------------------

    @app_commands.command(name="status", description="What the Oracle has indexed and whether its model answers")
    async def status(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        gm = is_game_master(interaction.user, self.bot.settings.gm_roles)  # the reply is private
        status = await index_status(self.bot.index, gm=gm)
        intent = self.bot.intents.message_content
        lines = [
            f"**Notes:** {status['files']} files, {status['sessions']} sessions, {status['chunks']} passages, "
            f"{status['entities']} Compendium entries",
            f"**Last ingest:** {status['last_ingest'] or 'never'}",
            f"**Annotations:** {status['annotated']}/{status['chunks']}",
            f"**Models:** answers with `{status['model']}`, embeds with `{status['embed_model']}`",
            f"**Ollama:** {'answers' if status['ollama']['ok'] else status['ollama']['reason']}",
            f"**Context window:** {describe_window(status['context'])}",
            f"**Model loaded:** {describe_loaded(status['model_loaded'])}",
            "**Thread follow-ups:** "
            + ("on (message-content intent enabled)" if intent else
               "only when the bot is mentioned. To read every reply in a thread, enable the Message Content "
               "intent for this application in the Discord Developer Portal (Bot → Privileged Gateway Intents) "
               "and restart the bot."),
        ]
        if status["last_ingest"] is None:
            lines.insert(0, f"⚠️ {self.not_indexed()}")
        if gm:
            withheld = status["withheld"]
            lines.append(
                f"**Game master only:** {status['sessions_gm_only']} sessions, "
                f"{status['chunks_by_visibility'].get('gm', 0)} passages, {status['entities_gm']} Compendium entries; "
                f"{withheld['count']} answers withheld from players"
                + (f" (last: “{withheld['last'][0]['question'][:200]}”, {withheld['last'][0]['reason']})"
                   if withheld["last"] else "")
            )
        await interaction.edit_original_response(content="\n".join(lines))

    # -- /oracle who -------------------------------------------------------------------------------

    @app_commands.command(name="who", description="A Compendium dossier: who or what, and where the notes mention it")
    @app_commands.describe(name="A name or nickname from the campaign", private="Only you see the answer")
    async def who(self, interaction: discord.Interaction, name: app_commands.Range[str, 1, 100], private: bool = False) -> None:
        await interaction.response.defer(ephemeral=private, thinking=True)
        dossier = await self.bot.oracle.dossiers.who(name, gm=self.clearance(interaction, private))
        if dossier is None:
            await interaction.edit_original_response(content=f"The Compendium has no entry for “{name}”.")
            return
        await interaction.edit_original_response(content=None, embed=dossier_embed(dossier))

    @who.autocomplete("name")
    async def who_autocomplete(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        # Autocomplete shows names to whoever types: never game-master-only ones.
        names = await self.bot.oracle.dossiers.names(current, gm=False, limit=25)
        return [app_commands.Choice(name=n[:100], value=n[:100]) for n in names][:25]

    # -- errors --------------------------------------------------------------------------------------

    async def cog_app_command_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
        original = getattr(error, "original", error)
        if isinstance(original, UserError):
            message = str(original)
        else:
            command = interaction.command.qualified_name if interaction.command else "?"
            log.error("/%s failed (%s)", command, interaction.namespace, exc_info=original)
            message = FAILED
        try:
            if interaction.response.is_done():
                # The deferred message may say "Searching…" to the whole channel: take it down.
                with contextlib.suppress(discord.HTTPException):
                    await interaction.delete_original_response()
                await interaction.followup.send(message, ephemeral=True)
            else:
                await interaction.response.send_message(message, ephemeral=True)
        except discord.HTTPException:
            log.warning("could not report an error to the user", exc_info=True)


async def deliver(
    answer,
    first: Callable[[str, discord.Embed | None], Awaitable[Any]],
    more: Callable[[str, Any], Awaitable[Any]],
) -> Any:
    """An answer as Discord messages within their limits: the first piece through `first` (an edit
    of what is already shown, or a new message), the others through `more`, the sources embed on the
    last piece. Returns what `first` returned."""
    pieces = split_message(answer_text(answer))
    embed = sources_embed(answer)
    shown = await first(pieces[0], embed if len(pieces) == 1 else None)
    for i, piece in enumerate(pieces[1:], 2):
        await more(piece, embed if i == len(pieces) and embed else discord.utils.MISSING)
    return shown


def progress_line(latest: dict[str, Progress]) -> str:
    names = INGEST_STAGES
    parts = [f"{names.get(stage, stage)} {p.done}/{p.total}" if p.total else names.get(stage, stage)
             for stage, p in latest.items() if stage != "done"]
    return "⚙️ Reingesting: " + ", ".join(parts)


def ingest_summary(report: IngestReport) -> str:
    lines = [
        f"✅ Reingest done in {report.seconds:.1f} s: {len(report.added)} added, {len(report.changed)} changed, "
        f"{len(report.removed)} removed, {report.unchanged} unchanged, {len(report.skipped)} skipped.",
        f"{report.chunks} passages indexed, {report.windows_embedded} embedded, "
        f"annotations {report.annotations_done}/{report.annotations_done + report.annotations_missing}.",
    ]
    if report.annotation_note:
        lines.append(f"Annotations: {report.annotation_note}")
    if report.secrets:
        whole = sum(1 for n in report.secrets.values() if n < 0)
        blocks = sum(n for n in report.secrets.values() if n > 0)
        others = len(report.secrets) - whole
        lines.append(
            f"🔒 Kept from players: {whole} game-master-only {'note' if whole == 1 else 'notes'}, "
            f"{blocks} secret {'block' if blocks == 1 else 'blocks'} in {others} other {'note' if others == 1 else 'notes'}"
            " (per file: `oracle ingest`)."
        )
    for s in report.skipped[:10]:
        lines.append(f"• skipped `{s.path}`: {s.reason}")
    if len(report.skipped) > 10:
        lines.append(f"…and {len(report.skipped) - 10} more skipped")
    return split_message("\n".join(lines))[0]

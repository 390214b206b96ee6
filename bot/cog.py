"""The `/oracle` commands, thread follow-ups, the answer buttons and *Ask the Oracle*. Thin: every
answer comes from `oracle.Oracle`; what is said and how it fits Discord is in `formatting`."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import discord
from discord import app_commands
from discord.ext import commands

from oracle.answer.citations import Citation
from oracle.answer.prompt import Turn
from oracle.answer.results import Answer
from oracle.index.index import Index
from oracle.index.ingest import IngestBusy, IngestError
from oracle.index.status import index_status, is_indexed
from oracle.journal import Asked, Journal
from oracle.llm import describe_loaded, describe_window
from oracle.oracle import Oracle
from oracle.types import readable

from .flood import FloodGate
from .formatting import (
    PROGRESS,
    Asker,
    clip,
    deliver,
    dossier_embed,
    excerpt_embeds,
    split_message,
    thread_name,
)
from .history import ThreadHistory
from .listening import hear
from .reingest import announce_channel, progress_message, run_reingest
from .reports import unanswered_text
from .settings import BotSettings
from .streaming import LiveReply
from .views import answer_view


class OracleHost(Protocol):
    """What the cog uses of the bot that hosts it (`client.OracleBot`), so that the client imports
    the cog and never the other way round."""

    settings: BotSettings
    index: Index
    oracle: Oracle
    history: ThreadHistory
    journal: Journal
    intents: discord.Intents
    user: discord.ClientUser | None

    def get_channel(self, id: int, /) -> Any: ...


log = logging.getLogger(__name__)

FAILED = "Something went wrong answering that; the game master can find the details in the log."
WAITING = "⏳"  # a question over the member's limit: answered when the limit allows
DROPPED = "✋"  # too many of the member's questions already wait
NO_THREAD = "No thread was opened for follow-ups: {why}. Ask again with `/oracle ask` to go on."


class UserError(Exception):
    """Shown to the user as one short sentence."""


def is_game_master(member: discord.abc.User, gm_roles: list[str]) -> bool:
    if not isinstance(member, discord.Member):
        return False
    if member.guild_permissions.manage_guild or member.guild_permissions.administrator:
        return True
    return any(role.name.casefold() in gm_roles or str(role.id) in gm_roles for role in member.roles)


def no_thread_reason(channel: Any) -> str | None:
    """Why Discord cannot open a thread on a message here, known before asking it."""
    if isinstance(channel, discord.Thread):
        parent = channel.parent
        if isinstance(parent, discord.ForumChannel):
            return "this is a forum post, and a post cannot hold threads of its own"
        return "this is already a thread, and Discord does not open threads inside threads"
    if isinstance(channel, (discord.VoiceChannel, discord.StageChannel)):
        return "a voice channel's chat cannot hold threads"
    if not isinstance(channel, discord.TextChannel):
        return "this kind of channel cannot hold threads"
    return None


class OracleCog(commands.GroupCog, group_name="oracle", group_description="Ask the campaign's notes"):
    def __init__(self, bot: OracleHost) -> None:
        self.bot = bot
        settings = bot.settings
        self.flood = FloodGate(settings.flood_burst, settings.flood_seconds, settings.flood_waiting)
        self.ask_about = app_commands.ContextMenu(name="Ask the Oracle", callback=self.ask_about_message)
        self.ask_about.error(self.context_menu_error)
        super().__init__()

    async def cog_load(self) -> None:
        self.bot.tree.add_command(self.ask_about)  # type: ignore[attr-defined]

    async def cog_unload(self) -> None:
        self.bot.tree.remove_command(self.ask_about.name, type=self.ask_about.type)  # type: ignore[attr-defined]

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

    def live(self, edit) -> LiveReply:
        return LiveReply(edit, self.bot.settings.stream_edit_seconds)

    async def take_turn(self, member: int, wait: Callable[[], Awaitable[Any]]) -> bool:
        """Flood control: False when the member already has too many questions waiting; else after
        `wait()` (shown only when over the limit) and the delay, the question may be answered."""
        delay = self.flood.reserve(member)
        if delay is None:
            return False
        if delay > 0:
            await wait()
            await asyncio.sleep(delay)
        return True

    async def generation(self) -> str:
        async with self.bot.index.snapshot() as store:
            return await store.generation()

    async def record(self, asked: Asked, answer: Answer) -> int:
        return await self.bot.journal.record(asked, answer)

    # -- answering through an interaction ----------------------------------------------------------

    async def answer_interaction(
        self,
        interaction: discord.Interaction,
        *,
        kind: str,
        question: str,
        asker: Asker,
        private: bool,
        produce: Callable[..., Awaitable[Answer]],  # (gm, on_stage, on_text, history) -> Answer
        thread_title: str,
    ) -> None:
        """Defer, wait for the member's turn, produce the answer while showing progress, post it with
        its buttons, then open a thread for follow-ups (or continue the Oracle thread it was asked in)."""
        if not await is_indexed(self.bot.index):
            raise UserError(self.not_indexed())
        await interaction.response.defer(ephemeral=private, thinking=True)
        channel = interaction.channel
        in_thread = isinstance(channel, discord.Thread) and await self.bot.history.is_oracle_thread(channel.id)
        # A thread is public: everyone reading it gets the player answer.
        gm = is_game_master(interaction.user, self.bot.settings.gm_roles) and private if in_thread \
            else self.clearance(interaction, private)
        if not await self.take_turn(interaction.user.id,
                                    lambda: interaction.edit_original_response(content=WAITING)):
            raise UserError("You already have questions waiting: ask again once they are answered.")
        try:
            history = await self.bot.history.turns(channel.id, self.bot.settings.history_turns) if in_thread else []
            live = self.live(lambda text: interaction.edit_original_response(content=text))

            async def show(stage: str) -> None:
                await interaction.edit_original_response(content=PROGRESS.get(stage, stage))
                live.touch()

            answer = await produce(gm, show, live.update, history)
        except BaseException:
            self.flood.refund(interaction.user.id)
            raise
        answer_id = await self.record(Asked(
            kind, question, interaction.user.id, interaction.user.display_name, interaction.guild_id,
            interaction.channel_id, tuple(t.content for t in history if t.role == "user"), gm,
            await self.generation(),
        ), answer)
        message = await deliver(
            answer,
            lambda text, embed, view: interaction.edit_original_response(content=text, embed=embed, view=view),
            lambda text, embed, view: interaction.followup.send(text, embed=embed, view=view, ephemeral=private,
                                                                wait=True),
            asker=asker, view=answer_view(answer_id, sources=bool(answer.citations)),
        )
        if message is not None:
            await self.bot.journal.shown_in(answer_id, message.channel.id, message.id)
        if private or message is None:
            return  # a private answer never joins a thread's history: the thread is public
        if in_thread:
            await self.bot.history.add_turns(channel.id, [Turn("user", question), Turn("assistant", answer.text)])
            return
        await self.open_thread(interaction, message, thread_title, question, answer)

    async def open_thread(self, interaction: discord.Interaction, message: discord.Message, title: str,
                          question: str, answer: Answer) -> None:
        """A thread on the answer for follow-ups; when Discord cannot open one, the answer stays and
        the asker is told why, privately."""
        why = no_thread_reason(interaction.channel)
        if why is None:
            try:
                thread = await message.create_thread(name=thread_name(title))
            except discord.Forbidden:
                why = "the Oracle may not create public threads in this channel (a server admin can grant it " \
                      "*Create Public Threads*)"
            except discord.HTTPException as exc:
                log.warning("could not open a thread on answer %s: %s", message.id, exc)
                why = f"Discord refused it ({exc.text or exc.status})"
            else:
                await self.bot.history.add_thread(thread.id, interaction.guild_id, interaction.channel_id,
                                                  interaction.user.id)
                await self.bot.history.add_turns(thread.id, [Turn("user", question), Turn("assistant", answer.text)])
                return
        await interaction.followup.send(NO_THREAD.format(why=why), ephemeral=True)

    # -- /oracle ask ---------------------------------------------------------------------------

    @app_commands.command(name="ask", description="Ask a question about the campaign")
    @app_commands.describe(question="What do you want to know?", private="Only you see the answer (no thread)")
    async def ask(
        self, interaction: discord.Interaction, question: app_commands.Range[str, 1, 1000], private: bool = False
    ) -> None:
        async def produce(gm: bool, show, text, history) -> Answer:
            return await self.bot.oracle.ask(question, history=history, gm=gm, on_stage=show, on_text=text)

        user = interaction.user
        await self.answer_interaction(
            interaction, kind="ask", question=question, private=private, produce=produce, thread_title=question,
            asker=Asker(user.display_name, question, user.display_avatar.url),
        )

    # -- Ask the Oracle (a message's context menu) ---------------------------------------------------

    async def ask_about_message(self, interaction: discord.Interaction, message: discord.Message) -> None:
        text = message_text(message)
        if not text:
            raise UserError("That message has no text to ask the notes about.")
        question = f"What do the notes say about this? “{clip(text, 900)}”"

        async def produce(gm: bool, show, on_text, history) -> Answer:
            return await self.bot.oracle.ask(question, history=history, gm=gm, on_stage=show, on_text=on_text)

        user = interaction.user
        await self.answer_interaction(
            interaction, kind="message", question=question, private=False, produce=produce,
            thread_title=f"About: {text}",
            asker=Asker(user.display_name, f"About {message.author.display_name}'s message: “{clip(text, 180)}”",
                        user.display_avatar.url, message.jump_url),
        )

    async def context_menu_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
        await self.cog_app_command_error(interaction, error)

    # -- /oracle recap -----------------------------------------------------------------------------

    @app_commands.command(name="recap", description="Previously on…: the last session (or one you name) retold")
    @app_commands.describe(session="A session number or a word of its title (default: the last)",
                           private="Only you see the recap (no thread)")
    async def recap(self, interaction: discord.Interaction, session: app_commands.Range[str, 1, 100] | None = None,
                    private: bool = False) -> None:
        title = f"Previously on… {session}" if session else "Previously on…"

        async def produce(gm: bool, show, text, history) -> Answer:
            return await self.bot.oracle.recap(session, gm=gm, on_stage=show, on_text=text)

        user = interaction.user
        await self.answer_interaction(
            interaction, kind="recap", question=f"recap {session or ''}".strip(), private=private, produce=produce,
            thread_title=title, asker=Asker(user.display_name, title, user.display_avatar.url),
        )

    @recap.autocomplete("session")
    async def recap_autocomplete(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        # Shown to whoever types: public session titles only.
        async with self.bot.index.snapshot() as store:
            titles = [t for t in await store.titles(readable(False)) if t.label.startswith("Session ")]
        needle = current.casefold().strip()
        found = [t for t in titles if needle in t.title.casefold()]
        found.sort(key=lambda t: -int("".join(ch for ch in t.label if ch.isdigit()) or 0))
        return [app_commands.Choice(name=clip(t.title, 100), value=t.label[:100]) for t in found][:25]

    # -- follow-ups in a thread ------------------------------------------------------------------

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        if message.author.bot or not isinstance(message.channel, discord.Thread):
            return
        if not await self.bot.history.is_oracle_thread(message.channel.id):
            return
        me = self.bot.user
        referenced = message.reference.resolved if message.reference else None
        replied = referenced.author.id if isinstance(referenced, discord.Message) else None
        heard = hear(
            message.content,
            bot_id=me.id if me else None,
            mentions_oracle=me is not None and any(u.id == me.id for u in message.mentions),
            replies_to_oracle=me is not None and replied == me.id,
            replies_to_member=replied is not None and (me is None or replied != me.id),
            prefixes=self.bot.settings.ignore_prefixes,
        )
        if heard.question is None:
            log.debug("not a question in thread %s (%s)", message.channel.id, heard.why)
            return
        await self.follow_up(message, heard.question)

    async def follow_up(self, message: discord.Message, question: str) -> None:
        thread = message.channel
        waited = False

        async def wait() -> None:
            nonlocal waited
            waited = True
            with contextlib.suppress(discord.HTTPException):  # no Add Reactions: it still waits
                await message.add_reaction(WAITING)

        if not await self.take_turn(message.author.id, wait):
            with contextlib.suppress(discord.HTTPException):
                await message.add_reaction(DROPPED)
            return
        try:
            history = await self.bot.history.turns(thread.id, self.bot.settings.history_turns)
            reply: discord.Message | None = None

            async def edit(text: str) -> None:
                nonlocal reply
                if reply is None:
                    reply = await message.reply(text)
                else:
                    await reply.edit(content=text)

            live = self.live(edit)
            async with thread.typing():
                # A thread is public: everyone reading it gets the player answer.
                answer = await self.bot.oracle.ask(question, history=history, gm=False, on_text=live.update)
            streamed = reply  # the streamed message becomes the answer's first piece
            answer_id = await self.record(Asked(
                "followup", question, message.author.id, message.author.display_name,
                message.guild.id if message.guild else None, thread.id,
                tuple(t.content for t in history if t.role == "user"), False, await self.generation(),
            ), answer)

            async def first(text: str, embed: discord.Embed | None, view: Any) -> Any:
                if streamed is not None:
                    return await streamed.edit(content=text, embed=embed, view=view)
                return await message.reply(text, embed=embed or discord.utils.MISSING, view=view)

            shown = await deliver(
                answer, first, lambda text, embed, view: thread.send(text, embed=embed, view=view),
                view=answer_view(answer_id, sources=bool(answer.citations)),
            )
            if shown is not None:
                await self.bot.journal.shown_in(answer_id, thread.id, shown.id)
            await self.bot.history.add_turns(thread.id, [Turn("user", question), Turn("assistant", answer.text)])
        except Exception:
            self.flood.refund(message.author.id)
            log.exception("follow-up %r in thread %s failed", question, thread.id)
            await message.reply(FAILED)
        finally:
            if waited:
                with contextlib.suppress(discord.HTTPException):
                    await message.remove_reaction(WAITING, self.bot.user)  # type: ignore[arg-type]

    # -- the answer's buttons ------------------------------------------------------------------------

    async def show_sources(self, interaction: discord.Interaction, answer_id: int) -> None:
        """The cited lines, read again with the clicker's clearance, to the clicker alone."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        recorded = await self.bot.journal.get(answer_id)
        if recorded is None or not recorded.citations:
            await interaction.followup.send("This answer has no sources on record.", ephemeral=True)
            return
        citations = [Citation(c["label"], c["path"], c["lines"][0], c["lines"][1]) for c in recorded.citations]
        gm = is_game_master(interaction.user, self.bot.settings.gm_roles)  # the reply is private
        cited = await self.bot.oracle.cited(citations, gm=gm)
        embeds = excerpt_embeds([(c.citation.label, c.citation.path, c.citation.start_line, c.citation.end_line,
                                  c.text) for c in cited])
        await interaction.followup.send(embeds=embeds, ephemeral=True)

    async def record_vote(self, interaction: discord.Interaction, answer_id: int, vote: int) -> None:
        if await self.bot.journal.get(answer_id) is None:
            await interaction.response.send_message("This answer is no longer on record.", ephemeral=True)
            return
        gm = is_game_master(interaction.user, self.bot.settings.gm_roles)
        votes = await self.bot.journal.vote(answer_id, interaction.user.id, vote, gm=gm,
                                            by=f"{interaction.user.display_name} ({interaction.user.id})")
        said = "👍 Thanks: noted as helpful" if vote > 0 else "👎 Thanks: noted as not helpful"
        extra = " The game master will see it with `/oracle unanswered`." if vote < 0 else ""
        confirmed = " As a game master, you confirmed its sources for the question bank." if gm and vote > 0 else ""
        await interaction.response.send_message(
            f"{said} (👍 {votes.up} · 👎 {votes.down}); you can change your vote.{extra}{confirmed}", ephemeral=True
        )

    # -- /oracle reingest --------------------------------------------------------------------------

    @app_commands.command(name="reingest", description="Game master: index the notes again after writing them")
    async def reingest(self, interaction: discord.Interaction) -> None:
        if not is_game_master(interaction.user, self.bot.settings.gm_roles):
            raise UserError("Only a game master can reingest the notes.")
        await interaction.response.defer(ephemeral=True, thinking=True)
        report_to = await progress_message(interaction, gm_channel=interaction.channel_id in self.bot.settings.gm_channels)
        announce_to = announce_channel(self.bot, self.bot.settings.announce_channel)
        by = f"{interaction.user.display_name} ({interaction.user.id})"
        try:
            await run_reingest(self.bot.index, by=by, report_to=report_to, announce_to=announce_to)
        except IngestBusy as exc:
            raise UserError(f"Not started: {exc}.") from None
        except IngestError as exc:
            raise UserError(f"Reingest failed: {exc}.") from None

    # -- /oracle unanswered --------------------------------------------------------------------------

    @app_commands.command(name="unanswered", description="Game master: the questions the notes could not answer")
    async def unanswered(self, interaction: discord.Interaction) -> None:
        if not is_game_master(interaction.user, self.bot.settings.gm_roles):
            raise UserError("Only a game master can read the unanswered questions.")
        await interaction.response.defer(ephemeral=True, thinking=True)
        groups = await self.bot.journal.unanswered(limit=25)
        await interaction.edit_original_response(content=split_message(unanswered_text(groups))[0])

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


def message_text(message: discord.Message) -> str:
    """What a message says: its text, else its embeds' titles and descriptions."""
    parts = [message.content] + [p for e in message.embeds for p in (e.title, e.description) if p]
    return " ".join(" ".join(parts).split())

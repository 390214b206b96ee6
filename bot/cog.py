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
from oracle.index.ingest import IngestBusy, IngestError
from oracle.index.status import index_status, is_indexed
from oracle.journal import Asked
from oracle.llm import describe_loaded, describe_window
from oracle.oracle import Oracle
from oracle.types import readable

from .delivery import InteractionReply
from .errors import FAILED, UserError
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
from .questions import Questions
from .reingest import announce as announce_to
from .reingest import announce_channel, progress_message, run_reingest
from .reports import unanswered_text
from .settings import BotSettings
from .streaming import LiveReply
from .tables import Table, Tables
from .views import answer_view


class OracleHost(Protocol):
    """What the cog uses of the bot that hosts it (`client.OracleBot`), so that the client imports
    the cog and never the other way round."""

    settings: BotSettings
    tables: Tables
    history: ThreadHistory
    questions: Questions
    intents: discord.Intents
    user: discord.ClientUser | None

    def get_channel(self, id: int, /) -> Any: ...


log = logging.getLogger(__name__)

WAITING = "⏳"  # a question over the member's limit: answered when the limit allows
DROPPED = "✋"  # too many of the member's questions already wait
NO_THREAD = "No thread was opened for follow-ups: {why}. Ask again with `/oracle ask` to go on."
MOVED = "This thread's campaign no longer answers in this channel: ask with `/oracle ask` to go on."
CAMPAIGN = "Which campaign (default: this channel's)"


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


# In a server only: a direct message has no campaign, no thread for follow-ups, no game master.
@app_commands.guild_only()
class OracleCog(commands.GroupCog, group_name="oracle", group_description="Ask the campaign's notes"):
    def __init__(self, bot: OracleHost) -> None:
        self.bot = bot
        settings = bot.settings
        self.flood = FloodGate(settings.flood_burst, settings.flood_seconds, settings.flood_waiting)
        self.ask_about = app_commands.guild_only(
            app_commands.ContextMenu(name="Ask the Oracle", callback=self.ask_about_message))
        super().__init__()

    async def cog_load(self) -> None:
        self.bot.tree.add_command(self.ask_about)  # type: ignore[attr-defined]

    async def cog_unload(self) -> None:
        self.bot.tree.remove_command(self.ask_about.name, type=self.ask_about.type)  # type: ignore[attr-defined]

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

    def is_game_master(self, member: Any, table: Table) -> bool:
        return self.bot.tables.is_game_master(member, table)

    def clearance(self, interaction: discord.Interaction, table: Table, private: bool) -> bool:
        """Game-master answers only where only game masters read them."""
        if not self.is_game_master(interaction.user, table):
            return False
        return private or self.bot.tables.is_gm_channel(interaction.channel, table)

    def elsewhere(self, interaction: discord.Interaction, table: Table) -> bool:
        """The campaign is not the channel's: its answer is private (this channel's readers may not
        be that campaign's players)."""
        return self.bot.tables.route(interaction.channel) is not table

    def not_indexed(self, table: Table) -> str:
        """What to say while the notes have never been indexed, and who can fix it."""
        roles = ", ".join(table.campaign.gm_roles if table.campaign.gm_roles is not None else self.bot.settings.gm_roles)
        if self.bot.tables.single:
            fix = f"a game master (role {roles}, or Manage Server)" if roles else "a member with Manage Server"
            fix += " can run `/oracle reingest`"
        elif roles:  # only the campaign's roles make its game masters
            fix = f"a game master (role {roles}) can run `/oracle reingest`"
        else:
            fix = f"the bot's host can run `oracle ingest --campaign {table.name}`"
        return f"The notes have not been indexed yet, so the Oracle has nothing to answer from: {fix}."

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

    @staticmethod
    async def generation(table: Table) -> str:
        async with table.index.snapshot() as store:
            return await store.generation()

    # -- answering through an interaction ----------------------------------------------------------

    async def answer_interaction(
        self,
        interaction: discord.Interaction,
        *,
        table: Table,
        kind: str,
        question: str,
        asker: Asker,
        private: bool,
        produce: Callable[..., Awaitable[Answer]],  # (oracle, gm, on_stage, on_text, history) -> Answer
        thread_title: str,
    ) -> None:
        """Defer, wait for the member's turn, produce the answer while showing progress, post it with
        its buttons, then open a thread for follow-ups (or continue the Oracle thread it was asked in)."""
        if not await is_indexed(table.index):
            raise UserError(self.not_indexed(table))
        refusal = self.bot.questions.refusal()
        if refusal is not None:
            raise UserError(refusal)
        private = private or self.elsewhere(interaction, table)
        await interaction.response.defer(ephemeral=private, thinking=True)
        reply = InteractionReply(interaction, private=private)
        async with self.bot.questions.answering(lambda text: reply.edit(content=text)):
            await self.answer_deferred(interaction, reply, table=table, kind=kind, question=question, asker=asker,
                                       private=private, produce=produce, thread_title=thread_title)

    async def answer_deferred(self, interaction: discord.Interaction, reply: InteractionReply, *, table: Table,
                              kind: str, question: str, asker: Asker, private: bool,
                              produce: Callable[..., Awaitable[Answer]], thread_title: str) -> None:
        channel = interaction.channel
        in_thread = isinstance(channel, discord.Thread) and \
            await self.bot.history.campaign_of(channel.id) == table.name
        # A thread is public: everyone reading it gets the player answer.
        gm = self.is_game_master(interaction.user, table) and private if in_thread \
            else self.clearance(interaction, table, private)
        if not await self.take_turn(interaction.user.id, lambda: reply.edit(content=WAITING)):
            raise UserError("You already have questions waiting: ask again once they are answered.")
        try:
            history = await self.bot.history.turns(channel.id, self.bot.settings.history_turns) if in_thread else []
            live = self.live(lambda text: reply.edit(content=text))

            async def show(stage: str) -> None:
                await reply.edit(content=PROGRESS.get(stage, stage))
                live.touch()

            answer = await produce(table.oracle, gm, show, live.update, history)
        except BaseException:
            self.flood.refund(interaction.user.id)
            raise
        answer_id = await table.journal.record(Asked(
            kind, question, interaction.user.id, interaction.user.display_name, interaction.guild_id,
            interaction.channel_id, tuple(t.content for t in history if t.role == "user"), gm,
            await self.generation(table),
        ), answer)
        message = await deliver(answer, reply.first, reply.more, asker=asker,
                                view=answer_view(table.name, answer_id, sources=bool(answer.citations)))
        if message is not None:
            await table.journal.shown_in(answer_id, message.channel.id, message.id)
        if private or message is None:
            return  # a private answer never joins a thread's history: the thread is public
        if in_thread:
            await self.bot.history.add_turns(channel.id, [Turn("user", question), Turn("assistant", answer.text)])
            return
        await self.open_thread(interaction, reply, table, message, thread_title, question, answer)

    async def open_thread(self, interaction: discord.Interaction, reply: InteractionReply, table: Table,
                          message: discord.Message, title: str, question: str, answer: Answer) -> None:
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
                                                  interaction.user.id, table.name)
                await self.bot.history.add_turns(thread.id, [Turn("user", question), Turn("assistant", answer.text)])
                return
        await reply.tell(NO_THREAD.format(why=why))

    # -- /oracle ask ---------------------------------------------------------------------------

    @app_commands.command(name="ask", description="Ask a question about the campaign")
    @app_commands.describe(question="What do you want to know?", private="Only you see the answer (no thread)",
                           campaign=CAMPAIGN)
    async def ask(
        self, interaction: discord.Interaction, question: app_commands.Range[str, 1, 1000], private: bool = False,
        campaign: str | None = None,
    ) -> None:
        async def produce(oracle: Oracle, gm: bool, show, text, history) -> Answer:
            return await oracle.ask(question, history=history, gm=gm, on_stage=show, on_text=text)

        user = interaction.user
        await self.answer_interaction(
            interaction, table=self.table(interaction, campaign), kind="ask", question=question, private=private, produce=produce, thread_title=question,
            asker=Asker(user.display_name, question, user.display_avatar.url),
        )

    # -- Ask the Oracle (a message's context menu) ---------------------------------------------------

    async def ask_about_message(self, interaction: discord.Interaction, message: discord.Message) -> None:
        text = message_text(message)
        if not text:
            raise UserError("That message has no text to ask the notes about.")
        question = f"What do the notes say about this? “{clip(text, 900)}”"

        async def produce(oracle: Oracle, gm: bool, show, on_text, history) -> Answer:
            return await oracle.ask(question, history=history, gm=gm, on_stage=show, on_text=on_text)

        user = interaction.user
        await self.answer_interaction(
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

        async def produce(oracle: Oracle, gm: bool, show, text, history) -> Answer:
            return await oracle.recap(session, gm=gm, on_stage=show, on_text=text)

        user = interaction.user
        await self.answer_interaction(
            interaction, table=self.table(interaction, campaign), kind="recap", question=f"recap {session or ''}".strip(), private=private, produce=produce,
            thread_title=title, asker=Asker(user.display_name, title, user.display_avatar.url),
        )

    @recap.autocomplete("session")
    async def recap_autocomplete(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        # Shown to whoever types: public session titles only, of the campaign the command is about.
        try:
            table = self.table(interaction, interaction.namespace.campaign)
        except UserError:
            return []
        async with table.index.snapshot() as store:
            titles = await store.titles(readable(False), kind="session")
        needle = current.casefold().strip()
        found = [t for t in titles if needle in t.title.casefold()]
        found.sort(key=lambda t: -max(t.sessions, default=0))
        return [app_commands.Choice(name=clip(t.title, 100), value=t.label[:100]) for t in found][:25]

    # -- follow-ups in a thread ------------------------------------------------------------------

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        if message.author.bot or not isinstance(message.channel, discord.Thread):
            return
        table = self.bot.tables.get(await self.bot.history.campaign_of(message.channel.id) or "")
        if table is None:
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
            mentions_member=bool(message.role_mentions) or any(me is None or u.id != me.id for u in message.mentions),
            prefixes=self.bot.settings.ignore_prefixes,
        )
        if heard.question is None:
            log.debug("not a question in thread %s (%s)", message.channel.id, heard.why)
            return
        if self.bot.tables.route(message.channel) is not table:
            # Its channel was mapped to another campaign, or to none, since the thread was opened:
            # its readers now may not be the remembered campaign's players.
            with contextlib.suppress(discord.HTTPException):
                await message.reply(MOVED)
            return
        await self.follow_up(message, table, heard.question)

    async def follow_up(self, message: discord.Message, table: Table, question: str) -> None:
        refusal = self.bot.questions.refusal()
        if refusal is not None:
            with contextlib.suppress(discord.HTTPException):
                await message.reply(refusal)
            return
        async with self.bot.questions.answering(message.reply):
            await self.answer_follow_up(message, table, question)

    async def answer_follow_up(self, message: discord.Message, table: Table, question: str) -> None:
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
                answer = await table.oracle.ask(question, history=history, gm=False, on_text=live.update)
            streamed = reply  # the streamed message becomes the answer's first piece
            answer_id = await table.journal.record(Asked(
                "followup", question, message.author.id, message.author.display_name,
                message.guild.id if message.guild else None, thread.id,
                tuple(t.content for t in history if t.role == "user"), False, await self.generation(table),
            ), answer)

            async def first(text: str, embed: discord.Embed | None, view: Any) -> Any:
                if streamed is not None:
                    return await streamed.edit(content=text, embed=embed, view=view)
                return await message.reply(text, embed=embed or discord.utils.MISSING, view=view)

            shown = await deliver(
                answer, first, lambda text, embed, view: thread.send(text, embed=embed, view=view),
                view=answer_view(table.name, answer_id, sources=bool(answer.citations)),
            )
            if shown is not None:
                await table.journal.shown_in(answer_id, thread.id, shown.id)
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

    async def show_sources(self, interaction: discord.Interaction, campaign: str, answer_id: int) -> None:
        """The cited lines, read again with the clicker's clearance, to the clicker alone."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        table = self.bot.tables.get(campaign)
        recorded = await table.journal.get(answer_id) if table is not None else None
        if recorded is None or not recorded.citations:
            await interaction.followup.send("This answer has no sources on record.", ephemeral=True)
            return
        citations = [Citation(c["label"], c["path"], c["lines"][0], c["lines"][1]) for c in recorded.citations]
        gm = self.is_game_master(interaction.user, table)  # the reply is private
        cited = await table.oracle.cited(citations, gm=gm)
        embeds = excerpt_embeds([(c.citation.label, c.citation.path, c.citation.start_line, c.citation.end_line,
                                  c.text) for c in cited])
        await interaction.followup.send(embeds=embeds, ephemeral=True)

    async def record_vote(self, interaction: discord.Interaction, campaign: str, answer_id: int, vote: int) -> None:
        table = self.bot.tables.get(campaign)
        if table is None or await table.journal.get(answer_id) is None:
            await interaction.response.send_message("This answer is no longer on record.", ephemeral=True)
            return
        gm = self.is_game_master(interaction.user, table)
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
        if not self.is_game_master(interaction.user, table):
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
        if not self.is_game_master(interaction.user, table):
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
        gm = self.is_game_master(interaction.user, table)  # the reply is private
        status = await index_status(table.index, gm=gm)
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
            lines.insert(0, f"⚠️ {self.not_indexed(table)}")
        if not self.bot.tables.single:
            lines.insert(0, f"**Campaign:** {table.name}")
        if gm:
            withheld = status["withheld"]
            lines.append(f"**Who reads what:** {status['policy']}")
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
    @app_commands.describe(name="A name or nickname from the campaign", private="Only you see the answer",
                           campaign=CAMPAIGN)
    async def who(self, interaction: discord.Interaction, name: app_commands.Range[str, 1, 100], private: bool = False,
                  campaign: str | None = None) -> None:
        table = self.table(interaction, campaign)
        private = private or self.elsewhere(interaction, table)
        await interaction.response.defer(ephemeral=private, thinking=True)
        dossier = await table.oracle.dossiers.who(name, gm=self.clearance(interaction, table, private))
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
        names = await table.oracle.dossiers.names(current, gm=False, limit=25)
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

"""How the bot answers on Discord: a command's question through its interaction (deferred, waiting
its member's turn, progress and the answer streamed, then a thread for follow-ups) and a follow-up in
an Oracle thread. Who is a game master where, and what a message in a thread is, are decided here
from `tables` and `listening`; every answer itself comes from `oracle.Oracle`."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

import discord
from discord import app_commands

from oracle import Answer, Asked, Clearance, PolicyChanged, Turn, Watching, clipped, is_indexed

from .delivery import InteractionReply, Undelivered
from .errors import FAILED, UserError
from .flood import FloodGate
from .formatting import PROGRESS, Asker, deliver, thread_name
from .history import ThreadHistory
from .listening import hear
from .questions import Questions
from .settings import BotSettings
from .streaming import LiveReply, Pacer
from .tables import Table, Tables
from .views import answer_view

log = logging.getLogger(__name__)


class OracleHost(Protocol):
    """What the cog uses of the bot that hosts it (`client.OracleBot`), so that the client imports
    the cog and never the other way round."""

    settings: BotSettings
    tables: Tables
    history: ThreadHistory
    questions: Questions
    watch: bool  # ORACLE_WATCH
    watching: dict[str, Watching]  # each campaign's watch

    @property
    def intents(self) -> discord.Intents: ...

    @property
    def user(self) -> discord.ClientUser | None: ...

    @property
    def tree(self) -> app_commands.CommandTree: ...

    def get_channel(self, id: int, /) -> Any: ...

    async def fetch_channel(self, channel_id: int, /) -> Any: ...


WAITING = "⏳"  # a question over the member's limit: answered when the limit allows
DROPPED = "✋"  # too many of the member's questions already wait
NO_THREAD = "No thread was opened for follow-ups: {why}. Ask again with `/oracle ask` to go on."
MOVED = "This thread's campaign no longer answers in this channel: ask with `/oracle ask` to go on."
# A week, the longest Discord allows (the channel's default is a day): a weekly table's thread is
# still open at the next session.
THREAD_ARCHIVE: Literal[10080] = 10080


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


class Answering:
    """The answer flow of one bot: flood control per member, and each question from its first
    progress line to its thread."""

    def __init__(self, bot: OracleHost) -> None:
        self.bot = bot
        settings = bot.settings
        self.flood = FloodGate(settings.flood_burst, settings.flood_seconds, settings.flood_waiting)
        self.pacer = Pacer(settings.stream_edit_seconds)  # every streaming answer's edits, per channel

    def is_game_master(self, member: Any, table: Table) -> bool:
        return self.bot.tables.is_game_master(member, table)

    def clearance(self, interaction: discord.Interaction, table: Table, private: bool) -> Clearance:
        """Game-master answers only where only game masters read them."""
        if not self.is_game_master(interaction.user, table):
            return Clearance.PLAYER
        return Clearance.of(private or self.bot.tables.is_gm_channel(interaction.channel, table))

    def elsewhere(self, interaction: discord.Interaction, table: Table) -> bool:
        """The campaign is not the channel's: its answer is private (this channel's readers may not
        be that campaign's players)."""
        return self.bot.tables.route(interaction.channel) is not table

    def not_indexed(self, table: Table) -> str:
        """What to say while the notes have never been indexed, and who can fix it."""
        roles = ", ".join(table.place.gm_roles if table.place.gm_roles is not None else self.bot.settings.gm_roles)
        if self.bot.tables.single:
            fix = f"a game master (role {roles}, or Manage Server)" if roles else "a member with Manage Server"
            fix += " can run `/oracle reingest`"
        elif roles:  # only the campaign's roles make its game masters
            fix = f"a game master (role {roles}) can run `/oracle reingest`"
        else:
            fix = f"the bot's host can run `oracle ingest --campaign {table.name}`"
        return f"The notes have not been indexed yet, so the Oracle has nothing to answer from: {fix}."

    def live(self, edit: Callable[[str], Awaitable[object]], channel: int) -> LiveReply:
        return LiveReply(edit, self.pacer, channel)

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
        produce: Callable[..., Awaitable[Answer]],  # (oracle, clearance, on_stage, on_text, history) -> Answer
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
        # The thread asked in, when it is one of this campaign's answers' threads.
        thread = channel if isinstance(channel, discord.Thread) and \
            await self.bot.history.campaign_of(channel.id) == table.name else None
        # A thread is public: everyone reading it gets the player answer.
        clearance = Clearance.of(self.is_game_master(interaction.user, table) and private) if thread is not None \
            else self.clearance(interaction, table, private)
        if not await self.take_turn(interaction.user.id, lambda: reply.edit(content=WAITING)):
            raise UserError("You already have questions waiting: ask again once they are answered.")
        try:
            history = await self.bot.history.turns(thread.id, self.bot.settings.history_turns) if thread is not None else []
            live = self.live(lambda text: reply.edit(content=text), interaction.channel_id or 0)

            async def show(stage: str) -> None:
                await reply.edit(content=PROGRESS.get(stage, stage))
                live.touch()

            try:
                answer = await produce(table.oracle, clearance, show, live.update, history)
            finally:
                await live.close()
        except BaseException:
            self.flood.refund(interaction.user.id)
            raise
        answer_id = await table.journal.record(Asked(
            kind, question, interaction.user.id, interaction.user.display_name, interaction.guild_id,
            interaction.channel_id, tuple(t.content for t in history if t.role == "user"), clearance,
            await self.generation(table),
        ), answer)
        try:
            message = await deliver(answer, reply.first, reply.more, asker=asker, view=answer_view(
                table.name, answer_id, sources=bool(answer.citations), language=answer.language))
        except Undelivered:  # late, private, and the asker's direct messages closed: the channel was told
            return
        if message is not None:
            await table.journal.shown_in(answer_id, message.channel.id, message.id)
        if private or message is None:
            return  # a private answer never joins a thread's history: the thread is public
        if thread is not None:
            await self.bot.history.add_turns(thread.id, [Turn("user", question), Turn("assistant", answer.text, answer.told)])
            return
        await self.open_thread(interaction, reply, table, message, thread_title, question, answer)

    async def open_thread(self, interaction: discord.Interaction, reply: InteractionReply, table: Table,
                          message: discord.Message, title: str, question: str, answer: Answer) -> None:
        """A thread on the answer for follow-ups; when Discord cannot open one, the answer stays and
        the asker is told why, privately."""
        why = no_thread_reason(interaction.channel)
        if why is None:
            try:
                thread = await message.create_thread(name=thread_name(title), auto_archive_duration=THREAD_ARCHIVE)
            except discord.Forbidden:
                why = "the Oracle may not create public threads in this channel (a server admin can grant it " \
                      "*Create Public Threads*)"
            except discord.HTTPException as exc:
                log.warning("could not open a thread on answer %s: %s", message.id, exc)
                why = f"Discord refused it ({exc.text or exc.status})"
            else:
                await self.bot.history.add_thread(thread.id, interaction.guild_id, message.channel.id,
                                                  interaction.user.id, table.name)
                await self.bot.history.add_turns(thread.id, [Turn("user", question), Turn("assistant", answer.text, answer.told)])
                return
        await reply.tell(NO_THREAD.format(why=why))

    async def thread_message(self, message: discord.Message) -> None:
        """A message in a thread: answered when it is an Oracle thread's follow-up question."""
        if message.author.bot or not isinstance(message.channel, (discord.Thread, discord.PartialMessageable)):
            return
        table = self.bot.tables.get(await self.bot.history.campaign_of(message.channel.id) or "")
        if table is None:
            return
        thread = await self.thread_of(message)
        if thread is None:
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
            language=await table.index.language(),
        )
        if heard.question is None:
            log.debug("not a question in thread %s (%s)", message.channel.id, heard.why)
            return
        if self.bot.tables.route(thread) is not table:
            # Its channel was mapped to another campaign, or to none, since the thread was opened:
            # its readers now may not be the remembered campaign's players.
            with contextlib.suppress(discord.HTTPException):
                await message.reply(MOVED)
            return
        await self.follow_up(message, table, heard.question, thread)

    async def thread_of(self, message: discord.Message) -> discord.Thread | None:
        """The Oracle thread `message` was posted in. Discord's gateway syncs only active threads,
        and discord.py drops one Discord archived (a week without a word): a member's message
        unarchives it, and may come before the update that says so. Such a thread is fetched."""
        if isinstance(message.channel, discord.Thread):
            return message.channel
        try:
            fetched = await self.bot.fetch_channel(message.channel.id)
        except discord.HTTPException as exc:
            log.warning("a message in Oracle thread %s, which this bot does not hold, and fetching it failed: %s",
                        message.channel.id, exc)
            return None
        if not isinstance(fetched, discord.Thread):
            return None
        log.info("a message in Oracle thread %s, which Discord had archived: fetched it", fetched.id)
        return fetched

    async def follow_up(self, message: discord.Message, table: Table, question: str, thread: discord.Thread) -> None:
        refusal = self.bot.questions.refusal()
        if refusal is not None:
            with contextlib.suppress(discord.HTTPException):
                await message.reply(refusal)
            return
        async with self.bot.questions.answering(message.reply):
            await self.answer_follow_up(message, table, question, thread)

    async def answer_follow_up(self, message: discord.Message, table: Table, question: str,
                               thread: discord.Thread) -> None:
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
            answer, streamed = await self._stream_follow_up(message, table, question, thread, history)
            answer_id = await table.journal.record(Asked(
                "followup", question, message.author.id, message.author.display_name,
                message.guild.id if message.guild else None, thread.id,
                tuple(t.content for t in history if t.role == "user"), Clearance.PLAYER, await self.generation(table),
            ), answer)
            await self._post_follow_up(message, table=table, thread=thread, answer=answer, answer_id=answer_id,
                                       streamed=streamed)
            await self.bot.history.add_turns(thread.id, [Turn("user", question), Turn("assistant", answer.text, answer.told)])
        except PolicyChanged as exc:  # the index is refused to players until the notes are ingested again
            self.flood.refund(message.author.id)
            await message.reply(str(exc))
        except Exception:
            self.flood.refund(message.author.id)
            log.exception("follow-up %r in thread %s failed", clipped(question), thread.id)
            await message.reply(FAILED)
        finally:
            if waited and self.bot.user is not None:  # the bot's own user: known once it is logged in
                with contextlib.suppress(discord.HTTPException):
                    await message.remove_reaction(WAITING, self.bot.user)

    async def _stream_follow_up(self, message: discord.Message, table: Table, question: str, thread: discord.Thread,
                                history: list[Turn]) -> tuple[Answer, discord.Message | None]:
        """Ask the Oracle, its answer streamed into a reply to `message`: the answer, and that reply if sent."""
        reply: discord.Message | None = None

        async def edit(text: str) -> None:
            nonlocal reply
            if reply is None:
                reply = await message.reply(text)
            else:
                await reply.edit(content=text)

        live = self.live(edit, thread.id)
        async with thread.typing():
            # A thread is public: everyone reading it gets the player answer.
            try:
                answer = await table.oracle.ask(question, history=history, on_text=live.update)
            finally:
                await live.close()
        return answer, reply

    async def _post_follow_up(self, message: discord.Message, *, table: Table, thread: discord.Thread, answer: Answer,
                              answer_id: int, streamed: discord.Message | None) -> None:
        """Deliver the recorded answer in the thread, with its buttons, and note where it was shown."""

        async def first(text: str, embed: discord.Embed | None, view: Any) -> Any:
            # The streamed message becomes the answer's first piece.
            if streamed is not None:
                return await streamed.edit(content=text, embed=embed, view=view)
            return await message.reply(text, embed=embed or discord.utils.MISSING, view=view)

        shown = await deliver(
            answer, first, lambda text, embed, view: thread.send(text, embed=embed, view=view),
            view=answer_view(table.name, answer_id, sources=bool(answer.citations), language=answer.language),
        )
        if shown is not None:
            await table.journal.shown_in(answer_id, thread.id, shown.id)

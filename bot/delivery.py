"""Where an interaction's answer goes: into the deferred reply while Discord keeps the interaction
open, else into the channel as an ordinary message.

Discord keeps an interaction's token for 15 minutes; after that every edit and follow-up through it
fails (404 Unknown Webhook, or 401 Invalid Webhook Token) and the channel would keep "✍️ Writing the
answer…" for good. Past `LATE` (a margin before the 15 minutes), or as soon as the token is refused,
the answer is posted in the channel as a reply to the deferred message, with the bot's own token; a
private answer goes to the asker's direct messages, where only they read it, after a line saying
which question it answers. When the asker's direct messages are closed, the channel is told, naming
the asker and nothing of the question, that the answer could not be given and how to get it.
"""
from __future__ import annotations

import contextlib
import logging
from datetime import timedelta
from typing import Any

import discord

log = logging.getLogger(__name__)

LATE = timedelta(minutes=13)
EXPIRED_CODES = {10015, 50027}  # Unknown Webhook, Invalid Webhook Token
MOVED_BELOW = "⌛ This took longer than Discord keeps a question open: the answer is in the reply below."
LATE_DIRECT = "⌛ Your private question in {where} took longer than Discord keeps a question open: its answer follows."
UNDELIVERED = ("{asker} ⌛ your private question took longer than Discord keeps a question open, and your direct "
               "messages are closed to this bot: ask it again with `/oracle ask`, or open your direct messages.")


class Undelivered(Exception):
    """A late private answer with nowhere private to go; the asker was told so in the channel."""


def token_refused(exc: discord.HTTPException) -> bool:
    return exc.code in EXPIRED_CODES


class InteractionReply:
    """The messages of one deferred interaction's answer (`first`, then `more`, as
    `formatting.deliver` calls them)."""

    def __init__(self, interaction: discord.Interaction, *, private: bool) -> None:
        self.interaction = interaction
        self.private = private
        self.original: discord.Message | None = None  # the deferred reply, once an edit returned it
        self.late = False
        self.delivered = False  # the answer's first piece was shown: a later failure must not take it down

    def expired(self) -> bool:
        return self.late or discord.utils.utcnow() - self.interaction.created_at > LATE

    async def edit(self, **fields: Any) -> None:
        """A progress line or a streamed draft in the deferred reply; nothing once it is too late."""
        if self.expired():
            return
        try:
            self.original = await self.interaction.edit_original_response(**fields)
        except discord.HTTPException as exc:
            if not token_refused(exc):
                raise
            self.late = True

    async def first(self, text: str, embed: Any, view: Any) -> Any:
        shown = await self._first(text, embed, view)
        self.delivered = True
        self.interaction.extras["delivered"] = True  # read by `errors.report_failure`
        return shown

    async def _first(self, text: str, embed: Any, view: Any) -> Any:
        if not self.expired():
            try:
                return await self.interaction.edit_original_response(content=text, embed=embed, view=view)
            except discord.HTTPException as exc:
                if not token_refused(exc):
                    raise
                self.late = True
        log.warning("interaction %s outlived its token: its answer is posted %s", self.interaction.id,
                    "to the asker directly" if self.private else "in the channel")
        if self.private:
            return await self._direct(text, embed, view, first=True)
        message = await self._post(text, embed, view, reply=True)
        if self.original is not None:
            channel = self.original.channel
            if not isinstance(channel, discord.GroupChannel):  # a group DM has no messages to edit by id
                with contextlib.suppress(discord.HTTPException):
                    await channel.get_partial_message(self.original.id).edit(content=MOVED_BELOW)
        return message

    async def more(self, text: str, embed: Any, view: Any) -> Any:
        if not self.expired():
            try:
                return await self.interaction.followup.send(text, embed=embed, view=view, ephemeral=self.private,
                                                            wait=True)
            except discord.HTTPException as exc:
                if not token_refused(exc):
                    raise
                self.late = True
        return await self._post(text, embed, view, reply=False)

    async def tell(self, text: str) -> None:
        """A short private note to the asker (why no thread opened); dropped once the token is gone."""
        if self.expired():
            return
        with contextlib.suppress(discord.HTTPException):
            await self.interaction.followup.send(text, ephemeral=True)

    async def _direct(self, text: str, embed: Any, view: Any, *, first: bool) -> discord.Message:
        """A piece of a late private answer, in the asker's direct messages (the first after a line
        saying which question it answers)."""
        user = self.interaction.user
        try:
            if first:
                where = f"<#{self.interaction.channel_id}>" if self.interaction.channel_id else "a server"
                await user.send(LATE_DIRECT.format(where=where))
            return await user.send(text, embed=embed, view=view)
        except discord.Forbidden as exc:
            log.warning("interaction %s: the asker's direct messages are closed: its late private answer is not "
                        "given, and the channel is told (%s)", self.interaction.id, exc.text or exc.status)
            try:
                await self._target().send(UNDELIVERED.format(asker=user.mention),
                                          allowed_mentions=discord.AllowedMentions(users=[user]))
            except discord.HTTPException as told:
                log.warning("interaction %s: nor could the channel be told (%s)", self.interaction.id,
                            told.text or told.status)
            raise Undelivered(f"interaction {self.interaction.id}: the asker's direct messages are closed") from exc

    def _target(self) -> discord.abc.Messageable:
        channel = self.interaction.channel
        target: discord.abc.Messageable
        if isinstance(channel, discord.abc.Messageable):
            target = channel
        elif self.interaction.channel_id is not None:  # a forum, a category, or a channel not cached
            target = self.interaction.client.get_partial_messageable(self.interaction.channel_id)
        else:
            raise RuntimeError(f"interaction {self.interaction.id} names no channel to post its answer in")
        return target

    async def _post(self, text: str, embed: Any, view: Any, *, reply: bool) -> discord.Message:
        if self.private:
            return await self._direct(text, embed, view, first=False)
        target = self._target()
        if reply and self.original:
            reference = self.original.to_reference(fail_if_not_exists=False)
            return await target.send(text, embed=embed, view=view, reference=reference)
        return await target.send(text, embed=embed, view=view)

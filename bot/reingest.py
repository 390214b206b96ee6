"""A reingest from Discord: progress and summary where the game master reads them, for as long as the
ingest takes, then players told what is new. Used by `/oracle reingest` and by watching the notes.

Discord lets a bot edit an interaction's reply for 15 minutes; a first ingest with annotations, or
one after changing the model, can take longer. So the progress is an ordinary message (in a
game-master channel, else the game master's direct messages) that the bot may edit for as long as
it needs; only when neither can be written to does it fall back to the private reply, and the
summary always goes to the log as well. What players are told is new is the campaign's
(`tables.Table.news`), announced by the caller.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import discord

from oracle import Clearance, Index, IngestBusy, IngestError, IngestProgress, IngestReport, Titled, ingest

from .formatting import split_message
from .reports import announcement, ingest_summary, progress_line

log = logging.getLogger(__name__)

PROGRESS_EVERY = 2.0  # seconds between edits of the progress message
STARTED = "⚙️ Reingest started…"


class ProgressReport:
    """Where a reingest reports: an ordinary message when there is one (no time limit), else the
    interaction's private reply while Discord allows it, else (`None` of both) the log alone; the
    summary goes to the log too, so it is never lost."""

    def __init__(self, interaction: discord.Interaction | None, message: discord.Message | None) -> None:
        self.interaction = interaction
        self.message = message

    async def edit(self, text: str) -> None:
        if self.message is not None:
            await self.message.edit(content=text)
        elif self.interaction is not None:
            await self.interaction.edit_original_response(content=text)

    async def finish(self, text: str) -> None:
        log.info("reingest: %s", text)
        pieces = split_message(text)
        try:
            await self.edit(pieces[0])
            for piece in pieces[1:]:
                if self.message is not None:
                    await self.message.channel.send(piece)
                elif self.interaction is not None:
                    await self.interaction.followup.send(piece, ephemeral=True)
        except discord.HTTPException:
            log.warning("could not show the reingest summary in Discord (it is in this log)", exc_info=True)


async def progress_message(interaction: discord.Interaction, *, gm_channel: bool) -> ProgressReport:
    """An ordinary message to report on: in this channel when it is a game-master channel, else in
    the asker's direct messages; the private reply says where."""
    channel = interaction.channel
    where: Any = channel if gm_channel and isinstance(channel, discord.abc.Messageable) else interaction.user
    try:
        message = await where.send(STARTED)
    except discord.HTTPException as exc:
        log.warning("cannot post reingest progress outside the interaction (%s)", exc)
        await interaction.edit_original_response(content=STARTED)
        return ProgressReport(interaction, None)
    place = "your direct messages" if where is interaction.user else "this channel"
    with contextlib.suppress(discord.HTTPException):
        await interaction.edit_original_response(content=f"⚙️ Reingest started: progress and summary in {place}.")
    return ProgressReport(interaction, message)


def announce_channel(client: discord.Client, channel_id: int | None) -> Any:
    """The channel `ORACLE_ANNOUNCE_CHANNEL` names, if the bot can see it."""
    if channel_id is None:
        return None
    channel = client.get_channel(channel_id)
    if channel is None:
        log.warning("ORACLE_ANNOUNCE_CHANNEL=%s is not a channel the bot can see", channel_id)
    return channel


async def run_reingest(index: Index, *, by: str, report_to: ProgressReport) -> IngestReport:
    """Ingest what changed, reporting progress every `PROGRESS_EVERY` seconds, then the summary.
    IngestBusy and IngestError are reported, then raised."""
    latest: dict[str, IngestProgress] = {}

    async def report_progress() -> None:
        while True:
            await asyncio.sleep(PROGRESS_EVERY)
            if latest:
                with contextlib.suppress(discord.HTTPException):
                    await report_to.edit(progress_line(latest))

    updater = asyncio.create_task(report_progress())
    try:
        report = await ingest(index, progress=lambda event: latest.__setitem__(event.stage, event), by=by)
    except IngestBusy as exc:
        await report_to.finish(f"Not started: {exc}.")
        raise
    except IngestError as exc:
        await report_to.finish(f"Reingest failed: {exc}.")
        raise
    finally:
        updater.cancel()
    async with index.snapshot() as store:
        everything = await store.titles(Clearance.GM)
    await report_to.finish(ingest_summary(report, everything))
    return report


async def announce(channel: Any, new: list[Titled]) -> None:
    """Tell players what is new in the notes they can read."""
    if not new:
        return
    try:
        for piece in split_message(announcement(new)):
            await channel.send(piece)
    except discord.HTTPException:
        log.warning("could not announce the new notes in %s", getattr(channel, "id", channel), exc_info=True)

"""What a member reads when a command or a button fails: one sentence, never a traceback, and
never Discord's "This interaction failed"."""
from __future__ import annotations

import contextlib
import logging

import discord

from oracle import PolicyChanged, clipped

log = logging.getLogger(__name__)

FAILED = "Something went wrong answering that; the game master can find the details in the log."
FAILED_AFTER = ("Your answer was given, but something after it went wrong (keeping it on record, or opening "
                "its thread); the game master can find the details in the log.")


class UserError(Exception):
    """Shown to the user as one short sentence."""


async def report_failure(interaction: discord.Interaction, error: BaseException) -> None:
    """Answer a failed interaction (a command of the tree, a button) privately with one sentence:
    the `UserError`'s own, else `FAILED` with the details in the log."""
    original = getattr(error, "original", error)
    if isinstance(original, (UserError, PolicyChanged)):  # sentences written for whoever asked
        message = str(original)
    else:
        what = interaction.command.qualified_name if interaction.command else interaction.data and \
            interaction.data.get("custom_id")
        log.error("%s failed (%s)", f"/{what}" if interaction.command else f"button {what}",
                  clipped(str(interaction.namespace)) if interaction.command else interaction.user, exc_info=original)
        message = FAILED
    delivered = interaction.extras.get("delivered", False)  # set by `delivery.InteractionReply.first`
    if delivered and message == FAILED:
        message = FAILED_AFTER
    try:
        if interaction.response.is_done():
            # The deferred message may say "Searching…" to the whole channel: take it down, unless it
            # is the answer itself by now.
            if not delivered:
                with contextlib.suppress(discord.HTTPException):
                    await interaction.delete_original_response()
            await interaction.followup.send(message, ephemeral=True)
        else:
            await interaction.response.send_message(message, ephemeral=True)
    except discord.HTTPException:
        log.warning("could not report an error to the user", exc_info=True)

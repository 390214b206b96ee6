"""Discord's numbers the fake speaks: API version, intents, message flags, channel and
interaction types, which callback types each interaction accepts, and the guild's permissions.
"""

from __future__ import annotations

import discord

API_VERSION = 10
DISCORD_EPOCH_MS = 1_420_070_400_000

# Gateway intents (bits).
INTENT_GUILDS = 1 << 0
INTENT_GUILD_MEMBERS = 1 << 1
INTENT_GUILD_PRESENCES = 1 << 8
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_MESSAGE_CONTENT = 1 << 15
PRIVILEGED_INTENTS = INTENT_GUILD_MEMBERS | INTENT_GUILD_PRESENCES | INTENT_MESSAGE_CONTENT

# Message flags.
SUPPRESS_EMBEDS = 1 << 2
EPHEMERAL = 1 << 6
LOADING = 1 << 7
SUPPRESS_NOTIFICATIONS = 1 << 12

# Channel types.
GUILD_TEXT = 0
PUBLIC_THREAD = 11
PRIVATE_THREAD = 12
THREAD_TYPES = (10, PUBLIC_THREAD, PRIVATE_THREAD)

# Interaction types and callback types.
PING, APPLICATION_COMMAND, MESSAGE_COMPONENT, AUTOCOMPLETE, MODAL_SUBMIT = 1, 2, 3, 4, 5
CALLBACKS_ALLOWED = {
    APPLICATION_COMMAND: {4, 5, 9},
    MESSAGE_COMPONENT: {4, 5, 6, 7, 9},
    AUTOCOMPLETE: {8},
    MODAL_SUBMIT: {4, 5, 6, 7},
}

# Permissions.
P = discord.Permissions
EVERYONE_PERMS = P(
    view_channel=True, send_messages=True, read_message_history=True, embed_links=True,
    attach_files=True, add_reactions=True, use_application_commands=True,
    create_public_threads=True, send_messages_in_threads=True,
).value
GM_PERMS = P(manage_messages=True, manage_threads=True, mention_everyone=True).value
BOT_PERMS = P(
    view_channel=True, send_messages=True, read_message_history=True, embed_links=True,
    attach_files=True, add_reactions=True, create_public_threads=True,
    send_messages_in_threads=True, manage_threads=True,
).value
ALL_PERMS = P.all().value
ADMINISTRATOR = P(administrator=True).value

"""Discord's numbers the fake speaks: API version, intents, message flags, channel, command and
interaction types, which callback types each interaction accepts, and the guild's permissions
(and the single permission bits the fake enforces).
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
INTENT_DIRECT_MESSAGES = 1 << 12
INTENT_MESSAGE_CONTENT = 1 << 15
PRIVILEGED_INTENTS = INTENT_GUILD_MEMBERS | INTENT_GUILD_PRESENCES | INTENT_MESSAGE_CONTENT

# Message flags.
SUPPRESS_EMBEDS = 1 << 2
EPHEMERAL = 1 << 6
LOADING = 1 << 7
SUPPRESS_NOTIFICATIONS = 1 << 12
IS_COMPONENTS_V2 = 1 << 15

# Channel types.
GUILD_TEXT = 0
DM = 1
GUILD_VOICE = 2
GUILD_CATEGORY = 4
GUILD_FORUM = 15
PUBLIC_THREAD = 11
PRIVATE_THREAD = 12
THREAD_TYPES = (10, PUBLIC_THREAD, PRIVATE_THREAD)
MESSAGEABLE_TYPES = (GUILD_TEXT, GUILD_VOICE, *THREAD_TYPES)  # where messages can be posted (DMs apart)

# Application command types.
CHAT_INPUT, USER_COMMAND, MESSAGE_COMMAND = 1, 2, 3

# Interaction types and callback types.
# Modals (callback 9) are left out: the Oracle opens none.
APPLICATION_COMMAND, MESSAGE_COMPONENT, AUTOCOMPLETE = 2, 3, 4
CALLBACKS_ALLOWED = {APPLICATION_COMMAND: {4, 5}, MESSAGE_COMPONENT: {4, 5, 6, 7}, AUTOCOMPLETE: {8}}

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
VIEW_CHANNEL = P(view_channel=True).value
SEND_MESSAGES = P(send_messages=True).value
SEND_MESSAGES_IN_THREADS = P(send_messages_in_threads=True).value
SEND_TTS_MESSAGES = P(send_tts_messages=True).value
CREATE_PUBLIC_THREADS = P(create_public_threads=True).value
CREATE_PRIVATE_THREADS = P(create_private_threads=True).value
ADD_REACTIONS = P(add_reactions=True).value
READ_MESSAGE_HISTORY = P(read_message_history=True).value
USE_APPLICATION_COMMANDS = P(use_application_commands=True).value

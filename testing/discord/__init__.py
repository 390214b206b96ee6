"""A fake Discord for tests: a real gateway websocket and REST API on 127.0.0.1.

Why a real server rather than mocks of discord.py: the bot's behaviour that
matters (acknowledging an interaction within 3 s, editing the deferred
response with progress, followups, threads, reconnecting, rate limits) lives at
the boundary between discord.py and Discord. A real socket speaking Discord's
gateway (JSON, optionally ``zlib-stream``) and REST protocols lets the
unmodified ``discord.Client`` / ``commands.Bot`` do exactly what it does in
production: ``discord.http.Route.BASE`` and
``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY`` are the only things
pointed elsewhere (``FakeDiscord`` does that itself when used as an async
context manager, and restores them on exit).

Protocol shapes follow the Discord API docs (API v10) and what discord.py 2.7
reads in ``state.py``, ``gateway.py``, ``http.py``, ``interactions.py`` and
``webhook/async_.py``. Where Discord's exact error text is not documented the
fake uses Discord's documented JSON error *codes* (10003 Unknown Channel, 10008
Unknown Message, 10015 Unknown Webhook, 10062 Unknown interaction, 40060
already acknowledged, 50006 empty message, 50007 cannot message the user, 50008
non-text channel, 50013 Missing Permissions, 50024 wrong channel type, 50027
Invalid Webhook Token, 50035 Invalid Form Body, ...).

Where each part lives (``FakeDiscord`` in ``server.py`` is built from one base class per concern,
all sharing the state its ``__init__`` sets):

* ``server.py`` -- ``FakeDiscord``: the aiohttp server, patching discord.py, ``run_client``, waiting.
* ``gateway.py`` -- the websocket: IDENTIFY/RESUME/heartbeats, dispatch, RECONNECT and friends.
* ``rest.py`` -- the route table, recorded requests, JSON errors, rate limits, message and component limits.
* ``interactions.py`` -- INTERACTION_CREATE (commands, context menus, clicks), the 3 s acknowledgement,
  tokens and the simulated clock, followups.
* ``commands.py`` -- command registration and the options a user's ``/command`` carries.
* ``channels.py`` -- the message store, mentions, edits, channel messages, threads, forum posts,
  reactions and DMs.
* ``permissions.py`` -- permission overwrites, permissions in a channel, 403 Missing Permissions.
* ``models.py`` -- members, roles, channels and messages as the fake stores them; their payloads.
* ``constants.py`` -- intents, flags, channel/command/interaction types, permissions.

Typical use::

    async with FakeDiscord() as fake:                     # listens, patches discord.py
        bot = MyBot(intents=..., guild_ready_timeout=0.05)
        async with fake.run_client(bot):                  # bot.start("fake-token"), waits for READY
            inter = await fake.interaction("oracle ask", {"question": "Who is Pip?"},
                                           member=fake.player)
            await inter.wait_followups(1)
            assert (5, []) == (inter.response.type, inter.rejected)
            assert [e.body["content"] for e in inter.edits] == ["Searching…", "Writing…"]
            assert inter.followups[0].content.startswith("Pip")
            choices = await fake.autocomplete("oracle ask", {"question": "Mir"})
            msg = await fake.message(thread_id, fake.player, "and then?")

The world: one guild (``fake.guild_id``, "The Ember Road") with roles
@everyone, "GM" (``fake.gm_role_id``), "Player" (``fake.player_role_id``) and
the bot's managed role "Oracle"; members ``fake.owner`` (owns the guild, no
roles), ``fake.gm`` (GM role), ``fake.player`` (Player role) and ``fake.bot``
(the application's bot user, id == ``fake.app_id``); one text channel
``fake.channel_id`` ("#campaign"). ``add_member`` / ``add_role`` add more.

Changing the world (models.py, channels.py, permissions.py; each announced to a connected client
as Discord would, and returning a ``PendingId`` / ``Pending`` one may ``await`` until the events
were sent -- later dispatches wait for them anyway; the client handles them a moment later, so
wait for its cache with ``fake.wait_until``)::

    category = fake.add_category("Campaign")                          # type 4; CHANNEL_CREATE
    lore = fake.add_text_channel("lore", topic=None, parent_id=category)
    table = fake.add_voice_channel("table", parent_id=category)       # type 2, with its text chat
    forum = fake.add_forum_channel("questions", parent_id=category)   # type 15, posts only
    post = fake.add_forum_post(forum, fake.player, "Where?", "...")   # THREAD_CREATE + MESSAGE_CREATE
    side = fake.add_thread(lore, "side talk", owner=fake.gm)          # THREAD_CREATE, no starter
    await fake.set_overwrite(lore, fake.bot_role_id, deny=perms)      # or a FakeMember; CHANNEL_UPDATE
    fake.permissions_in(fake.player, lore)                            # int, overwrites applied
    fake.close_dms(fake.player); fake.dm_messages(fake.player)

Acting as users (interactions.py)::

    inter = await fake.context_menu("Ask the Oracle", message, member=fake.gm)  # message command
    inter = await fake.user_context_menu("Profile", fake.player)                # user command
    inter = await fake.click(message, "bell:7", member=fake.gm)  # a button really on a visible message
    fake.advance(15 * 60 + 1)                                    # every interaction 15 min older

Realism notes, kept on purpose because they are what bites in production:

* Responses carry ``Content-Type: application/json`` exactly (discord.py only
  parses JSON for that exact value) and ``Via: 1.1 google`` (without it
  discord.py treats a 429 as a Cloudflare ban and raises).
* Sending and editing messages share one bucket per channel, 5 per 5 s as Discord gives a bot
  (``channel_message_budget``; None lifts it): every answer carries the bucket's X-RateLimit-*
  headers, by which discord.py waits for the next window, and a request past it gets a 429.
* An interaction callback later than ``ack_deadline`` (3 s) after the
  INTERACTION_CREATE was sent is refused with 404 Unknown interaction (10062);
  a second callback gets 400 (40060). Followups / ``@original`` edits before
  the acknowledgement get 404 Unknown Webhook (10015).
* The first followup after a DEFERRED (type 5) response that was never edited
  *replaces* the loading message (same message id, ephemerality of the defer),
  as Discord does; it is then both ``inter.original`` and ``inter.followups[0]``.
* Message bodies are checked against Discord's limits (2000 characters of
  content, 10 embeds, 6000 embed characters, title 256, description 4096,
  25 fields, ...) and empty messages are refused; command registrations are
  checked (lowercase names 1-32, descriptions 1-100, <= 25 options/choices,
  required options first, ...). Failures are 400 Invalid Form Body (50035).
* MESSAGE_CREATE needs the GUILD_MESSAGES intent; without MESSAGE_CONTENT the
  content/embeds/attachments/components are blanked unless the bot is
  mentioned or is the author. Privileged intents not enabled on the fake
  "application" (``privileged_intents``) close the gateway with 4014.
* Messages the bot sends (channel messages, non-ephemeral interaction
  responses and followups) come back over the gateway as MESSAGE_CREATE /
  MESSAGE_UPDATE, as on Discord (``echo_bot_messages=False`` turns that off).
* Permissions are Discord's: @everyone and the member's roles, ADMINISTRATOR / owner = all, then
  the channel's @everyone, role and member overwrites (threads use their parent's). The bot's
  REST actions need them (403 Missing Permissions, 50013: sending needs View Channel + Send
  Messages, or Send Messages in Threads in a thread; a thread from a message Create Public
  Threads; a reaction Add Reactions + Read Message History). Interaction callbacks, ``@original``
  edits and followups are webhooks and need none. An interaction's ``app_permissions``,
  ``channel.permissions`` and ``member.permissions`` are computed for its channel; a member who
  cannot view a channel or use commands there cannot start an interaction in it, nor post,
  open a thread or a forum post where their permissions forbid it (ValueError); nothing from a
  channel the bot cannot view reaches it over the gateway.
* A thread cannot be opened from a message in a thread, a forum post or a voice channel's chat
  (400, 50024); nothing is posted straight into a forum (400, 50008); a DM to a member who closed
  them is refused (403, 50007).
* Components are checked (<= 5 action rows of 1-5 buttons or one select; button style, custom_id
  1-100 and unique, link buttons with url and no custom_id, a label <= 80 or an emoji): 400 50035
  with the error tree under ``components``.
* Threads archive after their ``auto_archive_duration`` without a message (``await
  pass_time(seconds)``: THREAD_UPDATE, and READY holds active threads only); edits and reactions
  in an archived thread are 400 (50083); a message unarchives it (MESSAGE_CREATE first, then
  THREAD_UPDATE), unless it is locked (``archiving.py``).
* ``advance(seconds)`` is the simulated clock of interaction tokens: after ``token_ttl`` (15 min)
  ``@original`` edits and followups are 401 Invalid Webhook Token (50027), which discord.py
  raises as a plain ``discord.HTTPException`` (status 401).
* RESUME replays the events the client missed (those with a sequence number
  above the one it resumes from; usually none) and then sends RESUMED.
"""

from .constants import EPHEMERAL, LOADING
from .gateway import GatewayConnection, GatewaySession
from .interactions import FakeInteraction, InteractionEvent
from .models import FakeMember, FakeMessage, Pending, PendingId, RecordedFile
from .rest import ApiError, RateLimitRule, RecordedRequest
from .server import FakeDiscord

__all__ = [
    "ApiError",
    "EPHEMERAL",
    "FakeDiscord",
    "FakeInteraction",
    "FakeMember",
    "FakeMessage",
    "GatewayConnection",
    "GatewaySession",
    "InteractionEvent",
    "LOADING",
    "Pending",
    "PendingId",
    "RateLimitRule",
    "RecordedFile",
    "RecordedRequest",
]

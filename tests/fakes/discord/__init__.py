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
already acknowledged, 50006 empty message, 50035 Invalid Form Body, ...).

Where each part lives (``FakeDiscord`` in ``server.py`` is built from one base class per concern,
all sharing the state its ``__init__`` sets):

* ``server.py`` -- ``FakeDiscord``: the aiohttp server, patching discord.py, ``run_client``, waiting.
* ``gateway.py`` -- the websocket: IDENTIFY/RESUME/heartbeats, dispatch, RECONNECT and friends.
* ``rest.py`` -- the route table, recorded requests, JSON errors, rate limits, message limits.
* ``interactions.py`` -- INTERACTION_CREATE, the 3 s acknowledgement, tokens, followups.
* ``commands.py`` -- command registration and the options a user's ``/command`` carries.
* ``channels.py`` -- the message store, mentions, edits, channel messages and threads.
* ``models.py`` -- members, roles, channels and messages as the fake stores them; their payloads.
* ``constants.py`` -- intents, flags, channel/interaction types, permissions.

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
``fake.channel_id`` ("#campaign"). ``add_member`` / ``add_text_channel`` add more.

Realism notes, kept on purpose because they are what bites in production:

* Responses carry ``Content-Type: application/json`` exactly (discord.py only
  parses JSON for that exact value) and ``Via: 1.1 google`` (without it
  discord.py treats a 429 as a Cloudflare ban and raises).
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
* RESUME replays the events the client missed (those with a sequence number
  above the one it resumes from; usually none) and then sends RESUMED.
"""

from .constants import EPHEMERAL, LOADING
from .gateway import GatewayConnection, GatewaySession
from .interactions import FakeInteraction, InteractionEvent
from .models import FakeMember, FakeMessage, RecordedFile
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
    "RateLimitRule",
    "RecordedFile",
    "RecordedRequest",
]

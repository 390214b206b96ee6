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

from __future__ import annotations

import asyncio
import copy
import fnmatch
import hashlib
import itertools
import json
import math
import re
import secrets
import threading
import time
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable

import discord
import discord.gateway
import discord.http
import yarl
from aiohttp import WSMsgType, web

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

_USER_MENTION = re.compile(r"<@!?(\d+)>")
_ROLE_MENTION = re.compile(r"<@&(\d+)>")
_CHAT_NAME = re.compile(r"^[-_'\w\u0900-\u097F\u0E00-\u0E7F]{1,32}$")


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def _flatten(data: Any) -> Any:
    """A JSON round trip: a detached, plain copy."""
    return json.loads(json.dumps(data))


class _Snowflakes:
    """Real-looking snowflakes: current time in the top bits, strictly increasing."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
            value = max((ms << 22) | (1 << 17), self._last + 1)
            self._last = value
            return value


# --------------------------------------------------------------------------
# Records and world objects.
# --------------------------------------------------------------------------


class ApiError(Exception):
    """Raised inside route handlers; becomes Discord's JSON error body."""

    def __init__(self, status: int, code: int, message: str, errors: dict | None = None) -> None:
        super().__init__(f"{status} {code} {message}")
        self.status = status
        self.body: dict[str, Any] = {"message": message, "code": code}
        if errors:
            self.body["errors"] = errors


def _invalid_form(errors: dict) -> ApiError:
    return ApiError(400, 50035, "Invalid Form Body", errors)


def _err(code: str, message: str) -> dict:
    return {"_errors": [{"code": code, "message": message}]}


@dataclass
class FakeMember:
    """A guild member (or the bot). ``roles`` are role ids besides @everyone."""

    id: int
    username: str
    global_name: str | None = None
    roles: list[int] = field(default_factory=list)
    nick: str | None = None
    bot: bool = False
    joined_at: str = "2024-01-01T00:00:00+00:00"

    @property
    def mention(self) -> str:
        return f"<@{self.id}>"

    def user_payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": str(self.id),
            "username": self.username,
            "discriminator": "0",
            "global_name": self.global_name,
            "avatar": None,
            "avatar_decoration_data": None,
            "banner": None,
            "accent_color": None,
            "public_flags": 0,
        }
        if self.bot:
            data["bot"] = True
        return data

    def member_payload(self, *, with_user: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "nick": self.nick,
            "avatar": None,
            "banner": None,
            "roles": [str(r) for r in self.roles],
            "joined_at": self.joined_at,
            "premium_since": None,
            "deaf": False,
            "mute": False,
            "flags": 0,
            "pending": False,
            "communication_disabled_until": None,
        }
        if with_user:
            data["user"] = self.user_payload()
        return data


@dataclass
class RecordedFile:
    field: str
    filename: str | None
    content_type: str | None
    data: bytes


@dataclass
class RecordedRequest:
    """One REST request as the fake saw it, and what it answered."""

    method: str
    path: str  # after /api/v10, e.g. "/channels/123/messages"
    query: dict[str, str]
    headers: dict[str, str]
    json: Any  # the JSON body (for multipart: the payload_json part), or None
    files: list[RecordedFile]
    at: float  # time.monotonic() on arrival
    route: str | None = None  # template, e.g. "/channels/{channel_id}/messages"; None if unknown
    status: int | None = None
    response: Any = None
    rate_limited: bool = False

    @property
    def key(self) -> str:
        return f"{self.method} {self.route or self.path}"


@dataclass
class RateLimitRule:
    """The next ``remaining`` requests matching method and route/path get a 429."""

    method: str
    route: str
    remaining: int
    retry_after: float
    is_global: bool = False
    scope: str = "user"
    hits: list[RecordedRequest] = field(default_factory=list)

    def matches(self, req: RecordedRequest) -> bool:
        if self.method not in ("*", req.method):
            return False
        return self.route in (req.route, req.path) or fnmatch.fnmatchcase(req.path, self.route)


@dataclass
class FakeMessage:
    """A message in the fake's store. ``data`` is the current message object (REST shape)."""

    data: dict[str, Any]
    source: str  # "channel", "interaction", "followup", "user", "system"
    body: Any = None  # the request JSON that created it (None for injected user messages)
    edits: list[Any] = field(default_factory=list)  # request JSONs of later edits, in order
    interaction_id: int | None = None
    deleted: bool = False
    files: list[RecordedFile] = field(default_factory=list)
    reactions: list[str] = field(default_factory=list)

    @property
    def id(self) -> int:
        return int(self.data["id"])

    @property
    def channel_id(self) -> int:
        return int(self.data["channel_id"])

    @property
    def author_id(self) -> int:
        return int(self.data["author"]["id"])

    @property
    def content(self) -> str:
        return self.data["content"]

    @property
    def embeds(self) -> list[dict]:
        return self.data["embeds"]

    @property
    def components(self) -> list[dict]:
        return self.data["components"]

    @property
    def attachments(self) -> list[dict]:
        return self.data["attachments"]

    @property
    def flags(self) -> int:
        return self.data["flags"]

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & EPHEMERAL)

    @property
    def loading(self) -> bool:
        return bool(self.flags & LOADING)

    @property
    def mention_ids(self) -> list[int]:
        """Users this message actually pings (after allowed_mentions)."""
        return [int(u["id"]) for u in self.data["mentions"]]

    @property
    def allowed_mentions(self) -> Any:
        """The latest ``allowed_mentions`` the bot sent for this message (None if never sent)."""
        for body in reversed([self.body, *self.edits]):
            if isinstance(body, dict) and "allowed_mentions" in body:
                return body["allowed_mentions"]
        return None

    @property
    def thread_id(self) -> int | None:
        thread = self.data.get("thread")
        return int(thread["id"]) if thread else None

    def __repr__(self) -> str:
        return (
            f"<FakeMessage id={self.id} channel={self.channel_id} source={self.source}"
            f" flags={self.flags} content={self.content!r}>"
        )


@dataclass
class InteractionEvent:
    """One REST call the bot made for an interaction, accepted or not, in arrival order."""

    kind: str  # callback | edit_original | delete_original | followup | edit_followup | delete_followup
    at: float  # time.monotonic()
    elapsed: float  # seconds since the INTERACTION_CREATE was sent
    status: int
    body: Any  # request JSON
    type: int | None = None  # callback type (4, 5, 6, 7, 8, 9) for kind == "callback"
    message_id: int | None = None
    error: dict | None = None  # Discord's error JSON when refused
    replaced_original: bool = False  # a followup that resolved the deferred loading message

    @property
    def accepted(self) -> bool:
        return 200 <= self.status < 300

    @property
    def data(self) -> Any:
        """``body["data"]`` of a callback."""
        return (self.body or {}).get("data") if isinstance(self.body, dict) else None


class FakeInteraction:
    """Handle on an interaction the fake sent; fills in as the bot responds."""

    def __init__(self, fake: FakeDiscord, payload: dict[str, Any], member: FakeMember) -> None:
        self._fake = fake
        self.payload = payload
        self.id = int(payload["id"])
        self.token: str = payload["token"]
        self.type: int = payload["type"]
        self.member = member
        self.channel_id = int(payload["channel_id"])
        self.guild_id = int(payload["guild_id"])
        self.created = time.monotonic()
        self.events: list[InteractionEvent] = []
        self.original: FakeMessage | None = None
        self.followups: list[FakeMessage] = []
        self.source_message: FakeMessage | None = None  # for component interactions
        self.choices: list[dict] | None = None  # autocomplete answer
        self.modal: dict | None = None  # MODAL callback data

    # ----- reading ---------------------------------------------------------

    @property
    def name(self) -> str:
        """Full command path, e.g. "oracle echo" (custom_id for components)."""
        data = self.payload.get("data") or {}
        if "custom_id" in data:
            return data["custom_id"]
        parts = [data.get("name", "")]
        options = data.get("options") or []
        while options and options[0].get("type") in (1, 2):
            parts.append(options[0]["name"])
            options = options[0].get("options") or []
        return " ".join(parts)

    @property
    def callbacks(self) -> list[InteractionEvent]:
        return [e for e in self.events if e.kind == "callback"]

    @property
    def response(self) -> InteractionEvent | None:
        """The accepted callback (the acknowledgement), if any."""
        return next((e for e in self.callbacks if e.accepted), None)

    @property
    def acknowledged(self) -> bool:
        return self.response is not None

    @property
    def response_type(self) -> int | None:
        return self.response.type if self.response else None

    @property
    def edits(self) -> list[InteractionEvent]:
        return [e for e in self.events if e.kind == "edit_original" and e.accepted]

    @property
    def rejected(self) -> list[InteractionEvent]:
        return [e for e in self.events if not e.accepted]

    @property
    def messages(self) -> list[FakeMessage]:
        out = [self.original] if self.original is not None else []
        return out + [m for m in self.followups if m not in out]

    def elapsed(self) -> float:
        return time.monotonic() - self.created

    # ----- waiting ---------------------------------------------------------

    async def wait(self, predicate: Callable[[FakeInteraction], Any], timeout: float = 5.0,
                   what: str = "condition") -> FakeInteraction:
        await self._fake.wait_until(lambda: predicate(self), timeout, f"interaction {self.name!r}: {what}")
        return self

    async def wait_acknowledged(self, timeout: float | None = None) -> InteractionEvent:
        timeout = self._fake.ack_deadline + 1.0 if timeout is None else timeout
        await self.wait(lambda i: i.acknowledged, timeout, "acknowledgement")
        assert self.response is not None
        return self.response

    async def wait_edits(self, n: int = 1, timeout: float = 5.0) -> list[InteractionEvent]:
        await self.wait(lambda i: len(i.edits) >= n, timeout, f"{n} edit(s) of the original")
        return self.edits

    async def wait_followups(self, n: int = 1, timeout: float = 5.0) -> list[FakeMessage]:
        await self.wait(lambda i: len(i.followups) >= n, timeout, f"{n} followup(s)")
        return self.followups

    async def settle(self, idle: float = 0.3, timeout: float = 10.0) -> list[InteractionEvent]:
        """Wait for the acknowledgement, then until no new event came for ``idle`` seconds."""
        deadline = time.monotonic() + timeout
        await self.wait_acknowledged(timeout)
        while True:
            count = len(self.events)
            await asyncio.sleep(idle)
            if len(self.events) == count:
                return list(self.events)
            if time.monotonic() > deadline:
                raise TimeoutError(f"interaction {self.name!r} still busy after {timeout}s")

    def __repr__(self) -> str:
        return f"<FakeInteraction id={self.id} type={self.type} name={self.name!r} events={len(self.events)}>"


class GatewayConnection:
    """One websocket connection to the fake gateway."""

    _ids = itertools.count(1)

    def __init__(self, ws: web.WebSocketResponse, request: web.Request) -> None:
        self.id = next(self._ids)
        self.ws = ws
        self.path = request.path
        self.query = dict(request.query)
        self.compress = self.query.get("compress")
        self._zlib = zlib.compressobj() if self.compress == "zlib-stream" else None
        self.session: GatewaySession | None = None
        self.kind: str | None = None  # "identify" or "resume" once the client said which
        self.received: list[dict] = []
        self.sent: list[dict] = []
        self.heartbeats = 0
        self.replayed = 0  # events replayed on RESUME
        self.opened_at = time.monotonic()
        self.closed_at: float | None = None
        self.close_code: int | None = None  # the code the client closed with (or answered)
        self.closed_by_server: int | None = None  # the code the fake closed with, if it did
        self._lock = asyncio.Lock()

    @property
    def closed(self) -> bool:
        return self.ws.closed or self.closed_at is not None

    async def send(self, payload: dict) -> bool:
        async with self._lock:
            if self.closed:
                return False
            text = json.dumps(payload, separators=(",", ":"))
            try:
                if self._zlib is not None:
                    chunk = self._zlib.compress(text.encode()) + self._zlib.flush(zlib.Z_SYNC_FLUSH)
                    await self.ws.send_bytes(chunk)
                else:
                    await self.ws.send_str(text)
            except (ConnectionError, RuntimeError):
                return False
            self.sent.append(payload)
            return True

    async def close(self, code: int = 1000, message: str = "") -> None:
        if not self.ws.closed:
            self.closed_by_server = code
            await self.ws.close(code=code, message=message.encode())

    def __repr__(self) -> str:
        return f"<GatewayConnection id={self.id} path={self.path} kind={self.kind} closed={self.closed}>"


class GatewaySession:
    """A gateway session (created by IDENTIFY, continued by RESUME)."""

    def __init__(self, session_id: str, identify: dict) -> None:
        self.id = session_id
        self.identify = identify
        self.intents = int(identify.get("intents", 0))
        self.seq = 0
        self.log: list[dict] = []  # every dispatch, for replay on RESUME
        self.conn: GatewayConnection | None = None
        self.lock = asyncio.Lock()
        self.resumes = 0
        self.invalidated = False

    def has(self, intent: int) -> bool:
        return bool(self.intents & intent)

    def __repr__(self) -> str:
        return f"<GatewaySession id={self.id} seq={self.seq} resumes={self.resumes}>"


# --------------------------------------------------------------------------
# The server.
# --------------------------------------------------------------------------


class FakeDiscord:
    """Discord's gateway and REST API for one bot and one guild, on 127.0.0.1."""

    def __init__(
        self,
        *,
        token: str = "fake-token",
        host: str = "127.0.0.1",
        port: int = 0,
        heartbeat_interval_ms: int = 500,
        ack_deadline: float = 3.0,
        token_ttl: float = 15 * 60,
        privileged_intents: int = PRIVILEGED_INTENTS,
        echo_bot_messages: bool = True,
        app_id: int = 1_200_000_000_000_000_001,
        guild_id: int = 1_200_000_000_000_000_010,
        guild_name: str = "The Ember Road",
    ) -> None:
        self.token = token
        self.host = host
        self.port = port
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.ack_deadline = ack_deadline
        self.token_ttl = token_ttl
        self.privileged_intents = privileged_intents
        self.echo_bot_messages = echo_bot_messages
        self.ack_heartbeats = True
        self.errors: list[BaseException] = []  # exceptions inside the fake's own handlers (bugs)
        self._ids = _Snowflakes()

        self.app_id = app_id
        self.guild_id = guild_id
        self.guild_name = guild_name
        self.channel_id = guild_id + 10
        self.gm_role_id = guild_id + 20
        self.player_role_id = guild_id + 21
        self.bot_role_id = guild_id + 22

        self.bot = FakeMember(app_id, "Oracle", None, [self.bot_role_id], bot=True)
        self.owner = FakeMember(guild_id + 30, "owner", "Guild Owner")
        self.gm = FakeMember(guild_id + 31, "gm", "Game Master", [self.gm_role_id])
        self.player = FakeMember(guild_id + 32, "player", "Mirela's Player", [self.player_role_id])
        self.owner_id = self.owner.id
        self.members: dict[int, FakeMember] = {m.id: m for m in (self.bot, self.owner, self.gm, self.player)}
        self.roles: dict[int, dict[str, Any]] = {}
        self._add_role(guild_id, "@everyone", EVERYONE_PERMS, position=0)
        self._add_role(self.player_role_id, "Player", 0, position=1, color=0x3498DB)
        self._add_role(self.gm_role_id, "GM", GM_PERMS, position=2, color=0xE67E22, hoist=True, mentionable=True)
        self._add_role(self.bot_role_id, "Oracle", BOT_PERMS, position=3, managed=True,
                       tags={"bot_id": str(app_id)})
        self.channels: dict[int, dict[str, Any]] = {}
        self.add_text_channel("campaign", channel_id=self.channel_id, topic="Ask the Oracle here")

        # state the tests read
        self.requests: list[RecordedRequest] = []
        self.rate_limits: list[RateLimitRule] = []
        self.gateway_connections: list[GatewayConnection] = []
        self.sessions: list[GatewaySession] = []
        self.presence_updates: list[Any] = []
        self.interactions: list[FakeInteraction] = []
        self.global_commands: list[dict] = []
        self.guild_commands: dict[int, list[dict]] = {}
        self.thread_ids: list[int] = []
        self._messages: dict[int, FakeMessage] = {}
        self._channel_messages: dict[int, list[FakeMessage]] = {}
        self._interactions_by_id: dict[int, FakeInteraction] = {}
        self._interactions_by_token: dict[str, FakeInteraction] = {}
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._saved_patch: tuple[str, yarl.URL] | None = None
        self._routes = self._build_routes()

    # ----- lifecycle ------------------------------------------------------

    @property
    def url(self) -> str:
        if not self.port:
            raise RuntimeError("FakeDiscord is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        """What ``discord.http.Route.BASE`` must be."""
        return f"{self.url}/api/v{API_VERSION}"

    @property
    def ws_url(self) -> str:
        """What ``DiscordWebSocket.DEFAULT_GATEWAY`` must be (as a yarl.URL)."""
        return f"ws://{self.host}:{self.port}/"

    @property
    def resume_gateway_url(self) -> str:
        return f"ws://{self.host}:{self.port}/resume"

    async def start(self) -> FakeDiscord:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/", self._handle_gateway)
        app.router.add_get("/resume", self._handle_gateway)
        app.router.add_get("/attachments/{channel_id}/{attachment_id}/{filename}", self._handle_attachment)
        app.router.add_route("*", "/api/v{version:\\d+}/{tail:.*}", self._handle_api)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        for conn in self.gateway_connections:
            if not conn.closed:
                await conn.close(1001, "fake discord stopping")
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    def patch_discord(self) -> None:
        """Point discord.py (Route.BASE, DEFAULT_GATEWAY) at this fake; ``unpatch_discord`` restores."""
        if self._saved_patch is None:
            self._saved_patch = (discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY)
        discord.http.Route.BASE = self.api_url
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(self.ws_url)

    def unpatch_discord(self) -> None:
        if self._saved_patch is not None:
            discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = self._saved_patch
            self._saved_patch = None

    async def __aenter__(self) -> FakeDiscord:
        await self.start()
        self.patch_discord()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.unpatch_discord()
        await self.stop()

    def run_client(self, client: discord.Client, *, token: str | None = None,
                   timeout: float = 10.0) -> _RunningClient:
        """``async with fake.run_client(bot):`` starts ``bot.start(token)`` in a task, waits
        until the client is ready, and on exit closes it and awaits the task (re-raising
        what it raised). ``bot`` should be built with a small ``guild_ready_timeout``
        (discord.py waits that long after the last GUILD_CREATE before on_ready)."""
        return _RunningClient(self, client, token or self.token, timeout)

    # ----- world building -------------------------------------------------

    def _add_role(self, role_id: int, name: str, permissions: int, *, position: int, color: int = 0,
                  hoist: bool = False, mentionable: bool = False, managed: bool = False,
                  tags: dict | None = None) -> dict:
        role: dict[str, Any] = {
            "id": str(role_id), "name": name, "color": color,
            "colors": {"primary_color": color, "secondary_color": None, "tertiary_color": None},
            "hoist": hoist, "icon": None, "unicode_emoji": None, "position": position,
            "permissions": str(permissions), "managed": managed, "mentionable": mentionable, "flags": 0,
        }
        if tags is not None:
            role["tags"] = tags
        self.roles[role_id] = role
        return role

    def add_role(self, name: str, permissions: int = 0, **kwargs: Any) -> int:
        role_id = self._ids.next()
        position = max(int(r["position"]) for r in self.roles.values()) + 1
        self._add_role(role_id, name, permissions, position=position, **kwargs)
        return role_id

    def add_member(self, username: str, *, roles: list[int] | None = None, global_name: str | None = None,
                   nick: str | None = None, bot: bool = False) -> FakeMember:
        """Add a member (before the client connects, or it will not see it in GUILD_CREATE)."""
        member = FakeMember(self._ids.next(), username, global_name, list(roles or []), nick, bot)
        self.members[member.id] = member
        return member

    def add_text_channel(self, name: str, *, channel_id: int | None = None, topic: str | None = None) -> int:
        channel_id = channel_id or self._ids.next()
        position = sum(1 for c in self.channels.values() if c["type"] == GUILD_TEXT)
        self.channels[channel_id] = {
            "id": str(channel_id), "type": GUILD_TEXT, "guild_id": str(self.guild_id), "name": name,
            "position": position, "permission_overwrites": [], "rate_limit_per_user": 0, "nsfw": False,
            "topic": topic, "last_message_id": None, "parent_id": None,
            "default_auto_archive_duration": 1440, "flags": 0,
        }
        return channel_id

    def permissions_for(self, member: FakeMember) -> int:
        if member.id == self.owner_id:
            return ALL_PERMS
        perms = int(self.roles[self.guild_id]["permissions"])
        for role_id in member.roles:
            if role_id in self.roles:
                perms |= int(self.roles[role_id]["permissions"])
        return ALL_PERMS if perms & ADMINISTRATOR else perms

    def _member(self, who: FakeMember | int | str) -> FakeMember:
        if isinstance(who, FakeMember):
            return who
        try:
            return self.members[int(who)]
        except (KeyError, ValueError):
            raise ValueError(f"unknown member {who!r}") from None

    # ----- payloads -------------------------------------------------------

    def bot_user_payload(self) -> dict[str, Any]:
        return {**self.bot.user_payload(), "verified": True, "mfa_enabled": True, "email": None,
                "flags": 0, "locale": "en-US", "premium_type": 0}

    def application_payload(self) -> dict[str, Any]:
        flags = 0
        if self.privileged_intents & INTENT_GUILD_PRESENCES:
            flags |= 1 << 13
        if self.privileged_intents & INTENT_GUILD_MEMBERS:
            flags |= 1 << 15
        if self.privileged_intents & INTENT_MESSAGE_CONTENT:
            flags |= 1 << 19
        return {
            "id": str(self.app_id), "name": "Oracle", "icon": None, "description": "Campaign notes oracle",
            "summary": "", "type": None, "bot_public": False, "bot_require_code_grant": False,
            "verify_key": "0" * 64, "flags": flags, "owner": self.owner.user_payload(), "team": None,
            "bot": self.bot.user_payload(), "rpc_origins": [], "redirect_uris": [], "tags": [],
            "interactions_endpoint_url": None, "role_connections_verification_url": None,
            "approximate_guild_count": 1, "integration_types_config": {"0": {}},
        }

    def guild_payload(self, *, full: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": str(self.guild_id), "name": self.guild_name, "icon": None, "splash": None,
            "discovery_splash": None, "banner": None, "description": None, "owner_id": str(self.owner_id),
            "afk_channel_id": None, "afk_timeout": 300, "verification_level": 1,
            "default_message_notifications": 1, "explicit_content_filter": 0,
            "roles": [copy.deepcopy(r) for r in self.roles.values()], "emojis": [], "stickers": [],
            "features": [], "mfa_level": 0, "application_id": None,
            "system_channel_id": str(self.channel_id), "system_channel_flags": 0, "rules_channel_id": None,
            "public_updates_channel_id": None, "safety_alerts_channel_id": None, "max_members": 500000,
            "vanity_url_code": None, "premium_tier": 0, "premium_subscription_count": 0,
            "preferred_locale": "en-US", "nsfw_level": 0, "premium_progress_bar_enabled": False,
        }
        if full:
            data.update({
                "joined_at": self.bot.joined_at, "large": False, "unavailable": False, "lazy": True,
                "member_count": len(self.members),
                "members": [m.member_payload() for m in self.members.values()],
                "channels": [copy.deepcopy(c) for c in self.channels.values() if c["type"] not in THREAD_TYPES],
                "threads": [copy.deepcopy(self.channels[t]) for t in self.thread_ids
                            if not self.channels[t]["thread_metadata"]["archived"]],
                "voice_states": [], "presences": [], "stage_instances": [], "guild_scheduled_events": [],
                "soundboard_sounds": [], "embedded_activities": [], "application_command_counts": {},
            })
        return data

    def _ready_payload(self, session: GatewaySession) -> dict[str, Any]:
        data: dict[str, Any] = {
            "v": API_VERSION, "user": self.bot_user_payload(), "user_settings": {},
            "guilds": [{"id": str(self.guild_id), "unavailable": True}],
            "session_id": session.id, "session_type": "normal",
            "resume_gateway_url": self.resume_gateway_url,
            "application": {"id": str(self.app_id), "flags": self.application_payload()["flags"]},
            "private_channels": [], "relationships": [], "presences": [], "guild_join_requests": [],
            "geo_ordered_rtc_regions": ["local"], "auth_session_id_hash": "fake", "_trace": ["fake-discord"],
        }
        shard = session.identify.get("shard")
        if shard is not None:
            data["shard"] = shard
        return data

    def _channel_payload(self, channel_id: int, *, permissions_of: FakeMember | None = None) -> dict:
        data = copy.deepcopy(self.channels[channel_id])
        if permissions_of is not None:
            data["permissions"] = str(self.permissions_for(permissions_of))
        return data

    # ----- waiting --------------------------------------------------------

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
        """Wait until ``predicate()`` is truthy (re-checked on every change, and every 50 ms)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            result = predicate()
            if result:
                return result
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"FakeDiscord: timed out after {timeout}s waiting for {what}")
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.05))
            except asyncio.TimeoutError:
                pass

    async def wait_for_request(self, method: str, route: str, *, count: int = 1,
                               timeout: float = 5.0) -> list[RecordedRequest]:
        """Wait until ``count`` requests matched (route template, exact path or glob)."""
        await self.wait_until(lambda: len(self.requests_for(method, route)) >= count, timeout,
                              f"{count} x {method} {route}")
        return self.requests_for(method, route)

    # ----- inspection -----------------------------------------------------

    def requests_for(self, method: str | None = None, route: str | None = None) -> list[RecordedRequest]:
        out = []
        for req in self.requests:
            if method is not None and req.method != method:
                continue
            if route is not None and route not in (req.route, req.path) and not fnmatch.fnmatchcase(req.path, route):
                continue
            out.append(req)
        return out

    @property
    def unknown_requests(self) -> list[RecordedRequest]:
        """Requests to routes the fake does not implement (answered 404/405)."""
        return [r for r in self.requests if r.route is None]

    def messages(self, channel_id: int | None = None, *, include_deleted: bool = False) -> list[FakeMessage]:
        """Messages in a channel (or all), oldest first; ephemeral ones included (see ``.ephemeral``)."""
        pool = self._channel_messages.get(channel_id, []) if channel_id is not None else list(self._messages.values())
        return [m for m in pool if include_deleted or not m.deleted]

    def get_message(self, message_id: int) -> FakeMessage | None:
        return self._messages.get(int(message_id))

    @property
    def threads(self) -> list[dict[str, Any]]:
        """Thread channel objects, in creation order (current state)."""
        return [self.channels[t] for t in self.thread_ids]

    def commands(self, guild_id: int | None = None) -> list[dict]:
        return self.guild_commands.get(guild_id, []) if guild_id is not None else self.global_commands

    @property
    def session(self) -> GatewaySession | None:
        """The current gateway session (latest one not invalidated)."""
        for session in reversed(self.sessions):
            if not session.invalidated:
                return session
        return None

    @property
    def identify(self) -> dict | None:
        return self.sessions[-1].identify if self.sessions else None

    @property
    def intents(self) -> int | None:
        return self.sessions[-1].intents if self.sessions else None

    def dispatched(self, event: str | None = None) -> list[dict]:
        """Every DISPATCH payload sent (op 0), across sessions, optionally of one event type."""
        return [p for s in self.sessions for p in s.log if event is None or p["t"] == event]

    # ----- gateway ----------------------------------------------------------

    async def _handle_gateway(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(max_msg_size=0, autoping=True)
        if not ws.can_prepare(request).ok:
            return self._json_response(404, {"message": "404: Not Found", "code": 0})
        await ws.prepare(request)
        conn = GatewayConnection(ws, request)
        self.gateway_connections.append(conn)
        self._notify()
        try:
            if request.query.get("encoding", "json") != "json":
                await conn.close(4002, "Decode error.")
                return ws
            await conn.send({"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms,
                                             "_trace": ["fake-discord"]}})
            async for msg in ws:
                if msg.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                    break
                try:
                    payload = json.loads(msg.data)
                except ValueError:
                    await conn.close(4002, "Decode error.")
                    break
                conn.received.append(payload)
                await self._on_gateway_payload(conn, payload)
                self._notify()
        finally:
            conn.closed_at = time.monotonic()
            conn.close_code = ws.close_code
            session = conn.session
            if session is not None and session.conn is conn:
                session.conn = None
            self._notify()
        return ws

    async def _on_gateway_payload(self, conn: GatewayConnection, payload: dict) -> None:
        op = payload.get("op")
        d = payload.get("d")
        if op == 1:
            conn.heartbeats += 1
            if self.ack_heartbeats:
                await conn.send({"op": 11})
        elif op == 2:
            await self._on_identify(conn, d or {})
        elif op == 6:
            await self._on_resume(conn, d or {})
        elif op == 8:
            await self._on_request_members(conn, d or {})
        elif op == 3:
            self.presence_updates.append(d)

    async def _on_identify(self, conn: GatewayConnection, d: dict) -> None:
        if conn.session is not None:
            await conn.close(4005, "Already authenticated.")
            return
        if d.get("token") != self.token:
            await conn.close(4004, "Authentication failed.")
            return
        if "intents" not in d:
            await conn.close(4013, "Invalid intent(s).")
            return
        if int(d["intents"]) & PRIVILEGED_INTENTS & ~self.privileged_intents:
            await conn.close(4014, "Disallowed intent(s).")
            return
        session = GatewaySession(secrets.token_hex(16), d)
        self.sessions.append(session)
        conn.session = session
        conn.kind = "identify"
        async with session.lock:
            session.conn = conn
            await self._dispatch_locked(session, "READY", self._ready_payload(session))
            await self._dispatch_locked(session, "GUILD_CREATE", self.guild_payload())

    async def _on_resume(self, conn: GatewayConnection, d: dict) -> None:
        session = next((s for s in self.sessions if s.id == d.get("session_id")), None)
        if session is None or session.invalidated or d.get("token") != self.token:
            await conn.send({"op": 9, "d": False})
            return
        conn.session = session
        conn.kind = "resume"
        async with session.lock:
            old, session.conn = session.conn, conn
            last = d.get("seq") or 0
            for payload in session.log:
                if payload["s"] > last:
                    await conn.send(payload)
                    conn.replayed += 1
            session.seq += 1
            await conn.send({"op": 0, "t": "RESUMED", "s": session.seq, "d": {"_trace": ["fake-discord"]}})
            session.resumes += 1
        if old is not None and old is not conn:
            await old.close(4000, "Resumed elsewhere.")

    async def _on_request_members(self, conn: GatewayConnection, d: dict) -> None:
        session = conn.session
        if session is None:
            return
        members = list(self.members.values())
        if d.get("user_ids"):
            wanted = {int(u) for u in d["user_ids"]}
            members = [m for m in members if m.id in wanted]
        elif d.get("query"):
            members = [m for m in members if m.username.lower().startswith(str(d["query"]).lower())]
        if d.get("limit"):
            members = members[: int(d["limit"])]
        chunk: dict[str, Any] = {"guild_id": str(self.guild_id), "members": [m.member_payload() for m in members],
                                 "chunk_index": 0, "chunk_count": 1, "not_found": []}
        if d.get("presences"):
            chunk["presences"] = []
        if d.get("nonce") is not None:
            chunk["nonce"] = d["nonce"]
        await self._dispatch(session, "GUILD_MEMBERS_CHUNK", chunk)

    async def _dispatch_locked(self, session: GatewaySession, event: str, data: Any) -> dict:
        session.seq += 1
        payload = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.log.append(payload)
        conn = session.conn
        if conn is not None and not await conn.send(payload):
            session.conn = None  # kept in the log: replayed when the client resumes
        self._notify()
        return payload

    async def _dispatch(self, session: GatewaySession, event: str, data: Any) -> dict:
        async with session.lock:
            return await self._dispatch_locked(session, event, data)

    async def _require_session(self, timeout: float = 5.0) -> GatewaySession:
        return await self.wait_until(lambda: self.session, timeout, "a gateway session (IDENTIFY)")

    async def dispatch(self, event: str, data: Any, *, timeout: float = 5.0) -> dict:
        """Send any DISPATCH event to the current session (buffered if it is reconnecting)."""
        return await self._dispatch(await self._require_session(timeout), event, data)

    async def reconnect(self, *, wait: bool = True, timeout: float = 5.0) -> GatewayConnection | None:
        """Send op 7 RECONNECT; with ``wait`` return the connection the client RESUMEd on."""
        session = await self._require_session()
        before = session.resumes
        async with session.lock:
            conn, session.conn = session.conn, None
            if conn is None:
                raise RuntimeError("no live gateway connection to send RECONNECT on")
            await conn.send({"op": 7, "d": None})
        if not wait:
            return None
        await self.wait_until(lambda: session.resumes > before, timeout, "RESUME after RECONNECT")
        return session.conn

    async def invalidate_session(self, *, resumable: bool = False, wait: bool = True,
                                 timeout: float = 10.0) -> GatewaySession | None:
        """Send op 9 INVALID_SESSION; with ``wait`` return the session the client continued with.

        Slow on purpose when not resumable: discord.py's ``before_identify_hook`` sleeps 5 s
        before every IDENTIFY but the first, so the new READY comes ~5 s later."""
        session = await self._require_session()
        count, resumes = len(self.sessions), session.resumes
        async with session.lock:
            conn, session.conn = session.conn, None
            if not resumable:
                session.invalidated = True
            if conn is not None:
                await conn.send({"op": 9, "d": resumable})
        if not wait:
            return None
        if resumable:
            await self.wait_until(lambda: session.resumes > resumes, timeout, "RESUME after INVALID_SESSION")
            return session
        await self.wait_until(lambda: len(self.sessions) > count and self.sessions[-1].conn, timeout,
                              "IDENTIFY after INVALID_SESSION")
        return self.sessions[-1]

    async def drop_connection(self, code: int = 4000, *, wait: bool = True, timeout: float = 5.0) -> None:
        """Close the live gateway socket with ``code`` (4000: client resumes)."""
        session = await self._require_session()
        before = session.resumes
        async with session.lock:
            conn, session.conn = session.conn, None
        if conn is not None:
            await conn.close(code, "dropped by test")
        if wait:
            await self.wait_until(lambda: session.resumes > before, timeout, "RESUME after drop")

    # ----- injected user actions -------------------------------------------

    async def interaction(
        self,
        command: str,
        options: dict[str, Any] | None = None,
        *,
        member: FakeMember | int | None = None,
        channel_id: int | None = None,
        locale: str = "en-US",
        strict: bool = True,
        raw_options: list[dict] | None = None,
    ) -> FakeInteraction:
        """Send INTERACTION_CREATE for a slash command, as a user typing ``/command``.

        ``command`` is the full path, e.g. ``"oracle ask"``; ``options`` maps option names to
        values. Option types, ``data.id`` and ``data.guild_id`` come from the commands the bot
        registered (guild first, then global); like the Discord client, unknown or missing
        required options, values outside ``choices`` or min/max raise ValueError. With
        ``strict=False`` an unregistered command is sent as a guild command with option types
        guessed from the Python values. ``member`` defaults to ``fake.player``.
        """
        data = self._command_data(command, options or {}, focused=None, strict=strict, raw_options=raw_options)
        return await self._send_interaction(APPLICATION_COMMAND, data, member, channel_id, locale)

    async def autocomplete(
        self,
        command: str,
        options: dict[str, Any] | None = None,
        *,
        focused: str | None = None,
        member: FakeMember | int | None = None,
        channel_id: int | None = None,
        locale: str = "en-US",
        strict: bool = True,
        timeout: float | None = None,
    ) -> list[dict]:
        """Send an AUTOCOMPLETE interaction (``focused`` defaults to the last option given)
        and return the choices the bot answered (``[{"name": ..., "value": ...}]``).
        The handle is ``fake.interactions[-1]``."""
        options = dict(options or {})
        if focused is None:
            if not options:
                raise ValueError("autocomplete needs at least the focused option's text")
            focused = list(options)[-1]
        options.setdefault(focused, "")
        data = self._command_data(command, options, focused=focused, strict=strict, raw_options=None)
        inter = await self._send_interaction(AUTOCOMPLETE, data, member, channel_id, locale)
        await inter.wait_acknowledged(timeout)
        assert inter.response is not None
        if inter.response.type != 8:
            raise AssertionError(f"autocomplete answered with callback type {inter.response.type}")
        return list(inter.choices or [])

    async def component(
        self,
        message: FakeMessage | int,
        custom_id: str,
        *,
        component_type: int = 2,
        values: list[str] | None = None,
        member: FakeMember | int | None = None,
        locale: str = "en-US",
    ) -> FakeInteraction:
        """Send a MESSAGE_COMPONENT interaction (a button click / select) on a stored message."""
        msg = message if isinstance(message, FakeMessage) else self._messages[int(message)]
        data: dict[str, Any] = {"custom_id": custom_id, "component_type": component_type}
        if values is not None:
            data["values"] = values
        return await self._send_interaction(MESSAGE_COMPONENT, data, member, msg.channel_id, locale, message=msg)

    async def message(
        self,
        channel_id: int,
        author: FakeMember | int,
        content: str = "",
        *,
        mentions: list[FakeMember | int] | None = None,
        embeds: list[dict] | None = None,
        reply_to: FakeMessage | int | None = None,
    ) -> FakeMessage:
        """A user posts in a channel or thread: stored, and sent as MESSAGE_CREATE.

        ``mentions`` defaults to the ``<@id>`` mentions found in ``content``."""
        session = await self._require_session()
        author = self._member(author)
        if channel_id not in self.channels:
            raise ValueError(f"unknown channel {channel_id}")
        body: dict[str, Any] = {"content": content, "embeds": embeds or []}
        if reply_to is not None:
            ref = reply_to if isinstance(reply_to, FakeMessage) else self._messages[int(reply_to)]
            body["message_reference"] = {"message_id": str(ref.id), "channel_id": str(ref.channel_id)}
        msg = self._new_message(channel_id, author, body, source="user", record_body=False,
                                explicit_mentions=None if mentions is None else [self._member(m) for m in mentions])
        await self._announce(msg, "MESSAGE_CREATE", session=session)
        return msg

    async def _send_interaction(self, itype: int, data: dict, member: FakeMember | int | None,
                                channel_id: int | None, locale: str, *,
                                message: FakeMessage | None = None) -> FakeInteraction:
        session = await self._require_session()
        member = self._member(member) if member is not None else self.player
        channel_id = channel_id or self.channel_id
        if channel_id not in self.channels:
            raise ValueError(f"unknown channel {channel_id}")
        payload: dict[str, Any] = {
            "id": str(self._ids.next()),
            "application_id": str(self.app_id),
            "type": itype,
            "data": data,
            "guild_id": str(self.guild_id),
            "guild": {"id": str(self.guild_id), "locale": "en-US", "features": []},
            "channel_id": str(channel_id),
            "channel": self._channel_payload(channel_id, permissions_of=member),
            "member": {**member.member_payload(), "permissions": str(self.permissions_for(member))},
            "token": "fake-interaction-" + secrets.token_urlsafe(32),
            "version": 1,
            "app_permissions": str(self.permissions_for(self.bot)),
            "locale": locale,
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": str(self.guild_id)},
            "context": 0,
            "attachment_size_limit": 10 * 1024 * 1024,
        }
        if message is not None:
            payload["message"] = copy.deepcopy(message.data)
        inter = FakeInteraction(self, payload, member)
        inter.source_message = message
        self.interactions.append(inter)
        self._interactions_by_id[inter.id] = inter
        self._interactions_by_token[inter.token] = inter
        inter.created = time.monotonic()
        await self._dispatch(session, "INTERACTION_CREATE", payload)
        return inter

    # ----- building command interaction data -------------------------------

    def _find_command(self, name: str) -> tuple[dict | None, bool]:
        for cmd in self.guild_commands.get(self.guild_id, []):
            if cmd["name"] == name and cmd.get("type", 1) == 1:
                return cmd, True
        for cmd in self.global_commands:
            if cmd["name"] == name and cmd.get("type", 1) == 1:
                return cmd, False
        return None, False

    def _command_data(self, command: str, values: dict[str, Any], *, focused: str | None, strict: bool,
                      raw_options: list[dict] | None) -> dict:
        top, *path = command.split()
        cmd, is_guild = self._find_command(top)
        if cmd is None and strict:
            known = sorted(c["name"] for c in [*self.guild_commands.get(self.guild_id, []), *self.global_commands])
            raise ValueError(f"/{top} is not registered with the fake (registered: {known}); "
                             "did the bot sync its command tree? (strict=False sends it anyway)")
        resolved: dict[str, dict] = {}
        if raw_options is not None:
            options = raw_options
        else:
            schema: list[dict] | None = None
            node_types: list[int] = []
            if cmd is not None:
                node = cmd
                for part in path:
                    child = next((o for o in node.get("options") or [] if o["name"] == part and o["type"] in (1, 2)),
                                 None)
                    if child is None:
                        raise ValueError(f"/{top} has no subcommand (group) {part!r}")
                    node_types.append(child["type"])
                    node = child
                if any(o.get("type") in (1, 2) for o in node.get("options") or []):
                    raise ValueError(f"/{command} is a group; name a subcommand")
                schema = node.get("options") or []
            else:
                node_types = [2, 1][-len(path):] if path else []
            options = self._leaf_options(schema, values, focused, resolved)
            for part, kind in reversed(list(zip(path, node_types))):
                options = [{"type": kind, "name": part, "options": options}]
        data: dict[str, Any] = {
            "id": cmd["id"] if cmd else str(self._ids.next()),
            "name": top,
            "type": 1,
            "options": options,
        }
        if cmd is None or is_guild:
            data["guild_id"] = str(self.guild_id)
        if resolved:
            data["resolved"] = resolved
        return data

    def _leaf_options(self, schema: list[dict] | None, values: dict[str, Any], focused: str | None,
                      resolved: dict[str, dict]) -> list[dict]:
        by_name = {o["name"]: o for o in schema} if schema is not None else {}
        out = []
        if schema is not None:
            unknown = [k for k in values if k not in by_name]
            if unknown:
                raise ValueError(f"unknown option(s) {unknown}; the command has {list(by_name)}")
            if focused is None:
                missing = [o["name"] for o in schema if o.get("required") and o["name"] not in values]
                if missing:
                    raise ValueError(f"missing required option(s) {missing}")
            order = [o["name"] for o in schema if o["name"] in values]
        else:
            order = list(values)
        for name in order:
            value = values[name]
            spec = by_name.get(name)
            kind = spec["type"] if spec else self._guess_type(value)
            option: dict[str, Any] = {"name": name, "type": kind}
            if name == focused:
                option["value"] = str(value)
                option["focused"] = True
            else:
                option["value"] = self._option_value(name, kind, value, spec, resolved)
            out.append(option)
        return out

    @staticmethod
    def _guess_type(value: Any) -> int:
        if isinstance(value, bool):
            return 5
        if isinstance(value, int):
            return 4
        if isinstance(value, float):
            return 10
        if isinstance(value, FakeMember):
            return 6
        return 3

    def _option_value(self, name: str, kind: int, value: Any, spec: dict | None, resolved: dict) -> Any:
        if kind == 3:
            if not isinstance(value, str):
                raise ValueError(f"option {name!r} is a string, got {value!r}")
            if spec and (len(value) < spec.get("min_length", 0) or len(value) > spec.get("max_length", 6000)):
                raise ValueError(f"option {name!r}: length {len(value)} outside the allowed range")
        elif kind == 4:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"option {name!r} is an integer, got {value!r}")
        elif kind == 5:
            if not isinstance(value, bool):
                raise ValueError(f"option {name!r} is a boolean, got {value!r}")
        elif kind == 10:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"option {name!r} is a number, got {value!r}")
        elif kind in (6, 9) and (isinstance(value, FakeMember) or int(value) in self.members):
            member = self._member(value)
            resolved.setdefault("users", {})[str(member.id)] = member.user_payload()
            resolved.setdefault("members", {})[str(member.id)] = {
                **member.member_payload(with_user=False), "permissions": str(self.permissions_for(member))}
            return str(member.id)
        elif kind in (8, 9) and int(value) in self.roles:
            resolved.setdefault("roles", {})[str(int(value))] = copy.deepcopy(self.roles[int(value)])
            return str(int(value))
        elif kind == 7 and int(value) in self.channels:
            ch = self.channels[int(value)]
            resolved.setdefault("channels", {})[str(int(value))] = {
                "id": ch["id"], "type": ch["type"], "name": ch["name"], "permissions": str(ALL_PERMS),
                **({"parent_id": ch["parent_id"], "thread_metadata": ch["thread_metadata"]}
                   if ch["type"] in THREAD_TYPES else {}),
            }
            return str(int(value))
        else:
            raise ValueError(f"option {name!r} of type {kind}: unsupported or unknown value {value!r}")
        if spec:
            if kind in (4, 10):
                if "min_value" in spec and value < spec["min_value"]:
                    raise ValueError(f"option {name!r}: {value} < min_value {spec['min_value']}")
                if "max_value" in spec and value > spec["max_value"]:
                    raise ValueError(f"option {name!r}: {value} > max_value {spec['max_value']}")
            if spec.get("choices") and value not in [c["value"] for c in spec["choices"]]:
                raise ValueError(f"option {name!r}: {value!r} is not one of the choices")
        return value

    # ----- messages ---------------------------------------------------------

    def _mentions(self, content: str, allowed: dict | None, reply_author: int | None
                  ) -> tuple[list[FakeMember], list[int], bool]:
        user_ids = list(dict.fromkeys(int(m) for m in _USER_MENTION.findall(content)))
        role_ids = list(dict.fromkeys(int(m) for m in _ROLE_MENTION.findall(content)))
        everyone = "@everyone" in content or "@here" in content
        if allowed is None:
            parse, allowed_users, allowed_roles, replied = {"users", "roles", "everyone"}, set(), set(), True
        else:
            parse = set(allowed.get("parse") or [])
            allowed_users = {int(u) for u in allowed.get("users") or []}
            allowed_roles = {int(r) for r in allowed.get("roles") or []}
            replied = bool(allowed.get("replied_user", False))
        users = [u for u in user_ids if "users" in parse or u in allowed_users]
        roles = [r for r in role_ids if ("roles" in parse or r in allowed_roles) and r in self.roles]
        if reply_author is not None and replied and reply_author not in users:
            users.append(reply_author)
        return [self.members[u] for u in users if u in self.members], roles, everyone and "everyone" in parse

    @staticmethod
    def _embeds(embeds: list[dict] | None) -> list[dict]:
        out = []
        for embed in embeds or []:
            embed = copy.deepcopy(embed)
            embed.setdefault("type", "rich")
            embed.setdefault("content_scan_version", 0)
            out.append(embed)
        return out

    def _attachments(self, channel_id: int, files: list[RecordedFile], body: dict) -> list[dict]:
        out = []
        described = {str(a.get("id")): a for a in body.get("attachments") or [] if isinstance(a, dict)}
        for index, f in enumerate(files):
            attachment_id = self._ids.next()
            filename = f.filename or f"file{index}"
            meta = described.get(str(index), {})
            url = f"{self.url}/attachments/{channel_id}/{attachment_id}/{filename}"
            out.append({
                "id": str(attachment_id), "filename": filename, "size": len(f.data), "url": url,
                "proxy_url": url, "content_type": f.content_type, "description": meta.get("description"),
                "_field": f.field,
            })
        return out

    def _new_message(self, channel_id: int, author: FakeMember, body: dict, *, source: str, msg_type: int = 0,
                     flags: int = 0, interaction: FakeInteraction | None = None, files: list[RecordedFile] = (),
                     record_body: bool = True, explicit_mentions: list[FakeMember] | None = None) -> FakeMessage:
        channel = self.channels[channel_id]
        content = body.get("content") or ""
        reference = body.get("message_reference")
        referenced: FakeMessage | None = None
        if reference and reference.get("message_id"):
            referenced = self._messages.get(int(reference["message_id"]))
            if referenced is None and reference.get("fail_if_not_exists", True):
                raise _invalid_form({"message_reference": _err("MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
                                                               "Unknown message")})
            if msg_type == 0:
                msg_type = 19
        users, roles, everyone = self._mentions(
            content, body.get("allowed_mentions"), referenced.author_id if referenced else None)
        if explicit_mentions is not None:
            users = explicit_mentions
        attachments = self._attachments(channel_id, list(files), body)
        data: dict[str, Any] = {
            "id": str(self._ids.next()), "type": msg_type, "channel_id": str(channel_id),
            "author": author.user_payload(), "content": content, "timestamp": _now_iso(),
            "edited_timestamp": None, "tts": bool(body.get("tts", False)), "mention_everyone": everyone,
            "mentions": [u.user_payload() for u in users], "mention_roles": [str(r) for r in roles],
            "attachments": [{k: v for k, v in a.items() if not k.startswith("_")} for a in attachments],
            "embeds": self._embeds(body.get("embeds")), "pinned": False, "flags": flags,
            "components": copy.deepcopy(body.get("components") or []),
        }
        if body.get("nonce") is not None:
            data["nonce"] = body["nonce"]
        if referenced is not None:
            data["message_reference"] = {"type": 0, "message_id": str(referenced.id),
                                         "channel_id": str(referenced.channel_id), "guild_id": str(self.guild_id)}
            data["referenced_message"] = copy.deepcopy(referenced.data)
        if channel["type"] in THREAD_TYPES:
            data["position"] = channel["total_message_sent"]
        if interaction is not None:
            data["webhook_id"] = str(self.app_id)
            data["application_id"] = str(self.app_id)
            data["interaction_metadata"] = {
                "id": str(interaction.id), "type": interaction.type, "user": interaction.member.user_payload(),
                "authorizing_integration_owners": {"0": str(self.guild_id)}, "name": interaction.name,
                "command_type": 1,
            }
            data["interaction"] = {"id": str(interaction.id), "type": interaction.type, "name": interaction.name,
                                   "user": interaction.member.user_payload()}
        msg = FakeMessage(data, source, copy.deepcopy(body) if record_body else None,
                          interaction_id=interaction.id if interaction else None, files=list(files))
        self._messages[msg.id] = msg
        self._channel_messages.setdefault(channel_id, []).append(msg)
        if not msg.ephemeral:
            channel["last_message_id"] = str(msg.id)
            if channel["type"] in THREAD_TYPES:
                channel["message_count"] += 1
                channel["total_message_sent"] += 1
        self._notify()
        return msg

    def _apply_edit(self, msg: FakeMessage, body: dict, files: list[RecordedFile] = (), *,
                    resolve_loading: bool = True, mark_edited: bool = True) -> None:
        data = copy.deepcopy(msg.data)
        if "content" in body:
            data["content"] = body["content"] or ""
        if "embeds" in body:
            data["embeds"] = self._embeds(body["embeds"])
        if "components" in body:
            data["components"] = copy.deepcopy(body["components"] or [])
        if "attachments" in body or files:
            keep = {str(a.get("id")) for a in body.get("attachments") or [] if isinstance(a, dict)}
            kept = [a for a in data["attachments"] if a["id"] in keep] if "attachments" in body else data["attachments"]
            new = self._attachments(msg.channel_id, list(files), body)
            data["attachments"] = kept + [{k: v for k, v in a.items() if not k.startswith("_")} for a in new]
        if body.get("flags") is not None:
            data["flags"] = (data["flags"] & ~SUPPRESS_EMBEDS) | (int(body["flags"]) & SUPPRESS_EMBEDS)
        was_loading = bool(data["flags"] & LOADING)
        if resolve_loading:
            data["flags"] &= ~LOADING
        if not (data["content"] or data["embeds"] or data["components"] or data["attachments"]):
            raise ApiError(400, 50006, "Cannot send an empty message")
        allowed = body["allowed_mentions"] if "allowed_mentions" in body else msg.allowed_mentions
        users, roles, everyone = self._mentions(data["content"], allowed, None)
        data["mentions"] = [u.user_payload() for u in users]
        data["mention_roles"] = [str(r) for r in roles]
        data["mention_everyone"] = everyone
        if mark_edited and not was_loading:
            data["edited_timestamp"] = _now_iso()
        msg.data = data
        msg.edits.append(copy.deepcopy(body))
        msg.files.extend(files)
        self._notify()

    def _gateway_message(self, msg: FakeMessage, session: GatewaySession) -> dict | None:
        """The message as this session's MESSAGE_CREATE/UPDATE carries it, or None if not sent."""
        if msg.ephemeral or not session.has(INTENT_GUILD_MESSAGES):
            return None
        data = copy.deepcopy(msg.data)
        data["guild_id"] = str(self.guild_id)
        author = self.members.get(msg.author_id)
        if author is not None:
            data["member"] = author.member_payload(with_user=False)
        for user in data["mentions"]:
            member = self.members.get(int(user["id"]))
            if member is not None:
                user["member"] = member.member_payload(with_user=False)
        bot_involved = msg.author_id == self.app_id or self.app_id in msg.mention_ids
        if not session.has(INTENT_MESSAGE_CONTENT) and not bot_involved:
            data.update(content="", embeds=[], attachments=[], components=[])
            data.pop("poll", None)
        return data

    async def _announce(self, msg: FakeMessage, event: str, *, session: GatewaySession | None = None) -> None:
        if msg.source != "user" and not self.echo_bot_messages:
            return
        session = session or self.session
        if session is None:
            return
        if event == "MESSAGE_DELETE":
            if not msg.ephemeral and session.has(INTENT_GUILD_MESSAGES):
                await self._dispatch(session, event, {"id": str(msg.id), "channel_id": str(msg.channel_id),
                                                      "guild_id": str(self.guild_id)})
            return
        view = self._gateway_message(msg, session)
        if view is not None:
            await self._dispatch(session, event, view)

    # ----- REST plumbing ----------------------------------------------------

    def _build_routes(self) -> list[tuple[str, str, re.Pattern, Callable[..., Awaitable[Any]], bool]]:
        table: list[tuple[str, str, Callable[..., Awaitable[Any]], bool]] = [
            # (method, template, handler, needs bot auth)
            ("GET", "/gateway", self._r_gateway, False),
            ("GET", "/gateway/bot", self._r_gateway_bot, True),
            ("GET", "/users/@me", self._r_me, True),
            ("GET", "/users/{user_id}", self._r_user, True),
            ("GET", "/oauth2/applications/@me", self._r_app_info, True),
            ("GET", "/applications/@me", self._r_app_info, True),
            ("GET", "/applications/{application_id}/commands", self._r_get_commands, True),
            ("PUT", "/applications/{application_id}/commands", self._r_put_commands, True),
            ("POST", "/applications/{application_id}/commands", self._r_post_command, True),
            ("DELETE", "/applications/{application_id}/commands/{command_id}", self._r_delete_command, True),
            ("GET", "/applications/{application_id}/guilds/{guild_id}/commands", self._r_get_commands, True),
            ("PUT", "/applications/{application_id}/guilds/{guild_id}/commands", self._r_put_commands, True),
            ("POST", "/applications/{application_id}/guilds/{guild_id}/commands", self._r_post_command, True),
            ("DELETE", "/applications/{application_id}/guilds/{guild_id}/commands/{command_id}",
             self._r_delete_command, True),
            ("POST", "/interactions/{interaction_id}/{token}/callback", self._r_callback, False),
            ("GET", "/webhooks/{application_id}/{token}/messages/@original", self._r_get_wh_message, False),
            ("PATCH", "/webhooks/{application_id}/{token}/messages/@original", self._r_edit_wh_message, False),
            ("DELETE", "/webhooks/{application_id}/{token}/messages/@original", self._r_delete_wh_message, False),
            ("GET", "/webhooks/{application_id}/{token}/messages/{message_id}", self._r_get_wh_message, False),
            ("PATCH", "/webhooks/{application_id}/{token}/messages/{message_id}", self._r_edit_wh_message, False),
            ("DELETE", "/webhooks/{application_id}/{token}/messages/{message_id}", self._r_delete_wh_message,
             False),
            ("POST", "/webhooks/{application_id}/{token}", self._r_followup, False),
            ("GET", "/channels/{channel_id}", self._r_get_channel, True),
            ("GET", "/channels/{channel_id}/messages", self._r_list_messages, True),
            ("POST", "/channels/{channel_id}/messages", self._r_create_message, True),
            ("GET", "/channels/{channel_id}/messages/{message_id}", self._r_get_message, True),
            ("PATCH", "/channels/{channel_id}/messages/{message_id}", self._r_edit_message, True),
            ("DELETE", "/channels/{channel_id}/messages/{message_id}", self._r_delete_message, True),
            ("POST", "/channels/{channel_id}/messages/{message_id}/threads", self._r_thread_from_message, True),
            ("PUT", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me", self._r_react, True),
            ("POST", "/channels/{channel_id}/threads", self._r_thread_without_message, True),
            ("POST", "/channels/{channel_id}/typing", self._r_typing, True),
            ("PUT", "/channels/{channel_id}/thread-members/@me", self._r_no_content, True),
            ("DELETE", "/channels/{channel_id}/thread-members/@me", self._r_no_content, True),
            ("GET", "/guilds/{guild_id}", self._r_get_guild, True),
            ("GET", "/guilds/{guild_id}/channels", self._r_guild_channels, True),
            ("GET", "/guilds/{guild_id}/roles", self._r_guild_roles, True),
            ("GET", "/guilds/{guild_id}/members/{user_id}", self._r_guild_member, True),
        ]
        compiled = []
        for method, template, handler, auth in table:
            parts = re.split(r"(\{\w+\})", template)
            rx = "".join(f"(?P<{p[1:-1]}>[^/]+)" if p.startswith("{") else re.escape(p) for p in parts)
            compiled.append((method, template, re.compile(f"^{rx}/?$"), handler, auth))
        return compiled

    def rate_limit(self, method: str, route: str, *, times: int = 1, retry_after: float = 0.2,
                   is_global: bool = False, scope: str = "user") -> RateLimitRule:
        """The next ``times`` requests matching ``method`` (or "*") and ``route`` (a route
        template like "/webhooks/{application_id}/{token}", an exact path, or a glob) get
        429 with Retry-After / X-RateLimit-* headers and Discord's JSON body."""
        rule = RateLimitRule(method.upper() if method != "*" else "*", route, times, retry_after, is_global, scope)
        self.rate_limits.append(rule)
        return rule

    @staticmethod
    def _json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
        all_headers = {"Via": "1.1 google", **(headers or {})}
        if body is None:
            return web.Response(status=status, headers=all_headers)
        all_headers["Content-Type"] = "application/json"
        return web.Response(status=status, body=json.dumps(body).encode(), headers=all_headers)

    async def _read_body(self, request: web.Request, rec: RecordedRequest) -> None:
        if request.content_type.startswith("multipart/"):
            reader = await request.multipart()
            async for part in reader:
                if part.name == "payload_json":
                    rec.json = json.loads(await part.text())
                else:
                    rec.files.append(RecordedFile(part.name or "", part.filename,
                                                  part.headers.get("Content-Type"), bytes(await part.read())))
            return
        raw = await request.read()
        if raw:
            try:
                rec.json = json.loads(raw)
            except ValueError:
                raise ApiError(400, 50109, "The request body contains invalid JSON.") from None

    async def _handle_api(self, request: web.Request) -> web.Response:
        rec = RecordedRequest(request.method, "/" + request.match_info["tail"], dict(request.query),
                              dict(request.headers), None, [], time.monotonic())
        self.requests.append(rec)
        status, body, headers = 500, None, {}
        try:
            try:
                body_error: ApiError | None = None
                try:
                    await self._read_body(request, rec)
                except ApiError as exc:
                    body_error = exc
                matched = self._match(rec)
                if body_error is not None:
                    raise body_error
                rule = next((r for r in self.rate_limits if r.remaining > 0 and r.matches(rec)), None)
                if rule is not None:
                    status, body, headers = self._rate_limited(rule, rec)
                else:
                    handler, params, auth = matched
                    if auth and request.headers.get("Authorization") != f"Bot {self.token}":
                        raise ApiError(401, 0, "401: Unauthorized")
                    status, body = await handler(rec, **params)
            except ApiError as exc:
                status, body = exc.status, exc.body
            except Exception as exc:  # a bug in the fake: fail fast (a 5xx would be retried) and keep it
                self.errors.append(exc)
                status, body = 400, {"message": f"fake discord internal error: {exc!r}", "code": -1}
        finally:
            rec.status = status
            rec.response = _flatten(body) if body is not None else None
            self._notify()
        return self._json_response(status, body, headers)

    def _match(self, rec: RecordedRequest) -> tuple[Callable[..., Awaitable[Any]], dict[str, str], bool]:
        path_matched = False
        for method, template, rx, handler, auth in self._routes:
            m = rx.match(rec.path)
            if m is None:
                continue
            path_matched = True
            if method == rec.method:
                rec.route = template
                return handler, m.groupdict(), auth
        if path_matched:
            raise ApiError(405, 0, "405: Method Not Allowed")
        raise ApiError(404, 0, "404: Not Found")

    def _rate_limited(self, rule: RateLimitRule, rec: RecordedRequest) -> tuple[int, dict, dict[str, str]]:
        rule.remaining -= 1
        rule.hits.append(rec)
        rec.rate_limited = True
        bucket = hashlib.sha1(f"{rec.method} {rec.route or rec.path}".encode()).hexdigest()[:32]
        headers = {
            "Retry-After": str(max(1, math.ceil(rule.retry_after))),
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": f"{time.time() + rule.retry_after:.3f}",
            "X-RateLimit-Reset-After": f"{rule.retry_after:.3f}",
            "X-RateLimit-Bucket": bucket,
            "X-RateLimit-Scope": "global" if rule.is_global else rule.scope,
        }
        if rule.is_global:
            headers["X-RateLimit-Global"] = "true"
        body = {"message": "You are being rate limited.", "retry_after": rule.retry_after, "global": rule.is_global}
        return 429, body, headers

    async def _handle_attachment(self, request: web.Request) -> web.Response:
        attachment_id = request.match_info["attachment_id"]
        for msg in self._messages.values():
            for attachment, f in zip(msg.data["attachments"], msg.files):
                if attachment["id"] == attachment_id:
                    return web.Response(body=f.data, content_type=f.content_type or "application/octet-stream")
        return web.Response(status=404)

    # ----- REST validation --------------------------------------------------

    @staticmethod
    def _check_message_body(body: Any, *, files: int = 0, require_content: bool = True) -> dict:
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise _invalid_form(_err("DICT_TYPE_CONVERT", "Only dictionaries may be used in a DictType"))
        errors: dict[str, Any] = {}
        content = body.get("content")
        if content is not None and not isinstance(content, str):
            errors["content"] = _err("BASE_TYPE_STRING", "Must be a string.")
        elif isinstance(content, str) and len(content) > 2000:
            errors["content"] = _err("BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
        embeds = body.get("embeds") or []
        if len(embeds) > 10:
            errors["embeds"] = _err("BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length.")
        total = 0
        embed_errors: dict[str, Any] = {}
        limits = {"title": 256, "description": 4096}
        for index, embed in enumerate(embeds):
            e: dict[str, Any] = {}
            for key, limit in limits.items():
                value = embed.get(key) or ""
                total += len(value)
                if len(value) > limit:
                    e[key] = _err("BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")
            for key, sub, limit in (("footer", "text", 2048), ("author", "name", 256)):
                value = (embed.get(key) or {}).get(sub) or ""
                total += len(value)
                if len(value) > limit:
                    e[key] = {sub: _err("BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")}
            fields = embed.get("fields") or []
            if len(fields) > 25:
                e["fields"] = _err("BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
            field_errors: dict[str, Any] = {}
            for fi, fld in enumerate(fields):
                fe: dict[str, Any] = {}
                for key, limit in (("name", 256), ("value", 1024)):
                    value = fld.get(key) or ""
                    total += len(value)
                    if not value:
                        fe[key] = _err("BASE_TYPE_REQUIRED", "This field is required")
                    elif len(value) > limit:
                        fe[key] = _err("BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")
                if fe:
                    field_errors[str(fi)] = fe
            if field_errors:
                e["fields"] = field_errors
            if e:
                embed_errors[str(index)] = e
        if embed_errors:
            errors["embeds"] = embed_errors
        elif total > 6000:
            errors["embeds"] = _err("MAX_EMBED_SIZE_EXCEEDED", "Embed size exceeds maximum size of 6000")
        if errors:
            raise _invalid_form(errors)
        if require_content and not (content or embeds or body.get("components") or files
                                    or body.get("sticker_ids") or body.get("poll")):
            raise ApiError(400, 50006, "Cannot send an empty message")
        return body

    def _check_commands(self, commands: Any) -> None:
        if not isinstance(commands, list):
            raise _invalid_form(_err("LIST_TYPE_CONVERT", "Only iterables may be used in a ListType"))
        errors: dict[str, Any] = {}
        seen: set[tuple[str, int]] = set()
        for index, cmd in enumerate(commands):
            e = self._check_command(cmd)
            key = (cmd.get("name"), cmd.get("type", 1))
            if key in seen:
                e.setdefault("name", _err("APPLICATION_COMMANDS_DUPLICATE_NAME",
                                          f"Application command names must be unique: {key[0]}"))
            seen.add(key)
            if e:
                errors[str(index)] = e
        if errors:
            raise _invalid_form(errors)

    def _check_command(self, cmd: dict) -> dict:
        e: dict[str, Any] = {}
        kind = cmd.get("type", 1)
        name = cmd.get("name") or ""
        if kind == 1:
            if not _CHAT_NAME.match(name) or name != name.lower():
                e["name"] = _err("APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
            desc = cmd.get("description") or ""
            if not 1 <= len(desc) <= 100:
                e["description"] = _err("BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
            opt_errors = self._check_options(cmd.get("options") or [], depth=0)
            if opt_errors:
                e["options"] = opt_errors
        else:
            if not 1 <= len(name) <= 32:
                e["name"] = _err("BASE_TYPE_BAD_LENGTH", "Must be between 1 and 32 in length.")
            if cmd.get("description"):
                e["description"] = _err("APPLICATION_COMMAND_CONTEXT_MENU_DESCRIPTION",
                                        "Context menu commands cannot have description")
        return e

    def _check_options(self, options: list[dict], depth: int) -> dict | list:
        if len(options) > 25:
            return _err("BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
        errors: dict[str, Any] = {}
        names: set[str] = set()
        optional_seen = False
        for index, opt in enumerate(options):
            e: dict[str, Any] = {}
            name = opt.get("name") or ""
            kind = opt.get("type")
            if not _CHAT_NAME.match(name) or name != name.lower():
                e["name"] = _err("APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
            if name in names:
                e["name"] = _err("APPLICATION_COMMAND_OPTIONS_NAME_ALREADY_EXISTS", "Option names must be unique")
            names.add(name)
            if not 1 <= len(opt.get("description") or "") <= 100:
                e["description"] = _err("BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
            if kind in (1, 2):
                if (kind == 2 and depth > 0) or (kind == 1 and depth > 1):
                    e["type"] = _err("APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Subcommands nested too deeply")
                sub = self._check_options(opt.get("options") or [], depth + 1)
                if kind == 2 and any(o.get("type") != 1 for o in opt.get("options") or []):
                    e["options"] = _err("APPLICATION_COMMAND_OPTIONS_TYPE_INVALID",
                                        "Subcommand groups may only contain subcommands")
                elif sub:
                    e["options"] = sub
            else:
                if opt.get("required"):
                    if optional_seen:
                        e["required"] = _err("APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID",
                                             "Required options must be placed before non-required options")
                else:
                    optional_seen = True
                choices = opt.get("choices") or []
                if len(choices) > 25:
                    e["choices"] = _err("BASE_TYPE_MAX_LENGTH", "Must be 25 or fewer in length.")
                if choices and opt.get("autocomplete"):
                    e["autocomplete"] = _err("APPLICATION_COMMAND_AUTOCOMPLETE_INVALID",
                                             "Autocomplete cannot be set with choices")
                for ci, choice in enumerate(choices):
                    if not 1 <= len(str(choice.get("name") or "")) <= 100:
                        e.setdefault("choices", {})[str(ci)] = {
                            "name": _err("BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")}
            if e:
                errors[str(index)] = e
        return errors

    def _command_object(self, spec: dict, command_id: int, guild_id: int | None) -> dict:
        cmd = copy.deepcopy(spec)
        cmd.update({"id": str(command_id), "application_id": str(self.app_id), "version": str(self._ids.next()),
                    "type": spec.get("type", 1)})
        cmd.setdefault("description", "")
        cmd.setdefault("default_member_permissions", None)
        cmd.setdefault("nsfw", False)
        cmd.setdefault("integration_types", [0])
        if guild_id is not None:
            cmd["guild_id"] = str(guild_id)
            cmd.setdefault("contexts", None)
        else:
            cmd.setdefault("dm_permission", True)
            cmd.setdefault("contexts", None)
        return cmd

    def _scope(self, application_id: str, guild_id: str | None) -> int | None:
        if application_id != str(self.app_id):
            raise ApiError(403, 50001, "Missing Access")
        if guild_id is None:
            return None
        if guild_id != str(self.guild_id):
            raise ApiError(403, 50001, "Missing Access")
        return int(guild_id)

    def _commands_list(self, scope: int | None) -> list[dict]:
        if scope is None:
            return self.global_commands
        return self.guild_commands.setdefault(scope, [])

    def _set_commands(self, scope: int | None, commands: list[dict]) -> None:
        if scope is None:
            self.global_commands = commands
        else:
            self.guild_commands[scope] = commands

    # ----- REST handlers: login, application, commands ----------------------

    async def _r_gateway(self, req: RecordedRequest) -> tuple[int, Any]:
        return 200, {"url": self.ws_url}

    async def _r_gateway_bot(self, req: RecordedRequest) -> tuple[int, Any]:
        return 200, {"url": self.ws_url, "shards": 1, "session_start_limit": {
            "total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1}}

    async def _r_me(self, req: RecordedRequest) -> tuple[int, Any]:
        return 200, self.bot_user_payload()

    async def _r_user(self, req: RecordedRequest, user_id: str) -> tuple[int, Any]:
        member = self.members.get(self._snowflake(user_id, 10013, "Unknown User"))
        if member is None:
            raise ApiError(404, 10013, "Unknown User")
        return 200, member.user_payload()

    async def _r_app_info(self, req: RecordedRequest) -> tuple[int, Any]:
        return 200, self.application_payload()

    async def _r_get_commands(self, req: RecordedRequest, application_id: str,
                              guild_id: str | None = None) -> tuple[int, Any]:
        return 200, self._commands_list(self._scope(application_id, guild_id))

    async def _r_put_commands(self, req: RecordedRequest, application_id: str,
                              guild_id: str | None = None) -> tuple[int, Any]:
        scope = self._scope(application_id, guild_id)
        self._check_commands(req.json)
        old = {(c["name"], c.get("type", 1)): c for c in self._commands_list(scope)}
        result = []
        for spec in req.json:
            prev = old.get((spec["name"], spec.get("type", 1)))
            result.append(self._command_object(spec, int(prev["id"]) if prev else self._ids.next(), scope))
        self._set_commands(scope, result)
        return 200, result

    async def _r_post_command(self, req: RecordedRequest, application_id: str,
                              guild_id: str | None = None) -> tuple[int, Any]:
        scope = self._scope(application_id, guild_id)
        self._check_commands([req.json])
        existing = self._commands_list(scope)
        key = (req.json["name"], req.json.get("type", 1))
        prev = next((c for c in existing if (c["name"], c.get("type", 1)) == key), None)
        cmd = self._command_object(req.json, int(prev["id"]) if prev else self._ids.next(), scope)
        self._set_commands(scope, [c for c in existing if c is not prev] + [cmd])
        return (200 if prev else 201), cmd

    async def _r_delete_command(self, req: RecordedRequest, application_id: str, command_id: str,
                                guild_id: str | None = None) -> tuple[int, Any]:
        scope = self._scope(application_id, guild_id)
        existing = self._commands_list(scope)
        if not any(c["id"] == command_id for c in existing):
            raise ApiError(404, 10063, "Unknown application command")
        self._set_commands(scope, [c for c in existing if c["id"] != command_id])
        return 204, None

    # ----- REST handlers: interactions --------------------------------------

    def _event(self, inter: FakeInteraction, kind: str, status: int, body: Any, **kwargs: Any) -> InteractionEvent:
        now = time.monotonic()
        event = InteractionEvent(kind, now, now - inter.created, status, copy.deepcopy(body), **kwargs)
        inter.events.append(event)
        self._notify()
        return event

    async def _r_callback(self, req: RecordedRequest, interaction_id: str, token: str) -> tuple[int, Any]:
        inter = self._interactions_by_id.get(self._snowflake(interaction_id, 10062, "Unknown interaction"))
        if inter is None or inter.token != token:
            raise ApiError(404, 10062, "Unknown interaction")
        body = req.json if isinstance(req.json, dict) else {}
        ctype = body.get("type")
        try:
            if time.monotonic() - inter.created > self.ack_deadline:
                raise ApiError(404, 10062, "Unknown interaction")
            if inter.acknowledged:
                raise ApiError(400, 40060, "Interaction has already been acknowledged.")
            if ctype not in CALLBACKS_ALLOWED.get(inter.type, set()):
                raise _invalid_form({"type": _err("INTERACTION_RESPONSE_TYPE_INVALID",
                                                  f"Interaction response type {ctype} is invalid here")})
            data = body.get("data") or {}
            message: FakeMessage | None = None
            if ctype == 4:
                self._check_message_body(data, files=len(req.files))
                flags = int(data.get("flags") or 0) & (EPHEMERAL | SUPPRESS_EMBEDS | SUPPRESS_NOTIFICATIONS)
                message = self._new_message(inter.channel_id, self.bot, data, source="interaction",
                                            msg_type=20 if inter.type == APPLICATION_COMMAND else 0,
                                            flags=flags, interaction=inter, files=req.files)
                inter.original = message
            elif ctype == 5:
                flags = LOADING | (int(data.get("flags") or 0) & EPHEMERAL)
                message = self._new_message(inter.channel_id, self.bot, {"content": ""}, source="interaction",
                                            msg_type=20 if inter.type == APPLICATION_COMMAND else 0,
                                            flags=flags, interaction=inter)
                inter.original = message
            elif ctype in (6, 7):
                inter.original = inter.source_message
                if ctype == 7 and inter.source_message is not None:
                    self._check_message_body(data, files=len(req.files), require_content=False)
                    self._apply_edit(inter.source_message, data, req.files)
                    message = inter.source_message
            elif ctype == 8:
                choices = data.get("choices") or []
                if len(choices) > 25:
                    raise _invalid_form({"data": {"choices": _err("BASE_TYPE_MAX_LENGTH",
                                                                  "Must be 25 or fewer in length.")}})
                bad = {str(i): {"name": _err("BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")}
                       for i, c in enumerate(choices) if not 1 <= len(str(c.get("name") or "")) <= 100}
                if bad:
                    raise _invalid_form({"data": {"choices": bad}})
                inter.choices = copy.deepcopy(choices)
            elif ctype == 9:
                inter.modal = copy.deepcopy(data)
        except ApiError as exc:
            self._event(inter, "callback", exc.status, body, type=ctype, error=exc.body)
            raise
        self._event(inter, "callback", 204, body, type=ctype, message_id=message.id if message else None)
        if message is not None:
            await self._announce(message, "MESSAGE_UPDATE" if ctype == 7 else "MESSAGE_CREATE")
        if req.query.get("with_response", "").lower() not in ("1", "true"):
            return 204, None
        info: dict[str, Any] = {"id": str(inter.id), "type": inter.type}
        result: dict[str, Any] = {"interaction": info}
        if message is not None:
            info.update(response_message_id=str(message.id), response_message_loading=message.loading,
                        response_message_ephemeral=message.ephemeral)
            result["resource"] = {"type": ctype, "message": copy.deepcopy(message.data)}
        elif ctype == 9:
            result["resource"] = {"type": ctype}
        return 200, result

    def _webhook_interaction(self, application_id: str, token: str) -> FakeInteraction:
        if application_id != str(self.app_id):
            raise ApiError(404, 10015, "Unknown Webhook")
        inter = self._interactions_by_token.get(token)
        if inter is None:
            raise ApiError(401, 50027, "Invalid Webhook Token")
        if time.monotonic() - inter.created > self.token_ttl:
            raise ApiError(401, 50027, "Invalid Webhook Token")
        return inter

    def _webhook_message(self, inter: FakeInteraction, message_id: str | None) -> FakeMessage:
        if message_id is None:
            if not inter.acknowledged:
                raise ApiError(404, 10015, "Unknown Webhook")
            if inter.original is None or inter.original.deleted:
                raise ApiError(404, 10008, "Unknown Message")
            return inter.original
        msg = self._messages.get(self._snowflake(message_id, 10008, "Unknown Message"))
        if msg is None or msg.deleted or msg not in inter.messages:
            raise ApiError(404, 10008, "Unknown Message")
        return msg

    async def _r_get_wh_message(self, req: RecordedRequest, application_id: str, token: str,
                                message_id: str | None = None) -> tuple[int, Any]:
        inter = self._webhook_interaction(application_id, token)
        return 200, self._webhook_message(inter, message_id).data

    async def _r_edit_wh_message(self, req: RecordedRequest, application_id: str, token: str,
                                 message_id: str | None = None) -> tuple[int, Any]:
        inter = self._webhook_interaction(application_id, token)
        kind = "edit_original" if message_id is None else "edit_followup"
        try:
            msg = self._webhook_message(inter, message_id)
            body = self._check_message_body(req.json, files=len(req.files), require_content=False)
            self._apply_edit(msg, body, req.files)
        except ApiError as exc:
            self._event(inter, kind, exc.status, req.json, error=exc.body)
            raise
        self._event(inter, kind, 200, req.json, message_id=msg.id)
        await self._announce(msg, "MESSAGE_UPDATE")
        return 200, msg.data

    async def _r_delete_wh_message(self, req: RecordedRequest, application_id: str, token: str,
                                   message_id: str | None = None) -> tuple[int, Any]:
        inter = self._webhook_interaction(application_id, token)
        kind = "delete_original" if message_id is None else "delete_followup"
        try:
            msg = self._webhook_message(inter, message_id)
        except ApiError as exc:
            self._event(inter, kind, exc.status, None, error=exc.body)
            raise
        msg.deleted = True
        self._event(inter, kind, 204, None, message_id=msg.id)
        await self._announce(msg, "MESSAGE_DELETE")
        return 204, None

    async def _r_followup(self, req: RecordedRequest, application_id: str, token: str) -> tuple[int, Any]:
        inter = self._webhook_interaction(application_id, token)
        replaced = False
        try:
            if not inter.acknowledged or inter.response_type == 8:
                raise ApiError(404, 10015, "Unknown Webhook")
            body = self._check_message_body(req.json, files=len(req.files))
            original = inter.original
            if inter.response_type == 5 and original is not None and original.loading and not original.deleted:
                self._apply_edit(original, body, req.files)  # keeps the defer's ephemerality
                msg, replaced = original, True
            else:
                flags = int(body.get("flags") or 0) & (EPHEMERAL | SUPPRESS_EMBEDS | SUPPRESS_NOTIFICATIONS)
                msg = self._new_message(inter.channel_id, self.bot, body, source="followup", flags=flags,
                                        interaction=inter, files=req.files)
        except ApiError as exc:
            self._event(inter, "followup", exc.status, req.json, error=exc.body)
            raise
        inter.followups.append(msg)
        self._event(inter, "followup", 200, req.json, message_id=msg.id, replaced_original=replaced)
        await self._announce(msg, "MESSAGE_UPDATE" if replaced else "MESSAGE_CREATE")
        if req.query.get("wait", "").lower() in ("1", "true"):
            return 200, msg.data
        return 204, None

    # ----- REST handlers: channels, messages, threads -----------------------

    @staticmethod
    def _snowflake(value: str, code: int, message: str) -> int:
        try:
            return int(value)
        except ValueError:
            raise ApiError(404, code, message) from None

    def _channel(self, channel_id: str) -> dict:
        channel = self.channels.get(self._snowflake(channel_id, 10003, "Unknown Channel"))
        if channel is None:
            raise ApiError(404, 10003, "Unknown Channel")
        return channel

    def _channel_message(self, channel: dict, message_id: str) -> FakeMessage:
        msg = self._messages.get(self._snowflake(message_id, 10008, "Unknown Message"))
        if msg is None or msg.deleted or msg.ephemeral or msg.channel_id != int(channel["id"]):
            raise ApiError(404, 10008, "Unknown Message")
        return msg

    async def _r_get_channel(self, req: RecordedRequest, channel_id: str) -> tuple[int, Any]:
        return 200, self._channel(channel_id)

    async def _r_list_messages(self, req: RecordedRequest, channel_id: str) -> tuple[int, Any]:
        channel = self._channel(channel_id)
        pool = [m for m in self._channel_messages.get(int(channel["id"]), []) if not m.deleted and not m.ephemeral]
        q = req.query
        if "before" in q:
            pool = [m for m in pool if m.id < int(q["before"])]
        if "after" in q:
            pool = [m for m in pool if m.id > int(q["after"])]
        limit = max(1, min(100, int(q.get("limit", 50))))
        if "after" in q:
            pool = pool[:limit]
        else:
            pool = pool[-limit:]
        return 200, [m.data for m in reversed(pool)]

    async def _r_create_message(self, req: RecordedRequest, channel_id: str) -> tuple[int, Any]:
        channel = self._channel(channel_id)
        body = self._check_message_body(req.json, files=len(req.files))
        flags = int(body.get("flags") or 0) & (SUPPRESS_EMBEDS | SUPPRESS_NOTIFICATIONS)
        msg = self._new_message(int(channel["id"]), self.bot, body, source="channel", flags=flags, files=req.files)
        await self._announce(msg, "MESSAGE_CREATE")
        return 200, msg.data

    async def _r_get_message(self, req: RecordedRequest, channel_id: str, message_id: str) -> tuple[int, Any]:
        return 200, self._channel_message(self._channel(channel_id), message_id).data

    async def _r_edit_message(self, req: RecordedRequest, channel_id: str, message_id: str) -> tuple[int, Any]:
        msg = self._channel_message(self._channel(channel_id), message_id)
        body = self._check_message_body(req.json, files=len(req.files), require_content=False)
        if msg.author_id != self.app_id and set(body) - {"flags"}:
            raise ApiError(403, 50005, "Cannot edit a message authored by another user")
        self._apply_edit(msg, body, req.files)
        await self._announce(msg, "MESSAGE_UPDATE")
        return 200, msg.data

    async def _r_delete_message(self, req: RecordedRequest, channel_id: str, message_id: str) -> tuple[int, Any]:
        msg = self._channel_message(self._channel(channel_id), message_id)
        msg.deleted = True
        self._notify()
        await self._announce(msg, "MESSAGE_DELETE")
        return 204, None

    async def _r_react(self, req: RecordedRequest, channel_id: str, message_id: str, emoji: str) -> tuple[int, Any]:
        msg = self._channel_message(self._channel(channel_id), message_id)
        msg.reactions.append(emoji)
        self._notify()
        return 204, None

    async def _r_typing(self, req: RecordedRequest, channel_id: str) -> tuple[int, Any]:
        self._channel(channel_id)
        return 204, None

    async def _r_no_content(self, req: RecordedRequest, channel_id: str) -> tuple[int, Any]:
        self._channel(channel_id)
        return 204, None

    def _thread_payload(self, thread_id: int, parent: dict, name: Any, kind: int, body: dict) -> dict:
        if not isinstance(name, str) or not 1 <= len(name) <= 100:
            raise _invalid_form({"name": _err("BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")})
        now = _now_iso()
        metadata: dict[str, Any] = {
            "archived": False, "auto_archive_duration": int(body.get("auto_archive_duration") or 4320),
            "archive_timestamp": now, "locked": False, "create_timestamp": now,
        }
        if kind == PRIVATE_THREAD:
            metadata["invitable"] = bool(body.get("invitable", True))
        return {
            "id": str(thread_id), "type": kind, "guild_id": str(self.guild_id), "parent_id": parent["id"],
            "owner_id": str(self.app_id), "name": name, "last_message_id": None,
            "rate_limit_per_user": int(body.get("rate_limit_per_user") or 0), "flags": 0,
            "message_count": 0, "member_count": 1, "total_message_sent": 0, "thread_metadata": metadata,
            "member": {"id": str(thread_id), "user_id": str(self.app_id), "join_timestamp": now, "flags": 1},
        }

    async def _open_thread(self, thread: dict) -> dict:
        thread_id = int(thread["id"])
        self.channels[thread_id] = thread
        self.thread_ids.append(thread_id)
        self._notify()
        session = self.session
        if session is not None and session.has(INTENT_GUILDS):
            await self._dispatch(session, "THREAD_CREATE", {**copy.deepcopy(thread), "newly_created": True})
        return thread

    async def _r_thread_from_message(self, req: RecordedRequest, channel_id: str,
                                     message_id: str) -> tuple[int, Any]:
        parent = self._channel(channel_id)
        if parent["type"] != GUILD_TEXT:
            raise ApiError(400, 50024, "Cannot execute action on this channel type")
        msg = self._channel_message(parent, message_id)
        if msg.thread_id is not None:
            raise ApiError(400, 160004, "A thread has already been created for this message")
        body = req.json or {}
        thread = self._thread_payload(msg.id, parent, body.get("name"), PUBLIC_THREAD, body)
        msg.data["thread"] = copy.deepcopy(thread)
        await self._open_thread(thread)
        return 201, thread

    async def _r_thread_without_message(self, req: RecordedRequest, channel_id: str) -> tuple[int, Any]:
        parent = self._channel(channel_id)
        if parent["type"] != GUILD_TEXT:
            raise ApiError(400, 50024, "Cannot execute action on this channel type")
        body = req.json or {}
        kind = int(body.get("type") or PRIVATE_THREAD)
        if kind not in (PUBLIC_THREAD, PRIVATE_THREAD):
            raise _invalid_form({"type": _err("BASE_TYPE_CHOICES", "Value must be one of {11, 12}.")})
        thread = self._thread_payload(self._ids.next(), parent, body.get("name"), kind, body)
        await self._open_thread(thread)
        if kind == PUBLIC_THREAD:
            system = self._new_message(int(parent["id"]), self.bot, {"content": thread["name"]}, source="system",
                                       msg_type=18, record_body=False)
            system.data["message_reference"] = {"type": 0, "channel_id": thread["id"], "guild_id": str(self.guild_id)}
            await self._announce(system, "MESSAGE_CREATE")
        return 201, thread

    # ----- REST handlers: guild ---------------------------------------------

    def _guild(self, guild_id: str) -> None:
        if guild_id != str(self.guild_id):
            raise ApiError(404, 10004, "Unknown Guild")

    async def _r_get_guild(self, req: RecordedRequest, guild_id: str) -> tuple[int, Any]:
        self._guild(guild_id)
        return 200, self.guild_payload(full=False)

    async def _r_guild_channels(self, req: RecordedRequest, guild_id: str) -> tuple[int, Any]:
        self._guild(guild_id)
        return 200, [c for c in self.channels.values() if c["type"] not in THREAD_TYPES]

    async def _r_guild_roles(self, req: RecordedRequest, guild_id: str) -> tuple[int, Any]:
        self._guild(guild_id)
        return 200, list(self.roles.values())

    async def _r_guild_member(self, req: RecordedRequest, guild_id: str, user_id: str) -> tuple[int, Any]:
        self._guild(guild_id)
        member = self.members.get(self._snowflake(user_id, 10007, "Unknown Member"))
        if member is None:
            raise ApiError(404, 10007, "Unknown Member")
        return 200, member.member_payload()


class _RunningClient:
    """``async with fake.run_client(client)``: see ``FakeDiscord.run_client``."""

    def __init__(self, fake: FakeDiscord, client: discord.Client, token: str, timeout: float) -> None:
        self.fake = fake
        self.client = client
        self.token = token
        self.timeout = timeout
        self.task: asyncio.Task | None = None

    async def __aenter__(self) -> discord.Client:
        client = self.client
        self.task = task = asyncio.create_task(client.start(self.token), name="fake-discord-client")
        try:
            await self.fake.wait_until(lambda: task.done() or client.is_ready(), self.timeout,
                                       "the client to become ready")
        except BaseException:
            await self._shutdown(suppress=True)
            raise
        if task.done():
            await self._shutdown(suppress=False)
            raise RuntimeError("the client stopped before it was ready")
        return client

    async def __aexit__(self, exc_type: Any, *exc_info: object) -> None:
        await self._shutdown(suppress=exc_type is not None)

    async def _shutdown(self, *, suppress: bool) -> None:
        assert self.task is not None
        if not self.client.is_closed():
            await self.client.close()
        try:
            await asyncio.wait_for(self.task, self.timeout)
        except Exception:
            if not suppress:
                raise

"""``FakeDiscord``: one aiohttp server on 127.0.0.1 serving the gateway and the REST API, wiring
the concerns of this package together, and ``run_client`` to run a real discord.py client against it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import discord
import discord.gateway
import discord.http
import yarl
from aiohttp import web

from ..serving import serve
from .archiving import Archiving
from .channels import Channels
from .commands import Commands
from .constants import (
    API_VERSION,
    BOT_PERMS,
    EVERYONE_PERMS,
    GM_PERMS,
    PRIVILEGED_INTENTS,
)
from .gateway import Gateway, GatewayConnection, GatewaySession
from .interactions import FakeInteraction, Interactions
from .models import FakeMember, FakeMessage, World, _Snowflakes
from .permissions import Permissions
from .rest import RateLimitRule, RecordedRequest, Rest, Window


class FakeDiscord(Gateway, Rest, Channels, Archiving, Commands, Interactions, Permissions, World):
    """Discord's gateway and REST API for one bot and one guild, on 127.0.0.1.

    The state every part shares is set here; each base class holds one concern (see the package's
    docstring for which file holds what)."""

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
        self.errors: list[BaseException] = []  # exceptions inside the fake's own handlers (bugs)
        self._ids = _Snowflakes()
        self.elapsed = 0.0  # the simulated clock (`advance`, `pass_time`)
        self.thread_activity: dict[int, float] = {}

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

        # state the tests read
        self.requests: list[RecordedRequest] = []
        self.rate_limits: list[RateLimitRule] = []
        self.channel_message_budget: tuple[int, float] | None = (5, 5.0)
        self._windows: dict[str, Window] = {}
        self.gateway_connections: list[GatewayConnection] = []
        self.sessions: list[GatewaySession] = []
        self.dm_channels: dict[int, dict[str, Any]] = {}  # DM channel id -> DM channel object
        self._dm_of_user: dict[int, int] = {}  # user id -> DM channel id
        self._closed_dms: set[int] = set()
        self._last_soon: asyncio.Task | None = None
        self._soon_tasks: set[asyncio.Task] = set()
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
        self.add_text_channel("campaign", channel_id=self.channel_id, topic="Ask the Oracle here")

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
        app.router.add_route("*", "/api/v{version:\\d+}/{tail:.*}", self._handle_api)
        self._runner, self.port = await serve(app, self.host, self.port)
        return self

    async def stop(self) -> None:
        if self._last_soon is not None and not self._last_soon.done():
            await asyncio.wait([self._last_soon], timeout=1.0)
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

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate: Callable[[], Any], timeout: float = 5.0,
                         what: str | Callable[[], str] = "condition") -> Any:
        """Wait until ``predicate()`` is truthy (re-checked on every change, and every 50 ms); `what`
        names it in the timeout's message, or says at the timeout how far it got."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            result = predicate()
            if result:
                return result
            remaining = deadline - loop.time()
            if remaining <= 0:
                said = what() if callable(what) else what
                raise TimeoutError(f"FakeDiscord: timed out after {timeout}s waiting for {said}")
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.05))
            except TimeoutError:
                pass


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

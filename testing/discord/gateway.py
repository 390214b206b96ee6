"""The gateway websocket: HELLO, IDENTIFY (privileged intents: 4014), RESUME with replay of missed
events, heartbeats, dispatch in sequence, and messages as this session's intents let it see them.

A change to the world while a client is connected schedules its events with ``_soon``: they go out
in order, before any later dispatch, and the change returns a ``Pending`` the test may ``await``.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import secrets
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import WSMsgType, web

from .constants import (
    API_VERSION,
    INTENT_DIRECT_MESSAGES,
    INTENT_GUILD_MESSAGES,
    INTENT_MESSAGE_CONTENT,
    PRIVILEGED_INTENTS,
    VIEW_CHANNEL,
)
from .models import FakeMessage


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

    def has(self, intent: int) -> bool:
        return bool(self.intents & intent)

    def __repr__(self) -> str:
        return f"<GatewaySession id={self.id} seq={self.seq} resumes={self.resumes}>"


class Gateway:
    """The gateway's handlers, dispatch, and the sessions the tests inspect and disturb."""

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

    @property
    def session(self) -> GatewaySession | None:
        """The current gateway session (the latest)."""
        return self.sessions[-1] if self.sessions else None

    @property
    def identify(self) -> dict | None:
        return self.sessions[-1].identify if self.sessions else None

    @property
    def intents(self) -> int | None:
        return self.sessions[-1].intents if self.sessions else None

    def dispatched(self, event: str | None = None) -> list[dict]:
        """Every DISPATCH payload sent (op 0), across sessions, optionally of one event type."""
        return [p for s in self.sessions for p in s.log if event is None or p["t"] == event]

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
            await conn.send({"op": 11})
        elif op == 2:
            await self._on_identify(conn, d or {})
        elif op == 6:
            await self._on_resume(conn, d or {})
        elif op != 3:  # Discord closes on an opcode it does not take; the Oracle sends no other (no member requests)
            await conn.close(4001, f"Unknown opcode {op} (not served by this fake).")

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
        if session is None or d.get("token") != self.token:
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
        await self._after_soon()
        async with session.lock:
            return await self._dispatch_locked(session, event, data)

    async def _after_soon(self) -> None:
        """Let the events a synchronous world change scheduled (``_soon``) go out first."""
        last = self._last_soon
        if last is not None and not last.done() and asyncio.current_task() not in self._soon_tasks:
            await asyncio.wait([last])

    def _soon(self, announce: Callable[[GatewaySession], Awaitable[Any]]) -> asyncio.Task | None:
        """Run ``announce(session)`` for a synchronous world change (a channel added, an overwrite
        set) if a client is connected: in a task, after the ones scheduled before it, and before
        any later dispatch. Returns the task (None when nothing is connected)."""
        session = self.session
        if session is None:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        previous = self._last_soon

        async def run() -> None:
            if previous is not None and not previous.done():
                await asyncio.wait([previous])
            await announce(session)

        task = loop.create_task(run(), name="fake-discord-announce")
        self._soon_tasks.add(task)
        self._last_soon = task

        def done(t: asyncio.Task) -> None:
            self._soon_tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                self.errors.append(t.exception())

        task.add_done_callback(done)
        return task

    async def _require_session(self, timeout: float = 5.0) -> GatewaySession:
        return await self.wait_until(lambda: self.session, timeout, "a gateway session (IDENTIFY)")

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

    def _gateway_message(self, msg: FakeMessage, session: GatewaySession) -> dict | None:
        """The message as this session's MESSAGE_CREATE/UPDATE carries it, or None if not sent."""
        in_guild = msg.channel_id not in self.dm_channels
        if msg.ephemeral or not session.has(INTENT_GUILD_MESSAGES if in_guild else INTENT_DIRECT_MESSAGES):
            return None
        if in_guild and not self._bot_sees(msg.channel_id):
            return None
        data = copy.deepcopy(msg.data)
        if in_guild:
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

    def _bot_sees(self, channel_id: int) -> bool:
        """Whether the bot may view a guild channel or thread: events from others never reach it."""
        return bool(self.permissions_in(self.bot, channel_id) & VIEW_CHANNEL)

    async def _announce(self, msg: FakeMessage, event: str, *, session: GatewaySession | None = None) -> None:
        session = session or self.session
        if session is None:
            return
        if event == "MESSAGE_DELETE":
            in_guild = msg.channel_id not in self.dm_channels
            if (not msg.ephemeral and session.has(INTENT_GUILD_MESSAGES if in_guild else INTENT_DIRECT_MESSAGES)
                    and (not in_guild or self._bot_sees(msg.channel_id))):
                deleted = {"id": str(msg.id), "channel_id": str(msg.channel_id)}
                if in_guild:
                    deleted["guild_id"] = str(self.guild_id)
                await self._dispatch(session, event, deleted)
            return
        view = self._gateway_message(msg, session)
        if view is not None:
            await self._dispatch(session, event, view)


"""Interactions: the INTERACTION_CREATE a user's slash command, message context menu, autocomplete
or button click sends (with the member's and the bot's permissions in its channel), and the bot's
callbacks, ``@original`` edits and followups, with their deadlines (docs/fakes.md).
"""

from __future__ import annotations

import asyncio
import copy
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .constants import (
    APPLICATION_COMMAND,
    AUTOCOMPLETE,
    CALLBACKS_ALLOWED,
    EPHEMERAL,
    IS_COMPONENTS_V2,
    LOADING,
    MESSAGE_COMMAND,
    MESSAGE_COMPONENT,
    MESSAGEABLE_TYPES,
    SUPPRESS_EMBEDS,
    SUPPRESS_NOTIFICATIONS,
    USE_APPLICATION_COMMANDS,
    VIEW_CHANNEL,
)
from .models import FakeMember, FakeMessage
from .rest import ApiError, RecordedRequest, _err, _invalid_form

if TYPE_CHECKING:
    from .server import FakeDiscord


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


class Interactions:
    """Sending interactions, and the callback, ``@original`` and followup routes."""

    async def interaction(self, command: str, options: dict[str, Any] | None = None, *,
                          member: FakeMember | int | None = None, channel_id: int | None = None) -> FakeInteraction:
        """Send INTERACTION_CREATE for a slash command, as a user typing ``/command``.

        ``command`` is the full path, e.g. ``"oracle ask"``; ``options`` maps option names to
        values. Option types, ``data.id`` and ``data.guild_id`` come from the commands the bot
        registered (guild first, then global); like the Discord client, unknown or missing
        required options, values outside ``choices`` or min/max raise ValueError. ``member``
        defaults to ``fake.player``.
        """
        data = self._command_data(command, options or {}, focused=None)
        return await self._send_interaction(APPLICATION_COMMAND, data, member, channel_id)

    async def autocomplete(self, command: str, options: dict[str, Any] | None = None, *, focused: str | None = None,
                           member: FakeMember | int | None = None, channel_id: int | None = None,
                           timeout: float | None = None) -> list[dict]:
        """Send an AUTOCOMPLETE interaction (``focused`` defaults to the last option given)
        and return the choices the bot answered (``[{"name": ..., "value": ...}]``).
        The handle is ``fake.interactions[-1]``."""
        options = dict(options or {})
        if focused is None:
            if not options:
                raise ValueError("autocomplete needs at least the focused option's text")
            focused = list(options)[-1]
        options.setdefault(focused, "")
        data = self._command_data(command, options, focused=focused)
        inter = await self._send_interaction(AUTOCOMPLETE, data, member, channel_id)
        await inter.wait_acknowledged(timeout)
        assert inter.response is not None
        if inter.response.type != 8:
            raise AssertionError(f"autocomplete answered with callback type {inter.response.type}")
        return list(inter.choices or [])

    async def click(self, message: FakeMessage | int, custom_id: str, *,
                    member: FakeMember | int | None = None) -> FakeInteraction:
        """A member clicks a button of a stored message (MESSAGE_COMPONENT), only a button
        that is really there (not disabled) on a message that member can see (not
        deleted; in a channel they may view; an ephemeral message only by the member whose
        interaction created it). ValueError otherwise, as a user cannot click what is not there."""
        msg = message if isinstance(message, FakeMessage) else self._messages.get(int(message))
        if msg is None or msg.deleted:
            raise ValueError(f"no such message {message!r}")
        who = self._member(member) if member is not None else self.player
        if msg.channel_id not in self.channels:
            raise ValueError("the fake only sends component interactions for guild messages")
        if not self.permissions_in(who, msg.channel_id) & VIEW_CHANNEL:
            raise ValueError(f"{who.username} cannot see channel {msg.channel_id}")
        if msg.ephemeral:
            origin = self._interactions_by_id.get(msg.interaction_id or 0)
            if origin is None or origin.member.id != who.id:
                raise ValueError(f"{who.username} cannot see someone else's ephemeral message {msg.id}")
        buttons = [c for row in msg.components for c in row.get("components") or [] if c.get("type") == 2]
        button = next((b for b in buttons if b.get("custom_id") == custom_id), None)
        if button is None:
            ids = [b.get("custom_id") for b in buttons if b.get("custom_id")]
            raise ValueError(f"message {msg.id} has no button {custom_id!r} (its buttons: {ids})")
        if button.get("disabled"):
            raise ValueError(f"button {custom_id!r} is disabled")
        data = {"custom_id": custom_id, "component_type": 2}
        return await self._send_interaction(MESSAGE_COMPONENT, data, who, msg.channel_id, message=msg)

    async def context_menu(self, name: str, message: FakeMessage | int, *,
                           member: FakeMember | int | None = None) -> FakeInteraction:
        """A member runs the message context-menu command ``name`` (type 3, Apps > name) on a
        stored message: INTERACTION_CREATE type 2 whose data carries ``target_id`` and the
        message in ``resolved.messages``; its channel is the message's. ValueError if the bot did
        not register such a command (guild first, then global)."""
        msg = message if isinstance(message, FakeMessage) else self._messages.get(int(message))
        if msg is None or msg.deleted or msg.ephemeral:
            raise ValueError(f"no such message {message!r} to run {name!r} on")
        if msg.channel_id not in self.channels:
            raise ValueError("the fake only runs context menus on guild messages")
        data = self._context_menu_data(name, msg.id)
        data["resolved"] = {"messages": {str(msg.id): copy.deepcopy(msg.data)}}
        return await self._send_interaction(APPLICATION_COMMAND, data, member, msg.channel_id)

    def _context_menu_data(self, name: str, target_id: int) -> dict:
        for commands, is_guild in ((self.guild_commands.get(self.guild_id, []), True), (self.global_commands, False)):
            cmd = next((c for c in commands if c["name"] == name and c.get("type", 1) == MESSAGE_COMMAND), None)
            if cmd is not None:
                data: dict[str, Any] = {"id": cmd["id"], "name": name, "type": MESSAGE_COMMAND,
                                        "target_id": str(target_id)}
                if is_guild:
                    data["guild_id"] = str(self.guild_id)
                return data
        known = sorted(c["name"] for c in [*self.guild_commands.get(self.guild_id, []), *self.global_commands]
                       if c.get("type", 1) == MESSAGE_COMMAND)
        raise ValueError(f"no message context menu {name!r} is registered with the fake (registered: {known}); "
                         "did the bot sync its command tree?")

    def advance(self, seconds: float) -> None:
        """Simulated time: every interaction sent so far becomes ``seconds`` older, so its 3 s
        acknowledgement deadline and its 15-minute token (``token_ttl``) run out without waiting."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        self.elapsed += seconds
        for inter in self.interactions:
            inter.created -= seconds
        self._notify()

    async def _send_interaction(self, itype: int, data: dict, member: FakeMember | int | None,
                                channel_id: int | None, *,
                                message: FakeMessage | None = None) -> FakeInteraction:
        session = await self._require_session()
        member = self._member(member) if member is not None else self.player
        channel_id = channel_id or self.channel_id
        if channel_id not in self.channels:
            raise ValueError(f"unknown channel {channel_id}")
        if self.channels[channel_id]["type"] not in MESSAGEABLE_TYPES:
            raise ValueError(f"channel {channel_id} is a category or forum: no interaction starts there")
        if ~self.permissions_in(member, channel_id) & (VIEW_CHANNEL | USE_APPLICATION_COMMANDS):
            raise ValueError(f"{member.username} cannot use application commands in channel {channel_id}"
                             " (View Channel / Use Application Commands)")
        payload: dict[str, Any] = {
            "id": str(self._ids.next()), "application_id": str(self.app_id), "type": itype, "data": data,
            "guild_id": str(self.guild_id), "guild": {"id": str(self.guild_id), "locale": "en-US", "features": []},
            "channel_id": str(channel_id), "channel": self._channel_payload(channel_id, permissions_of=member),
            "member": {**member.member_payload(), "permissions": str(self.permissions_in(member, channel_id))},
            "token": "fake-interaction-" + secrets.token_urlsafe(32), "version": 1,
            "app_permissions": str(self.permissions_in(self.bot, channel_id)), "locale": "en-US",
            "guild_locale": "en-US", "entitlements": [], "authorizing_integration_owners": {"0": str(self.guild_id)},
            "context": 0, "attachment_size_limit": 10 * 1024 * 1024,
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
                self._check_message_body(data)
                flags = int(data.get("flags") or 0) & (EPHEMERAL | SUPPRESS_EMBEDS | SUPPRESS_NOTIFICATIONS | IS_COMPONENTS_V2)
                message = self._new_message(inter.channel_id, self.bot, data, source="interaction",
                                            msg_type=20 if inter.type == APPLICATION_COMMAND else 0,
                                            flags=flags, interaction=inter)
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
                    self._check_message_body(data, require_content=False)
                    self._apply_edit(inter.source_message, data)
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

    async def _r_edit_wh_message(self, req: RecordedRequest, application_id: str, token: str,
                                 message_id: str | None = None) -> tuple[int, Any]:
        inter = self._webhook_interaction(application_id, token)
        kind = "edit_original" if message_id is None else "edit_followup"
        try:
            msg = self._webhook_message(inter, message_id)
            body = self._check_message_body(req.json, require_content=False)
            self._apply_edit(msg, body)
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
            body = self._check_message_body(req.json)
            original = inter.original
            if inter.response_type == 5 and original is not None and original.loading and not original.deleted:
                self._apply_edit(original, body)  # keeps the defer's ephemerality
                msg, replaced = original, True
            else:
                flags = int(body.get("flags") or 0) & (EPHEMERAL | SUPPRESS_EMBEDS | SUPPRESS_NOTIFICATIONS | IS_COMPONENTS_V2)
                msg = self._new_message(inter.channel_id, self.bot, body, source="followup", flags=flags,
                                        interaction=inter)
        except ApiError as exc:
            self._event(inter, "followup", exc.status, req.json, error=exc.body)
            raise
        inter.followups.append(msg)
        self._event(inter, "followup", 200, req.json, message_id=msg.id, replaced_original=replaced)
        await self._announce(msg, "MESSAGE_UPDATE" if replaced else "MESSAGE_CREATE")
        if req.query.get("wait", "").lower() in ("1", "true"):
            return 200, msg.data
        return 204, None

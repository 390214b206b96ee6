"""The REST API: the route table, request recording, Discord's JSON errors, rate limits (429s
with Retry-After and X-RateLimit-* headers), message, embed and component limits, and the routes
for the bot user and its guilds (docs/fakes.md).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from .constants import IS_COMPONENTS_V2


def _flatten(data: Any) -> Any:
    """A JSON round trip: a detached, plain copy."""
    return json.loads(json.dumps(data))


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


def _check_button(child: Any, seen: set[str]) -> dict:
    """Discord's checks of a button with a custom id (styles 1-4), the one component the Oracle sends:
    a select, a link or a premium button is refused as not served, so that one sent is noticed here."""
    if not isinstance(child, dict) or child.get("type") != 2 or child.get("style") not in (1, 2, 3, 4):
        return {"type": _err("COMPONENT_NOT_SERVED", "This fake serves buttons of styles 1-4 only.")}
    e: dict[str, Any] = {}
    custom_id = child.get("custom_id")
    if not custom_id:
        e["custom_id"] = _err("BASE_TYPE_REQUIRED", "This field is required")
    elif not isinstance(custom_id, str) or len(custom_id) > 100:
        e["custom_id"] = _err("BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
    elif custom_id in seen:
        e["custom_id"] = _err("COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id was already specified")
    else:
        seen.add(custom_id)
    if child.get("url") is not None:
        e["url"] = _err("BUTTON_COMPONENT_URL_NOT_ALLOWED", "A URL can only be set on a link button")
    label = child.get("label")
    if label is not None and len(str(label)) > 80:
        e["label"] = _err("BASE_TYPE_MAX_LENGTH", "Must be 80 or fewer in length.")
    elif not label and not child.get("emoji"):
        e["label"] = _err("BUTTON_COMPONENT_LABEL_OR_EMOJI_REQUIRED", "A button must have a label or an emoji")
    return e


def _check_components(components: Any, flags: int) -> dict | None:
    """A message's ``components``, as Discord checks them: at most 5 action rows of 1-5 buttons. The
    error tree under ``components`` of a 50035, or None. Layout components (IS_COMPONENTS_V2) are refused."""
    if not isinstance(components, list):
        return _err("LIST_TYPE_CONVERT", "Only iterables may be used in a ListType")
    if flags & IS_COMPONENTS_V2:  # layout components: the Oracle sends none, and this fake checks none
        return _err("COMPONENTS_V2_NOT_SERVED", "Layout components are not served by this fake.")
    if len(components) > 5:
        return _err("BASE_TYPE_MAX_LENGTH", "Must be 5 or fewer in length.")
    errors: dict[str, Any] = {}
    seen: set[str] = set()
    for r, row in enumerate(components):
        if not isinstance(row, dict) or row.get("type") != 1:
            errors[str(r)] = {"type": _err("UNION_TYPE_CHOICES", 'Value of field "type" must be one of (1,).')}
            continue
        children = row.get("components")
        if not isinstance(children, list) or not 1 <= len(children) <= 5:
            errors[str(r)] = {"components": _err("BASE_TYPE_BAD_LENGTH", "Must be between 1 and 5 in length.")}
            continue
        child_errors = {str(c): e for c, child in enumerate(children) if (e := _check_button(child, seen))}
        if child_errors:
            errors[str(r)] = {"components": child_errors}
    return errors or None


@dataclass
class RecordedRequest:
    """One REST request as the fake saw it, and what it answered."""

    method: str
    path: str  # after /api/v10, e.g. "/channels/123/messages"
    query: dict[str, str]
    headers: dict[str, str]
    json: Any  # the JSON body, or None
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
    hits: list[RecordedRequest] = field(default_factory=list)

    def matches(self, req: RecordedRequest) -> bool:
        if self.method not in ("*", req.method):
            return False
        return self.route in (req.route, req.path) or fnmatch.fnmatchcase(req.path, self.route)


CHANNEL_MESSAGES = ("/channels/{channel_id}/messages", "/channels/{channel_id}/messages/{message_id}")
BUCKET = hashlib.sha1(b"channel messages").hexdigest()[:32]


@dataclass
class Window:
    """One channel's message bucket since its first send or edit."""

    started: float
    used: int = 0


class Rest:
    """The HTTP side: routing, recording, rate limits, body limits and the simple read routes."""

    def requests_for(self, method: str | None = None, route: str | None = None) -> list[RecordedRequest]:
        out = []
        for req in self.requests:
            if method is not None and req.method != method:
                continue
            if route is not None and route not in (req.route, req.path) and not fnmatch.fnmatchcase(req.path, route):
                continue
            out.append(req)
        return out

    def _build_routes(self) -> list[tuple[str, str, re.Pattern, Callable[..., Awaitable[Any]], bool]]:
        table: list[tuple[str, str, Callable[..., Awaitable[Any]], bool]] = [
            # (method, template, handler, needs bot auth)
            ("GET", "/users/@me", self._r_me, True),
            ("GET", "/users/@me/guilds", self._r_my_guilds, True),
            ("GET", "/oauth2/applications/@me", self._r_app_info, True),
            ("GET", "/applications/@me", self._r_app_info, True),
            ("PUT", "/applications/{application_id}/commands", self._r_put_commands, True),
            ("PUT", "/applications/{application_id}/guilds/{guild_id}/commands", self._r_put_commands, True),
            ("POST", "/interactions/{interaction_id}/{token}/callback", self._r_callback, False),
            ("PATCH", "/webhooks/{application_id}/{token}/messages/@original", self._r_edit_wh_message, False),
            ("DELETE", "/webhooks/{application_id}/{token}/messages/@original", self._r_delete_wh_message, False),
            ("PATCH", "/webhooks/{application_id}/{token}/messages/{message_id}", self._r_edit_wh_message, False),
            ("DELETE", "/webhooks/{application_id}/{token}/messages/{message_id}", self._r_delete_wh_message,
             False),
            ("POST", "/webhooks/{application_id}/{token}", self._r_followup, False),
            ("GET", "/channels/{channel_id}", self._r_get_channel, True),
            ("POST", "/channels/{channel_id}/messages", self._r_create_message, True),
            ("PATCH", "/channels/{channel_id}/messages/{message_id}", self._r_edit_message, True),
            ("POST", "/channels/{channel_id}/messages/{message_id}/threads", self._r_thread_from_message, True),
            ("PUT", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me", self._r_react, True),
            ("DELETE", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me", self._r_unreact, True),
            ("POST", "/users/@me/channels", self._r_open_dm, True),
            ("POST", "/channels/{channel_id}/typing", self._r_typing, True),
        ]
        compiled = []
        for method, template, handler, auth in table:
            parts = re.split(r"(\{\w+\})", template)
            rx = "".join(f"(?P<{p[1:-1]}>[^/]+)" if p.startswith("{") else re.escape(p) for p in parts)
            compiled.append((method, template, re.compile(f"^{rx}/?$"), handler, auth))
        return compiled

    def rate_limit(self, method: str, route: str, *, times: int = 1, retry_after: float = 0.2) -> RateLimitRule:
        """The next ``times`` requests matching ``method`` (or "*") and ``route`` (a route
        template like "/webhooks/{application_id}/{token}", an exact path, or a glob) get
        429 with Retry-After / X-RateLimit-* headers and Discord's JSON body."""
        rule = RateLimitRule(method.upper() if method != "*" else "*", route, times, retry_after)
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
        if request.content_type.startswith("multipart/"):  # files: the Oracle sends none
            raise ApiError(400, 0, "This fake takes no files (multipart bodies).")
        raw = await request.read()
        if raw:
            try:
                rec.json = json.loads(raw)
            except ValueError:
                raise ApiError(400, 50109, "The request body contains invalid JSON.") from None

    async def _handle_api(self, request: web.Request) -> web.Response:
        rec = RecordedRequest(request.method, "/" + request.match_info["tail"], dict(request.query),
                              dict(request.headers), None, time.monotonic())
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
                handler, params, auth = matched
                wait, headers = self._spend(rec, params) if rule is None else (None, {})
                if rule is not None:
                    status, body, headers = self._rate_limited(rule, rec)
                elif wait is not None:
                    rec.rate_limited = True
                    status, body = 429, {"message": "You are being rate limited.", "retry_after": round(wait, 3),
                                         "global": False}
                    headers |= {"Retry-After": str(max(1, math.ceil(wait))), "X-RateLimit-Scope": "user"}
                else:
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

    def _spend(self, rec: RecordedRequest, params: dict[str, str]) -> tuple[float | None, dict[str, str]]:
        """Sending and editing messages in a channel: `channel_message_budget` (5 per 5 s, as Discord
        allows a bot; None: no limit), counted from the window's first request. The seconds to wait
        when spent (else None), and the bucket's headers, which discord.py paces itself by."""
        if self.channel_message_budget is None or rec.method not in ("POST", "PATCH") or rec.route not in CHANNEL_MESSAGES:
            return None, {}
        limit, per = self.channel_message_budget
        now = time.monotonic()
        window = self._windows.get(params["channel_id"])
        if window is None or now - window.started >= per:
            window = self._windows[params["channel_id"]] = Window(now)
        reset_after = window.started + per - now
        wait = reset_after if window.used >= limit else None
        if wait is None:
            window.used += 1
        return wait, {"X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": str(limit - window.used),
                      "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
                      "X-RateLimit-Reset-After": f"{reset_after:.3f}", "X-RateLimit-Bucket": BUCKET}

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
            "X-RateLimit-Scope": "user",
        }
        body = {"message": "You are being rate limited.", "retry_after": rule.retry_after, "global": False}
        return 429, body, headers

    @staticmethod
    def _check_message_body(body: Any, *, require_content: bool = True) -> dict:
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
        if body.get("components") is not None:
            component_errors = _check_components(body["components"], int(body.get("flags") or 0))
            if component_errors:
                errors["components"] = component_errors
        if errors:
            raise _invalid_form(errors)
        if require_content and not (content or embeds or body.get("components")):
            raise ApiError(400, 50006, "Cannot send an empty message")
        return body

    async def _r_me(self, req: RecordedRequest) -> tuple[int, Any]:
        return 200, self.bot_user_payload()

    async def _r_my_guilds(self, req: RecordedRequest) -> tuple[int, Any]:
        """The bot's servers as partial guilds (one here), paged by `after`/`before` and `limit` (1-200)."""
        limit = int(req.query.get("limit", 200))
        if not 1 <= limit <= 200:
            raise ApiError(400, 50035, "Invalid Form Body")
        after, before = int(req.query.get("after", 0)), int(req.query.get("before", 1 << 63))
        guilds = [] if not after < self.guild_id < before else [{
            "id": str(self.guild_id), "name": self.guild_name, "icon": None, "owner": False,
            "permissions": str(self.permissions_for(self.bot)), "features": [],
        }]
        return 200, guilds[:limit]

    async def _r_app_info(self, req: RecordedRequest) -> tuple[int, Any]:
        return 200, self.application_payload()

    @staticmethod
    def _snowflake(value: str, code: int, message: str) -> int:
        try:
            return int(value)
        except ValueError:
            raise ApiError(404, code, message) from None


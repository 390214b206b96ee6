"""Small doubles of Discord's objects, for the bot's own logic (`answering`, `delivery`, `tables`)
tested without a gateway: the fake Discord (testing/discord) stays for the end-to-end tests.

The bot tells places and members apart with `isinstance` (a thread, a forum's post, a voice chat, a
member with roles), so the channel and member doubles are subclasses of discord.py's own classes that
set only public attributes and replace the properties that would read a connection's cache. What
they are asked to send is recorded, in order, in `Sent`; an `error` queued on a double is raised by
its next call, as Discord answers one request with an error and the next one normally.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import discord


def http_error(code: int, status: int = 404, text: str = "refused") -> discord.HTTPException:
    """The exception discord.py raises for an error response with Discord's JSON `code`."""
    kind = {403: discord.Forbidden, 404: discord.NotFound}.get(status, discord.HTTPException)
    return kind(SimpleNamespace(status=status, reason=text), {"code": code, "message": text})


TOKEN_GONE = 10015  # Unknown Webhook: the interaction's token has expired


@dataclass
class Sent:
    """One call made to Discord: what was called, on what, with which arguments."""

    call: str
    target: int | None
    content: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


class Calls(list[Sent]):
    """Every call every double made, and errors to raise on the next ones."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[discord.HTTPException] = []

    def made(self, call: str, target: int | None, content: str | None = None, **fields: Any) -> None:
        self.append(Sent(call, target, content, fields))
        if self.errors:
            raise self.errors.pop(0)

    def of(self, call: str) -> list[Sent]:
        return [s for s in self if s.call == call]


class Plain:
    """A double's repr and str: discord.py's read attributes a double does not have."""

    id: int

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}>"

    __str__ = __repr__


class Message(Plain, discord.Message):
    """A message (the bot's, unless `author` says whose): it can be edited and start a thread."""

    _ids = iter(range(5000, 10**9))

    def __init__(self, calls: Calls, channel: Any, content: str | None, author: Any = None) -> None:
        self.calls = calls
        self.id = next(self._ids)
        self.channel = channel
        self.content = content
        self.author = author

    async def edit(self, content: str | None = None, **fields: Any) -> Message:
        self.calls.made("edit", self.id, content, **fields)
        self.content = content
        return self

    async def create_thread(self, *, name: str, auto_archive_duration: int = 1440) -> Any:
        self.calls.made("create_thread", self.id, name)
        return SimpleNamespace(id=self.id, name=name)  # a thread opened on a message takes its id

    def to_reference(self, *, fail_if_not_exists: bool = True) -> discord.MessageReference:
        return discord.MessageReference(message_id=self.id, channel_id=self.channel.id,
                                        fail_if_not_exists=fail_if_not_exists)


class TextChannel(Plain, discord.TextChannel):
    """A server's text channel (in a category or not), which the members `seen_by` may view."""

    def __init__(self, calls: Calls, id: int, category_id: int | None = None, *,  # noqa: A002
                 seen_by: Iterable[int] = ()) -> None:
        self.calls = calls
        self.id = id
        self.category_id = category_id
        self.name = f"channel-{id}"
        self.seen_by = set(seen_by)

    def permissions_for(self, obj: Any, /) -> discord.Permissions:
        return discord.Permissions(view_channel=obj.id in self.seen_by)

    async def send(self, content: str | None = None, **fields: Any) -> Message:  # type: ignore[override]
        self.calls.made("send", self.id, content, **fields)
        return Message(self.calls, self, content)

    def get_partial_message(self, message_id: int, /) -> Message:  # type: ignore[override]
        message = Message(self.calls, self, None)
        message.id = message_id
        return message


class CategoryChannel(Plain, discord.CategoryChannel):
    """A category and the channels in it."""

    channels: list[Any] = []  # type: ignore[assignment]  # noqa: RUF012  (replaces the property reading the guild)

    def __init__(self, id: int, channels: list[Any]) -> None:  # noqa: A002
        self.id = id
        self.channels = channels


def guild(*places: Any) -> Any:
    """A server holding these channels and categories (and what the categories hold)."""
    found = {p.id: p for p in places} | {c.id: c for p in places for c in getattr(p, "channels", [])}
    return SimpleNamespace(id=1, get_channel=found.get)


class ForumChannel(Plain, discord.ForumChannel):
    def __init__(self, id: int) -> None:  # noqa: A002
        self.id = id
        self.category_id = None


class VoiceChannel(Plain, discord.VoiceChannel):
    def __init__(self, id: int) -> None:  # noqa: A002
        self.id = id
        self.category_id = None


class Thread(Plain, discord.Thread):
    """A thread or a forum's post: its parent is the channel or forum it was opened in."""

    parent: Any = None  # replaces the property that reads the guild's cache

    def __init__(self, id: int, parent: Any) -> None:  # noqa: A002
        self.id = id
        self.parent = parent
        self.parent_id = parent.id


@dataclass(frozen=True)
class Role:
    id: int
    name: str


class Member(Plain, discord.Member):
    """A server member: their roles and whether they may manage the server; direct messages to them
    are recorded."""

    # Plain attributes in place of the properties that read the member's user and guild caches.
    id: int = 0  # type: ignore[assignment]
    display_name: str = ""  # type: ignore[assignment]
    roles: list[Role] = []  # type: ignore[assignment]  # noqa: RUF012
    guild_permissions: discord.Permissions = discord.Permissions.none()  # type: ignore[assignment]

    @property
    def mention(self) -> str:
        return f"<@{self.id}>"

    def __init__(self, calls: Calls, id: int, *, roles: Iterable[str] = (), manage_server: bool = False,  # noqa: A002
                 guild: Any = None) -> None:
        self.calls = calls
        self.guild = guild
        self.id = id
        self.display_name = f"member {id}"
        self.roles = [Role(900 + n, name) for n, name in enumerate(roles)]
        self.guild_permissions = discord.Permissions(manage_guild=manage_server)

    async def send(self, content: str | None = None, **fields: Any) -> Message:  # type: ignore[override]
        self.calls.made("dm", self.id, content, **fields)
        return Message(self.calls, SimpleNamespace(id=-self.id), content)


class Interaction:
    """A slash command's interaction, created `age` ago: its deferred reply and follow-ups."""

    def __init__(self, calls: Calls, user: Member, channel: Any, *, age: dt.timedelta = dt.timedelta(0)) -> None:
        self.calls = calls
        self.id = 77
        self.user = user
        self.channel = channel
        self.channel_id = getattr(channel, "id", None)
        self.guild_id = 1
        self.created_at = discord.utils.utcnow() - age
        self.original = Message(calls, channel, None)
        self.response = SimpleNamespace(defer=self._defer)
        self.followup = SimpleNamespace(send=self._followup)
        self.client = SimpleNamespace(get_partial_messageable=lambda id: TextChannel(calls, id))
        self.extras: dict[str, Any] = {}

    async def _defer(self, *, ephemeral: bool = False, thinking: bool = False) -> None:
        self.calls.made("defer", self.id, ephemeral=ephemeral)

    async def edit_original_response(self, *, content: str | None = None, **fields: Any) -> Message:
        self.calls.made("edit_original", self.id, content, **fields)
        self.original.content = content
        return self.original

    async def _followup(self, content: str, *, ephemeral: bool = False, **fields: Any) -> Message:
        self.calls.made("followup", self.id, content, ephemeral=ephemeral, **fields)
        return Message(self.calls, self.channel, content)

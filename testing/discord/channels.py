"""Channels, threads, forum posts, DMs and the messages in them: the message store, mentions as
allowed_mentions lets them ping, edits, a user posting, and the REST routes for channel messages,
reactions, typing, threads from a message and DMs. What each refuses: docs/fakes.md.
"""

from __future__ import annotations

import asyncio
import copy
import re
from typing import TYPE_CHECKING, Any

from .constants import (
    ADD_REACTIONS,
    CREATE_PUBLIC_THREADS,
    DM,
    GUILD_FORUM,
    GUILD_TEXT,
    INTENT_GUILDS,
    IS_COMPONENTS_V2,
    LOADING,
    MESSAGEABLE_TYPES,
    PUBLIC_THREAD,
    READ_MESSAGE_HISTORY,
    SEND_MESSAGES,
    SEND_MESSAGES_IN_THREADS,
    SUPPRESS_EMBEDS,
    SUPPRESS_NOTIFICATIONS,
    THREAD_TYPES,
    VIEW_CHANNEL,
)
from .models import FakeMember, FakeMessage, PendingId, _now_iso
from .rest import ApiError, RecordedRequest, _err, _invalid_form

if TYPE_CHECKING:
    from .interactions import FakeInteraction


_USER_MENTION = re.compile(r"<@!?(\d+)>")
_ROLE_MENTION = re.compile(r"<@&(\d+)>")

ARCHIVE_DURATIONS = (60, 1440, 4320, 10080)  # minutes


class Channels:
    """The message store and the channel, message and thread routes."""

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

    def add_thread(self, parent_id: int, name: str, *, owner: FakeMember | int | None = None) -> PendingId:
        """A public thread (type 11) a member (``owner``, default ``fake.player``) opened in a text
        channel, without a starter message. THREAD_CREATE if a client is connected (the bot is not
        a member of it: no ``member`` field)."""
        parent = self.channels.get(int(parent_id))
        if parent is None or parent["type"] != GUILD_TEXT:
            raise ValueError(f"threads open in text channels; {parent_id} is not one")
        owner = self._member(owner) if owner is not None else self.player
        self._user_may(owner, int(parent_id), VIEW_CHANNEL | CREATE_PUBLIC_THREADS, "open a thread in")
        thread = self._thread_payload(self._ids.next(), parent, name, {}, owner=owner)
        return PendingId(int(thread["id"]), self._add_thread(thread))

    def add_forum_post(self, forum_id: int, author: FakeMember | int, name: str, content: str) -> PendingId:
        """A member's post in a forum: a public thread (type 11) whose parent is the forum, and its
        starter message, whose id is the thread's. If a client is connected, THREAD_CREATE then
        MESSAGE_CREATE; otherwise the post comes with GUILD_CREATE's threads."""
        forum = self.channels.get(int(forum_id))
        if forum is None or forum["type"] != GUILD_FORUM:
            raise ValueError(f"{forum_id} is not a forum channel")
        author = self._member(author)
        if not content:
            raise ValueError("a forum post needs a starter message")
        self._user_may(author, int(forum_id), VIEW_CHANNEL | SEND_MESSAGES, "post in")
        thread_id = self._ids.next()
        thread = self._thread_payload(thread_id, forum, name, {}, owner=author)
        self.channels[thread_id] = thread
        self.thread_ids.append(thread_id)
        starter = self._new_message(thread_id, author, {"content": content}, source="user", record_body=False,
                                    message_id=thread_id)
        thread["message_count"] = 0  # the starter message is not counted
        forum["last_message_id"] = str(thread_id)
        created = {**copy.deepcopy(thread), "newly_created": True}

        async def announce(session: Any) -> None:
            if session.has(INTENT_GUILDS) and self._bot_sees(forum_id):
                await self._dispatch(session, "THREAD_CREATE", created)
            await self._announce(starter, "MESSAGE_CREATE", session=session)

        return PendingId(thread_id, self._soon(announce))

    def _user_may(self, member: FakeMember, channel_id: int, needed: int, what: str) -> None:
        """A user cannot do in Discord's client what their permissions do not allow: ValueError."""
        if needed & ~self.permissions_in(member, channel_id):
            raise ValueError(f"{member.username} may not {what} channel {channel_id} (missing permissions)")

    def _add_thread(self, thread: dict) -> Any:
        thread_id = int(thread["id"])
        self.channels[thread_id] = thread
        self.thread_ids.append(thread_id)
        self._notify()
        created = {**copy.deepcopy(thread), "newly_created": True}

        async def announce(session: Any) -> None:
            if session.has(INTENT_GUILDS) and self._bot_sees(thread_id):
                await self._dispatch(session, "THREAD_CREATE", created)

        return self._soon(announce)

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
        if self.channels[channel_id]["type"] not in MESSAGEABLE_TYPES:
            raise ValueError(f"channel {channel_id} (type {self.channels[channel_id]['type']}) takes no messages;"
                             " a forum takes posts (add_forum_post)")
        in_thread = self.channels[channel_id]["type"] in THREAD_TYPES
        self._user_may(author, channel_id, VIEW_CHANNEL | (SEND_MESSAGES_IN_THREADS if in_thread else SEND_MESSAGES),
                       "post in")
        body: dict[str, Any] = {"content": content, "embeds": embeds or []}
        if reply_to is not None:
            ref = reply_to if isinstance(reply_to, FakeMessage) else self._messages[int(reply_to)]
            body["message_reference"] = {"message_id": str(ref.id), "channel_id": str(ref.channel_id)}
        unarchived = self._posting(self.channels[channel_id], by_bot=False)
        msg = self._new_message(channel_id, author, body, source="user", record_body=False,
                                explicit_mentions=None if mentions is None else [self._member(m) for m in mentions])
        await self._announce(msg, "MESSAGE_CREATE", session=session)
        if unarchived:
            await self._thread_update(self.channels[channel_id])
        return msg

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

    def _new_message(self, channel_id: int, author: FakeMember, body: dict, *, source: str, msg_type: int = 0,
                     flags: int = 0, interaction: FakeInteraction | None = None, record_body: bool = True,
                     explicit_mentions: list[FakeMember] | None = None, message_id: int | None = None) -> FakeMessage:
        channel = self.channels.get(channel_id) or self.dm_channels[channel_id]
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
        data: dict[str, Any] = {
            "id": str(message_id or self._ids.next()), "type": msg_type, "channel_id": str(channel_id),
            "author": author.user_payload(), "content": content, "timestamp": _now_iso(),
            "edited_timestamp": None, "tts": False, "mention_everyone": everyone,
            "mentions": [u.user_payload() for u in users], "mention_roles": [str(r) for r in roles],
            "attachments": [],
            "embeds": self._embeds(body.get("embeds")), "pinned": False, "flags": flags,
            "components": copy.deepcopy(body.get("components") or []),
        }
        if body.get("nonce") is not None:
            data["nonce"] = body["nonce"]
        if referenced is not None:
            data["message_reference"] = {"type": 0, "message_id": str(referenced.id),
                                         "channel_id": str(referenced.channel_id)}
            if referenced.channel_id in self.channels:
                data["message_reference"]["guild_id"] = str(self.guild_id)
            data["referenced_message"] = copy.deepcopy(referenced.data)
        if channel["type"] in THREAD_TYPES:
            data["position"] = channel["total_message_sent"]
        if interaction is not None:
            data["webhook_id"] = str(self.app_id)
            data["application_id"] = str(self.app_id)
            data["interaction_metadata"] = {
                "id": str(interaction.id), "type": interaction.type, "user": interaction.member.user_payload(),
                "authorizing_integration_owners": {"0": str(self.guild_id)}, "name": interaction.name,
                "command_type": (interaction.payload.get("data") or {}).get("type", 1),
            }
            target = (interaction.payload.get("data") or {}).get("target_id")
            if target is not None:  # a context-menu command's answer names the message it ran on
                data["interaction_metadata"]["target_message_id"] = target
            data["interaction"] = {"id": str(interaction.id), "type": interaction.type, "name": interaction.name,
                                   "user": interaction.member.user_payload()}
        msg = FakeMessage(data, source, copy.deepcopy(body) if record_body else None,
                          interaction_id=interaction.id if interaction else None)
        self._messages[msg.id] = msg
        self._channel_messages.setdefault(channel_id, []).append(msg)
        if not msg.ephemeral:
            channel["last_message_id"] = str(msg.id)
            if channel["type"] in THREAD_TYPES:
                channel["message_count"] += 1
                channel["total_message_sent"] += 1
        self._notify()
        return msg

    def _apply_edit(self, msg: FakeMessage, body: dict, *,
                    resolve_loading: bool = True, mark_edited: bool = True) -> None:
        data = copy.deepcopy(msg.data)
        if "content" in body:
            data["content"] = body["content"] or ""
        if "embeds" in body:
            data["embeds"] = self._embeds(body["embeds"])
        if "components" in body:
            data["components"] = copy.deepcopy(body["components"] or [])
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
        self._notify()

    def _channel(self, channel_id: str) -> dict:
        snowflake = self._snowflake(channel_id, 10003, "Unknown Channel")
        channel = self.channels.get(snowflake) or self.dm_channels.get(snowflake)
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

    async def _r_create_message(self, req: RecordedRequest, channel_id: str) -> tuple[int, Any]:
        channel = self._channel(channel_id)
        if channel["type"] == DM:
            if int(channel["recipients"][0]["id"]) in self._closed_dms:
                raise ApiError(403, 50007, "Cannot send messages to this user")
        elif channel["type"] not in MESSAGEABLE_TYPES:
            raise ApiError(400, 50008, "Cannot send messages in a non-text channel")
        elif channel["type"] in THREAD_TYPES:
            self._require(channel, VIEW_CHANNEL | SEND_MESSAGES_IN_THREADS)
        else:
            self._require(channel, VIEW_CHANNEL | SEND_MESSAGES)
        body = self._check_message_body(req.json)
        if channel["type"] != DM and (body.get("message_reference") or {}).get("message_id"):
            self._require(channel, READ_MESSAGE_HISTORY)  # a reply needs to read what it answers
        flags = int(body.get("flags") or 0) & (SUPPRESS_EMBEDS | SUPPRESS_NOTIFICATIONS | IS_COMPONENTS_V2)
        unarchived = self._posting(channel, by_bot=True)
        msg = self._new_message(int(channel["id"]), self.bot, body, source="channel", flags=flags)
        await self._announce(msg, "MESSAGE_CREATE")
        if unarchived:
            await self._thread_update(channel)
        return 200, msg.data

    async def _r_edit_message(self, req: RecordedRequest, channel_id: str, message_id: str) -> tuple[int, Any]:
        channel = self._channel(channel_id)
        msg = self._channel_message(channel, message_id)
        self._refuse_if_archived(channel)
        body = self._check_message_body(req.json, require_content=False)
        if msg.author_id != self.app_id and set(body) - {"flags"}:
            raise ApiError(403, 50005, "Cannot edit a message authored by another user")
        self._apply_edit(msg, body)
        await self._announce(msg, "MESSAGE_UPDATE")
        return 200, msg.data

    async def _r_react(self, req: RecordedRequest, channel_id: str, message_id: str, emoji: str) -> tuple[int, Any]:
        channel = self._channel(channel_id)
        msg = self._channel_message(channel, message_id)
        self._refuse_if_archived(channel)
        self._require(channel, VIEW_CHANNEL | ADD_REACTIONS | READ_MESSAGE_HISTORY)
        if emoji not in msg.reactions:  # reacting twice with the same emoji changes nothing
            msg.reactions.append(emoji)
        self._notify()
        return 204, None

    async def _r_unreact(self, req: RecordedRequest, channel_id: str, message_id: str,
                         emoji: str) -> tuple[int, Any]:
        channel = self._channel(channel_id)
        msg = self._channel_message(channel, message_id)
        self._refuse_if_archived(channel)
        self._require(channel, VIEW_CHANNEL | READ_MESSAGE_HISTORY)
        if emoji in msg.reactions:
            msg.reactions.remove(emoji)
        self._notify()
        return 204, None

    async def _r_typing(self, req: RecordedRequest, channel_id: str) -> tuple[int, Any]:
        self._channel(channel_id)
        return 204, None

    def _thread_payload(self, thread_id: int, parent: dict, name: Any, body: dict,
                        owner: FakeMember | None = None) -> dict:
        owner = owner or self.bot
        if not isinstance(name, str) or not 1 <= len(name) <= 100:
            raise _invalid_form({"name": _err("BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")})
        # Discord takes 60, 1440, 4320 or 10080 minutes; without one, the parent channel's default.
        duration = body.get("auto_archive_duration", parent.get("default_auto_archive_duration", 1440))
        if duration not in ARCHIVE_DURATIONS:
            raise _invalid_form({"auto_archive_duration": _err(
                "BASE_TYPE_CHOICES", f"Value must be one of {{{', '.join(map(str, ARCHIVE_DURATIONS))}}}.")})
        now = _now_iso()
        self.thread_activity[thread_id] = self.elapsed
        metadata: dict[str, Any] = {
            "archived": False, "auto_archive_duration": duration,
            "archive_timestamp": now, "locked": False, "create_timestamp": now,
        }
        thread: dict[str, Any] = {
            "id": str(thread_id), "type": PUBLIC_THREAD, "guild_id": str(self.guild_id), "parent_id": parent["id"],
            "owner_id": str(owner.id), "name": name, "last_message_id": None,
            "rate_limit_per_user": int(body.get("rate_limit_per_user") or 0), "flags": 0,
            "message_count": 0, "member_count": 1, "total_message_sent": 0, "thread_metadata": metadata,
        }
        if parent["type"] == GUILD_FORUM:
            thread["applied_tags"] = []
        if owner.id == self.app_id:  # the bot's own membership, as Discord includes it for the creator
            thread["member"] = {"id": str(thread_id), "user_id": str(self.app_id), "join_timestamp": now, "flags": 1}
        return thread

    async def _open_thread(self, thread: dict) -> dict:
        task = self._add_thread(thread)
        if task is not None:
            await asyncio.wait([task])
        return thread

    async def _r_thread_from_message(self, req: RecordedRequest, channel_id: str,
                                     message_id: str) -> tuple[int, Any]:
        parent = self._channel(channel_id)
        if parent["type"] == DM:
            raise ApiError(400, 50003, "Cannot execute action on a DM channel")
        if parent["type"] != GUILD_TEXT:  # a thread, a voice channel's chat, a forum post
            raise ApiError(400, 50024, "Cannot execute action on this channel type")
        self._require(parent, VIEW_CHANNEL | CREATE_PUBLIC_THREADS)
        msg = self._channel_message(parent, message_id)
        if msg.thread_id is not None:
            raise ApiError(400, 160004, "A thread has already been created for this message")
        body = req.json or {}
        thread = self._thread_payload(msg.id, parent, body.get("name"), body)
        msg.data["thread"] = copy.deepcopy(thread)
        await self._open_thread(thread)
        return 201, thread

    # ----- direct messages -------------------------------------------------

    def _dm_channel(self, member: FakeMember) -> dict:
        channel_id = self._dm_of_user.get(member.id)
        if channel_id is None:
            channel_id = self._ids.next()
            self._dm_of_user[member.id] = channel_id
            self.dm_channels[channel_id] = {
                "id": str(channel_id), "type": DM, "last_message_id": None, "flags": 0,
                "recipients": [member.user_payload()],
            }
        return self.dm_channels[channel_id]

    def dm_messages(self, member: FakeMember | int) -> list[FakeMessage]:
        """What the bot sent to this member's DMs (current state, oldest first)."""
        channel_id = self._dm_of_user.get(self._member(member).id)
        return self.messages(channel_id) if channel_id is not None else []

    def close_dms(self, member: FakeMember | int) -> None:
        """The member no longer accepts DMs from the bot (blocked it, or turned off DMs from the
        server): sending there is 403 Cannot send messages to this user (50007)."""
        self._closed_dms.add(self._member(member).id)

    async def _r_open_dm(self, req: RecordedRequest) -> tuple[int, Any]:
        body = req.json if isinstance(req.json, dict) else {}
        recipient = body.get("recipient_id")
        if recipient is None:
            raise _invalid_form({"recipient_id": _err("BASE_TYPE_REQUIRED", "This field is required")})
        member = self.members.get(self._snowflake(str(recipient), 10013, "Unknown User"))
        if member is None:
            raise ApiError(404, 10013, "Unknown User")
        if member.id == self.app_id:
            raise ApiError(400, 50007, "Cannot send messages to this user")
        return 200, self._dm_channel(member)

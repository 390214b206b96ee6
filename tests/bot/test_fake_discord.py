"""The fake Discord (testing/discord/) against the real, unmodified discord.py.

A tiny bot defined here logs in, syncs an ``/oracle`` group to the guild and runs
``/oracle echo`` end to end: defer, progress edits, followup, a thread on its
message, a user's message in that thread, autocomplete, a RECONNECT in the
middle of the command, a rate-limited followup, a late acknowledgement, and a
clean shutdown. Then the rest of the world the fake models: categories, voice
and forum channels, forum posts and member threads reaching the client's cache,
permission overwrites (the fake and discord.py's cache agreeing; 50013 refusals),
DMs (50007 once closed), reactions, component checks (50035), a persistent
button clicked after a restart, a message context menu, and interaction tokens
expiring on the simulated clock (50027).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings
from typing import ClassVar

import aiohttp
import discord
import pytest
import pytest_asyncio
from discord import app_commands

from testing.discord import EPHEMERAL, LOADING, FakeDiscord

WORDS = ["dragon", "drowned bell", "dunstan vale", "mirela"]


class EchoBot(discord.Client):
    """A minimal Oracle-shaped bot: one guild command group, ``/oracle echo`` and ``/oracle slow``."""

    def __init__(self, guild_id: int, *, message_content: bool = True) -> None:
        intents = discord.Intents.default()
        intents.message_content = message_content
        super().__init__(intents=intents, guild_ready_timeout=0.05)
        self.tree = app_commands.CommandTree(self)
        self.guild_obj = discord.Object(guild_id)
        self.gate: asyncio.Event | None = None  # when set by a test, echo pauses after its first edit
        self.slow_delay = 0.0
        self.seen: list[discord.Message] = []
        self.threads_opened: list[discord.Thread] = []
        self.thread_events: list[discord.Thread] = []
        self.completed: list[tuple[int, int]] = []
        self.errors: list[app_commands.AppCommandError] = []
        self.resumes = 0

        oracle = app_commands.Group(name="oracle", description="Ask the Oracle about the campaign")

        @oracle.command(name="echo", description="Echo text back, with progress")
        @app_commands.describe(text="What to echo", private="Only you see the answer")
        async def echo(interaction: discord.Interaction, text: str, private: bool = False) -> None:
            await interaction.response.defer(thinking=True, ephemeral=private)
            await interaction.edit_original_response(content="Consulting the notes… 50%")
            if self.gate is not None:
                await self.gate.wait()
            original = await interaction.edit_original_response(content="Consulting the notes… 100%")
            followup = await interaction.followup.send(
                f"Echo: {text} <@{interaction.user.id}>", wait=True, allowed_mentions=discord.AllowedMentions.none()
            )
            if not private:
                thread = await original.create_thread(name=f"echo {text}")
                self.threads_opened.append(thread)
                await thread.send("Ask follow-ups here.")
            self.completed.append((interaction.id, followup.id))

        @echo.autocomplete("text")
        async def echo_text(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
            return [app_commands.Choice(name=w.title(), value=w) for w in WORDS if current.lower() in w][:25]

        @oracle.command(name="slow", description="Answers after a delay")
        async def slow(interaction: discord.Interaction) -> None:
            await asyncio.sleep(self.slow_delay)
            await interaction.response.send_message("finally")

        self.tree.add_command(oracle, guild=self.guild_obj)

        @self.tree.error
        async def on_tree_error(interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
            self.errors.append(error)

    async def setup_hook(self) -> None:
        await self.tree.sync(guild=self.guild_obj)

    async def on_message(self, message: discord.Message) -> None:
        if self.user is not None and message.author.id == self.user.id:
            return
        self.seen.append(message)

    async def on_thread_create(self, thread: discord.Thread) -> None:
        self.thread_events.append(thread)

    async def on_resumed(self) -> None:
        self.resumes += 1


@pytest_asyncio.fixture
async def fake():
    async with FakeDiscord() as fake:
        yield fake
        assert fake.errors == []


@pytest_asyncio.fixture
async def bot(fake):
    client = EchoBot(fake.guild_id)
    async with fake.run_client(client):
        yield client


async def run_echo(fake: FakeDiscord, bot: EchoBot, text: str = "hello"):
    inter = await fake.interaction("oracle echo", {"text": text}, member=fake.player)
    await fake.wait_until(lambda: bot.completed, timeout=5, what="echo to complete")
    return inter


async def test_login_ready_identify_and_guild_sync(fake, bot):
    assert discord.http.Route.BASE == f"{fake.url}/api/v10"

    me = fake.requests_for("GET", "/users/@me")
    assert len(me) == 1 and me[0].status == 200
    assert me[0].headers["Authorization"] == "Bot fake-token"
    assert [r.status for r in fake.requests_for("GET", "/oauth2/applications/@me")] == [200]

    puts = fake.requests_for("PUT", "/applications/{application_id}/guilds/{guild_id}/commands")
    assert [(r.path, r.status) for r in puts] == [
        (f"/applications/{fake.app_id}/guilds/{fake.guild_id}/commands", 200)
    ]
    assert [c["name"] for c in puts[0].json] == ["oracle"]
    assert [o["name"] for o in puts[0].json[0]["options"]] == ["echo", "slow"]
    registered = fake.commands(fake.guild_id)
    assert registered[0]["guild_id"] == str(fake.guild_id)
    assert puts[0].response[0]["id"] == registered[0]["id"]
    assert fake.requests_for("PUT", "/applications/{application_id}/commands") == []

    assert fake.intents == bot.intents.value
    assert fake.intents & (1 << 15)  # MESSAGE_CONTENT was requested
    assert fake.identify["token"] == "fake-token"
    [conn] = fake.gateway_connections
    assert conn.kind == "identify" and conn.compress == "zlib-stream"
    assert [p["t"] for p in conn.sent if p["op"] == 0][:2] == ["READY", "GUILD_CREATE"]
    await fake.wait_until(lambda: conn.heartbeats >= 1 and bot.latency != float("inf"), 3, "a heartbeat ACK")

    assert bot.user.id == fake.app_id and bot.application_id == fake.app_id
    guild = bot.get_guild(fake.guild_id)
    assert guild.name == "The Ember Road" and guild.owner_id == fake.owner.id
    assert sorted(r.name for r in guild.roles) == ["@everyone", "GM", "Oracle", "Player"]
    channel = bot.get_channel(fake.channel_id)
    assert isinstance(channel, discord.TextChannel) and channel.name == "campaign"
    assert guild.me.id == fake.app_id

    async with aiohttp.ClientSession() as http:
        async with http.get(f"{fake.api_url}/users/@me", headers={"Authorization": "Bot fake-token"}) as resp:
            assert resp.headers["Content-Type"] == "application/json"
            assert (await resp.json())["id"] == str(fake.app_id)


async def test_slash_command_end_to_end_with_thread_and_follow_up_message(fake, bot):
    inter = await run_echo(fake, bot)

    assert inter.payload["data"]["guild_id"] == str(fake.guild_id)
    assert inter.payload["member"]["roles"] == [str(fake.player_role_id)]
    assert [(e.kind, e.status) for e in inter.events] == [
        ("callback", 204), ("edit_original", 200), ("edit_original", 200), ("followup", 200)
    ]
    assert (5, []) == (inter.response.type, inter.rejected)  # accepted within the deadline
    assert inter.response.data is None
    assert [e.body["content"] for e in inter.edits] == ["Consulting the notes… 50%", "Consulting the notes… 100%"]
    assert inter.original.content == "Consulting the notes… 100%"
    assert inter.original.flags == 0 and not inter.original.loading

    [followup] = inter.followups
    assert followup.content == f"Echo: hello <@{fake.player.id}>"
    assert followup.allowed_mentions == {"parse": []}
    assert followup.mention_ids == []
    assert followup.author_id == fake.app_id
    assert bot.completed == [(inter.id, followup.id)]

    [thread] = fake.threads
    assert thread["id"] == str(inter.original.id)
    assert (thread["type"], thread["parent_id"], thread["name"]) == (11, str(fake.channel_id), "echo hello")
    [created] = fake.dispatched("THREAD_CREATE")
    assert created["d"]["id"] == thread["id"] and created["d"]["newly_created"] is True
    thread_id = int(thread["id"])
    cached = bot.get_channel(thread_id)
    assert isinstance(cached, discord.Thread) and cached.parent_id == fake.channel_id
    assert [t.id for t in bot.thread_events] == [thread_id]
    assert [m.content for m in fake.messages(thread_id)] == ["Ask follow-ups here."]
    assert [m.content for m in fake.messages(fake.channel_id)] == [
        "Consulting the notes… 100%", f"Echo: hello <@{fake.player.id}>"
    ]

    sent = await fake.message(thread_id, fake.player, "What about the drowned bell?")
    await fake.wait_until(lambda: bot.seen, 3, "on_message")
    [seen] = bot.seen
    assert (seen.id, seen.content, seen.author.id) == (sent.id, "What about the drowned bell?", fake.player.id)
    assert seen.channel.id == thread_id and isinstance(seen.channel, discord.Thread)


async def test_private_echo_is_ephemeral_and_opens_no_thread(fake, bot):
    inter = await fake.interaction("oracle echo", {"text": "psst", "private": True}, member=fake.gm)
    await fake.wait_until(lambda: bot.completed, 5, "echo to complete")
    assert inter.response.type == 5 and inter.response.data == {"flags": EPHEMERAL}
    assert inter.original.flags == EPHEMERAL  # loading flag cleared by the first edit
    assert inter.followups[0].flags == 0  # later followups have their own ephemerality
    assert fake.threads == []
    assert [m.id for m in fake.messages(fake.channel_id) if not m.ephemeral] == [inter.followups[0].id]


async def test_first_followup_after_defer_replaces_the_loading_message(fake, bot):
    @bot.tree.command(name="quick", description="defer then followup", guild=bot.guild_obj)
    async def quick(interaction: discord.Interaction) -> None:
        await interaction.response.defer(thinking=True)
        await interaction.followup.send("done")

    await bot.tree.sync(guild=bot.guild_obj)
    inter = await fake.interaction("quick", member=fake.gm)
    [msg] = await inter.wait_followups(1)
    assert msg is inter.original and inter.events[-1].replaced_original
    assert (msg.content, msg.flags & LOADING) == ("done", 0)


async def test_autocomplete_returns_the_bots_choices(fake, bot):
    choices = await fake.autocomplete("oracle echo", {"text": "dr"}, member=fake.gm)
    assert choices == [{"name": "Dragon", "value": "dragon"}, {"name": "Drowned Bell", "value": "drowned bell"}]
    inter = fake.interactions[-1]
    assert (4, 8, []) == (inter.type, inter.response.type, inter.rejected)
    assert inter.payload["data"]["options"] == [
        {"type": 1, "name": "echo", "options": [{"name": "text", "type": 3, "value": "dr", "focused": True}]}
    ]


async def test_forced_reconnect_mid_command_resumes_and_completes(fake, bot):
    bot.gate = asyncio.Event()
    inter = await fake.interaction("oracle echo", {"text": "again"}, member=fake.player)
    await inter.wait_edits(1)

    session = fake.session
    await fake.reconnect(wait=False)
    said = await fake.message(fake.channel_id, fake.gm, "said during the reconnect")  # buffered or live
    await fake.wait_until(lambda: session.resumes == 1, 5, "RESUME")
    await fake.wait_until(lambda: bot.resumes == 1, 3, "on_resumed")

    first, second = fake.gateway_connections
    assert first.closed and first.close_code == 4000
    assert (second.kind, second.path, second.session) == ("resume", "/resume", session)
    assert len(fake.sessions) == 1
    await fake.wait_until(lambda: bot.seen, 3, "the message sent during the reconnect")

    bot.gate.set()
    await fake.wait_until(lambda: bot.completed, 5, "echo to complete")
    assert inter.followups[0].content == f"Echo: again <@{fake.player.id}>"
    thread_id = int(fake.threads[0]["id"])
    await fake.wait_until(lambda: isinstance(bot.get_channel(thread_id), discord.Thread), 3, "THREAD_CREATE")
    await asyncio.sleep(0.1)
    assert [(m.id, m.content) for m in bot.seen] == [(said.id, "said during the reconnect")]


async def test_rate_limited_followup_is_retried(fake, bot):
    rule = fake.rate_limit("POST", "/webhooks/{application_id}/{token}", times=1, retry_after=0.2)
    inter = await run_echo(fake, bot, "patience")

    posts = fake.requests_for("POST", "/webhooks/{application_id}/{token}")
    assert [r.status for r in posts] == [429, 200]
    assert posts[0].response == {"message": "You are being rate limited.", "retry_after": 0.2, "global": False}
    assert posts[1].at - posts[0].at >= 0.2
    assert rule.hits == [posts[0]] and rule.remaining == 0
    assert [m.content for m in inter.followups] == [f"Echo: patience <@{fake.player.id}>"]
    assert [e.kind for e in inter.events].count("followup") == 1


async def test_rate_limited_channel_message_is_retried(fake, bot):
    fake.rate_limit("POST", "/channels/{channel_id}/messages", times=2, retry_after=0.1)
    sent = await bot.get_channel(fake.channel_id).send("hello table")
    posts = fake.requests_for("POST", f"/channels/{fake.channel_id}/messages")
    assert [r.status for r in posts] == [429, 429, 200]
    assert fake.get_message(sent.id).content == "hello table"


async def test_a_channel_takes_its_budget_of_messages_and_discord_py_waits_for_the_next_window(fake, bot):
    """Sends and edits share one bucket per channel; its headers tell discord.py to wait, so the
    third message comes after the window, and no request was refused."""
    fake.channel_message_budget = (2, 1.0)
    channel = bot.get_channel(fake.channel_id)
    sent = [await channel.send(f"line {n}") for n in range(2)]
    await sent[0].edit(content="line 0, edited")
    calls = [r for r in fake.requests if r.route in ("/channels/{channel_id}/messages",
                                                     "/channels/{channel_id}/messages/{message_id}")]
    assert [(r.method, r.status) for r in calls] == [("POST", 200), ("POST", 200), ("PATCH", 200)]
    assert calls[2].at - calls[0].at >= 0.9
    assert fake.get_message(sent[0].id).content == "line 0, edited"


async def test_a_request_past_the_channels_budget_is_refused_with_the_wait(fake):
    fake.channel_message_budget = (1, 5.0)
    url = f"{fake.api_url}/channels/{fake.channel_id}/messages"
    async with aiohttp.ClientSession(headers={"Authorization": f"Bot {fake.token}"}) as http:
        async with http.post(url, json={"content": "one"}) as first:
            assert (200, "0") == (first.status, first.headers["X-RateLimit-Remaining"])
        async with http.post(url, json={"content": "two"}) as second:
            body = await second.json()
            assert 429 == second.status and second.headers["X-RateLimit-Bucket"] == first.headers["X-RateLimit-Bucket"]
    assert 4 < body["retry_after"] <= 5 and body["global"] is False
    assert ["one"] == [m.content for m in fake.messages(fake.channel_id)]


async def test_late_acknowledgement_is_unknown_interaction(fake, bot):
    fake.ack_deadline = 0.3
    bot.slow_delay = 0.5
    inter = await fake.interaction("oracle slow", member=fake.gm)
    await fake.wait_until(lambda: bot.errors, 5, "the command error")
    [callback] = inter.callbacks
    assert (callback.status, callback.error) == (404, {"message": "Unknown interaction", "code": 10062})
    assert not inter.acknowledged
    [error] = bot.errors
    assert isinstance(error.original, discord.NotFound) and error.original.code == 10062


async def test_interaction_helper_checks_options_like_the_discord_client(fake, bot):
    with pytest.raises(ValueError, match="missing required"):
        await fake.interaction("oracle echo", {"private": True})
    with pytest.raises(ValueError, match="unknown option"):
        await fake.interaction("oracle echo", {"text": "x", "loud": True})
    with pytest.raises(ValueError, match="not registered"):
        await fake.interaction("nope")


async def test_unknown_route_is_404_and_recorded(fake, bot):
    route = discord.http.Route("GET", "/guilds/{guild_id}/audit-logs", guild_id=fake.guild_id)
    with pytest.raises(discord.NotFound) as info:
        await bot.http.request(route)
    assert (info.value.code, info.value.text) == (0, "404: Not Found")
    [unknown] = [r for r in fake.requests if r.route is None]
    assert (unknown.method, unknown.path, unknown.status) == ("GET", f"/guilds/{fake.guild_id}/audit-logs", 404)


async def test_without_message_content_intent_content_is_blank_unless_mentioned(fake):
    client = EchoBot(fake.guild_id, message_content=False)
    async with fake.run_client(client):
        assert not fake.intents & (1 << 15)
        await fake.message(fake.channel_id, fake.player, "secret plan")
        await fake.message(fake.channel_id, fake.player, f"{fake.bot.mention} hi")
        await fake.wait_until(lambda: len(client.seen) == 2, 3, "two messages")
    assert [m.content for m in client.seen] == ["", f"<@{fake.app_id}> hi"]


async def test_clean_shutdown_leaves_no_unclosed_sessions(fake, caplog):
    caplog.set_level(logging.WARNING)
    with warnings.catch_warnings():  # collect what earlier tests left behind: only this client counts
        warnings.simplefilter("ignore")
        gc.collect()
    client = EchoBot(fake.guild_id)
    task = asyncio.create_task(client.start("fake-token"))
    await fake.wait_until(lambda: client.is_ready() or task.done(), 10, "ready")
    assert client.is_ready()
    await client.close()
    assert await asyncio.wait_for(task, 5) is None
    assert client.is_closed()
    await fake.wait_until(lambda: all(c.closed for c in fake.gateway_connections), 3, "gateway closed")
    # The client closes the socket itself. discord.py 2.7.1 asks for 1000, but with its poll task
    # blocked in receive() aiohttp lets that task's close(code=4000) reach the wire first.
    assert fake.gateway_connections[0].close_code in (1000, 4000)
    client = task = None  # the last references: the collection below finds what they left
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
        await asyncio.sleep(0)
    assert [str(w.message) for w in caught if "nclosed" in str(w.message)] == []
    assert [r.getMessage() for r in caplog.records if "nclosed" in r.getMessage()] == []


# ----- channel kinds, threads and forum posts -----------------------------------------------


async def test_channels_added_while_connected_reach_the_cache_with_channel_create(fake, bot):
    category = await fake.add_category("Campaign")
    text = await fake.add_text_channel("lore", topic="Old tales", parent_id=category)
    voice = await fake.add_voice_channel("table", parent_id=category)
    forum = await fake.add_forum_channel("questions", parent_id=category)
    assert [d["d"]["type"] for d in fake.dispatched("CHANNEL_CREATE")] == [4, 0, 2, 15]
    await fake.wait_until(lambda: bot.get_channel(forum), 3, "the forum in the cache")
    cat = bot.get_channel(category)
    assert isinstance(cat, discord.CategoryChannel)
    assert isinstance(bot.get_channel(text), discord.TextChannel) and bot.get_channel(text).category == cat
    assert isinstance(bot.get_channel(voice), discord.VoiceChannel) and bot.get_channel(voice).category == cat
    assert isinstance(bot.get_channel(forum), discord.ForumChannel)
    assert sorted(c.id for c in cat.channels) == sorted([text, voice, forum])
    with pytest.raises(ValueError):
        fake.add_text_channel("nowhere", parent_id=text)


async def test_forum_post_and_member_thread_reach_the_cache(fake, bot):
    forum = await fake.add_forum_channel("questions")
    post = await fake.add_forum_post(forum, fake.player, "Where is the bell?", "It rang at dawn.")
    thread = await fake.add_thread(fake.channel_id, "side talk", owner=fake.gm)
    assert [p["t"] for p in fake.dispatched() if p["t"] in ("THREAD_CREATE", "MESSAGE_CREATE")] == [
        "THREAD_CREATE", "MESSAGE_CREATE", "THREAD_CREATE"]
    await fake.wait_until(lambda: bot.get_channel(thread) and bot.seen, 3, "both threads and the starter")
    cached = bot.get_channel(post)
    assert isinstance(cached, discord.Thread) and cached.parent_id == forum and cached.owner_id == fake.player.id
    assert isinstance(cached.parent, discord.ForumChannel)
    [starter] = bot.seen
    assert (starter.id, starter.channel.id, starter.content) == (post, post, "It rang at dawn.")
    assert fake.get_message(post).channel_id == post
    side = bot.get_channel(thread)
    assert (side.parent_id, side.owner_id, side.name) == (fake.channel_id, fake.gm.id, "side talk")
    assert [t.id for t in bot.thread_events] == [post, thread]
    assert await cached.send("The bell is in the lake.")  # the bot answers in the post


async def test_forum_post_made_before_connecting_comes_with_guild_create(fake):
    forum = fake.add_forum_channel("questions")
    post = fake.add_forum_post(forum, fake.gm, "Session zero", "Read this first.")
    client = EchoBot(fake.guild_id)
    async with fake.run_client(client):
        assert isinstance(client.get_channel(post), discord.Thread)
        assert client.get_channel(post).parent_id == forum
    assert fake.dispatched("THREAD_CREATE") == []


async def test_threads_cannot_open_in_threads_forum_posts_or_voice_chats(fake, bot):
    forum = await fake.add_forum_channel("questions")
    voice = await fake.add_voice_channel("table")
    post = await fake.add_forum_post(forum, fake.player, "Question", "What now?")
    thread = await fake.add_thread(fake.channel_id, "side talk")
    await fake.wait_until(lambda: bot.get_channel(post) and bot.get_channel(thread), 3, "threads cached")
    in_thread = await bot.get_channel(thread).send("in a thread")
    in_voice = await bot.get_channel(voice).send("in the voice chat")  # text-in-voice works
    said = await fake.message(voice, fake.player, "hello from voice")
    assert fake.messages(voice) == [fake.get_message(in_voice.id), said]
    in_post = bot.get_channel(post).get_partial_message(post)
    for message in (in_thread, in_voice, in_post):
        with pytest.raises(discord.HTTPException) as info:
            await message.create_thread(name="nested")
        assert (info.value.status, info.value.code, info.value.text) == (
            400, 50024, "Cannot execute action on this channel type")
    with pytest.raises(discord.HTTPException) as info:
        await bot.http.send_message(forum, params=discord.http.handle_message_parameters(content="hi"))
    assert (info.value.status, info.value.code, info.value.text) == (
        400, 50008, "Cannot send messages in a non-text channel")
    with pytest.raises(ValueError):
        await fake.message(forum, fake.player, "straight into the forum")


async def test_a_thread_archives_after_one_of_discords_four_durations(fake, bot):
    channel = bot.get_channel(fake.channel_id)
    default = await (await channel.send("one")).create_thread(name="the channel's default")
    week = await (await channel.send("two")).create_thread(name="a week", auto_archive_duration=10080)
    assert (default.auto_archive_duration, week.auto_archive_duration) == (1440, 10080)
    with pytest.raises(discord.HTTPException) as info:
        await bot.http.start_thread_with_message(fake.channel_id, (await channel.send("three")).id,
                                                 name="two hours", auto_archive_duration=120)
    assert (info.value.status, info.value.code) == (400, 50035)
    assert "auto_archive_duration" in info.value.text


async def test_idle_threads_archive_on_the_clock_and_a_members_message_unarchives_one(fake, bot):
    channel = bot.get_channel(fake.channel_id)
    day = await (await channel.send("one")).create_thread(name="a day")
    week = await (await channel.send("two")).create_thread(name="a week", auto_archive_duration=10080)
    kept = await day.send("said in the day's thread")
    assert [day.id] == await fake.pass_time(24 * 3600)
    await fake.wait_until(lambda: bot.get_channel(day.id) is None, 3, "discord.py dropping the archived thread")
    assert bot.get_channel(week.id) is not None and not fake.archived(week.id)
    for refused in (kept.edit(content="edited"), kept.add_reaction("👍")):  # only an active thread allows them
        with pytest.raises(discord.HTTPException) as info:
            await refused
        assert (info.value.status, info.value.code) == (400, 50083)

    said = await fake.message(day.id, fake.player, "still there?")
    assert not fake.archived(day.id)
    events = [p["t"] for p in fake.dispatched() if p["t"] in ("MESSAGE_CREATE", "THREAD_UPDATE")][-2:]
    assert events == ["MESSAGE_CREATE", "THREAD_UPDATE"]  # the message first: the thread is not held yet
    await fake.wait_until(lambda: bot.get_channel(day.id) is not None, 3, "the unarchived thread cached again")
    seen = next(m for m in bot.seen if m.id == said.id)
    assert isinstance(seen.channel, discord.PartialMessageable)
    assert await kept.edit(content="edited")
    assert [] == await fake.pass_time(23 * 3600)  # less than a day since the member's message
    assert [day.id] == await fake.pass_time(3600)
    assert [week.id] == await fake.pass_time(5 * 24 * 3600)  # a week since it was opened


async def test_a_locked_archived_thread_refuses_a_post(fake, bot):
    channel = bot.get_channel(fake.channel_id)
    thread = await (await channel.send("one")).create_thread(name="locked")
    fake.channels[thread.id]["thread_metadata"]["locked"] = True
    await fake.pass_time(24 * 3600)
    with pytest.raises(discord.HTTPException) as info:
        await bot.http.send_message(thread.id, params=discord.http.handle_message_parameters(content="hi"))
    assert (info.value.status, info.value.code) == (400, 50083)
    with pytest.raises(ValueError):
        await fake.message(thread.id, fake.player, "let me in")


# ----- permission overwrites ----------------------------------------------------------------

P = discord.Permissions


async def test_overwrites_change_permissions_in_the_fake_and_in_the_clients_cache(fake, bot):
    channel = bot.get_channel(fake.channel_id)
    assert channel.permissions_for(channel.guild.me).create_public_threads
    assert fake.permissions_in(fake.bot, fake.channel_id) == fake.permissions_for(fake.bot)

    authors = {}  # discord.py's own Member objects, from messages (it fetches no member)
    for member in (fake.gm, fake.player, fake.owner):
        said = asyncio.ensure_future(bot.wait_for("message", check=lambda m, who=member: m.author.id == who.id))
        await fake.message(fake.channel_id, member, "here")
        authors[member.id] = (await asyncio.wait_for(said, 3)).author
    authors[fake.bot.id] = channel.guild.me
    await fake.set_overwrite(fake.channel_id, fake.bot_role_id, deny=P(create_public_threads=True).value)
    await fake.set_overwrite(fake.channel_id, fake.guild_id, deny=P(send_messages=True).value)
    await fake.set_overwrite(fake.channel_id, fake.gm, allow=P(send_messages=True).value)
    stored = fake.channels[fake.channel_id]["permission_overwrites"]
    assert {(o["id"], o["type"]) for o in stored} == {
        (str(fake.bot_role_id), 0), (str(fake.guild_id), 0), (str(fake.gm.id), 1)}
    await fake.wait_until(lambda: len(channel.overwrites) == 3, 3, "CHANNEL_UPDATE in the cache")

    for member in (fake.bot, fake.gm, fake.player, fake.owner):
        cached = channel.permissions_for(authors[member.id])
        # discord.py leaves voice permissions out of a text channel's; Discord's algorithm does not
        assert cached.value == fake.permissions_in(member, fake.channel_id) & ~P.voice().value, member.username
    assert not channel.permissions_for(channel.guild.me).create_public_threads
    assert not P(fake.permissions_in(fake.player, fake.channel_id)).send_messages
    assert P(fake.permissions_in(fake.gm, fake.channel_id)).send_messages  # member overwrite wins
    assert fake.permissions_in(fake.owner, fake.channel_id) == P.all().value

    thread = await fake.add_thread(fake.channel_id, "side talk")  # a thread follows its parent
    assert fake.permissions_in(fake.player, thread) == fake.permissions_in(fake.player, fake.channel_id)

    await fake.set_overwrite(fake.channel_id, fake.guild_id)  # allow = deny = 0 removes it
    assert len(fake.channels[fake.channel_id]["permission_overwrites"]) == 2


async def test_missing_permissions_are_refused_with_50013(fake, bot):
    channel = bot.get_channel(fake.channel_id)
    message = await channel.send("the bot may still post here")
    await fake.set_overwrite(fake.channel_id, fake.bot_role_id,
                             deny=P(create_public_threads=True, add_reactions=True).value)
    with pytest.raises(discord.Forbidden) as info:
        await message.create_thread(name="not allowed")
    assert (info.value.status, info.value.code, info.value.text) == (403, 50013, "Missing Permissions")
    with pytest.raises(discord.Forbidden) as info:
        await message.add_reaction("🔔")
    assert info.value.code == 50013
    await message.edit(content="editing its own message needs nothing more")
    spoken = await channel.send("heard?", tts=True)  # the bot has no Send TTS Messages
    assert fake.get_message(spoken.id).data["tts"] is False
    await fake.set_overwrite(fake.channel_id, fake.guild_id, deny=P(read_message_history=True).value)
    with pytest.raises(discord.Forbidden) as info:
        await message.reply("a reply needs Read Message History")
    assert info.value.code == 50013

    await fake.set_overwrite(fake.channel_id, fake.bot, deny=P(send_messages=True).value)
    with pytest.raises(discord.Forbidden) as info:
        await channel.send("silenced")
    assert info.value.code == 50013
    secret = await fake.add_text_channel("gm-screen")
    await fake.set_overwrite(secret, fake.guild_id, deny=P(view_channel=True).value)
    await fake.wait_until(lambda: bot.get_channel(secret), 3, "the new channel")
    with pytest.raises(discord.Forbidden):
        await bot.get_channel(secret).send("cannot see it")
    assert fake.permissions_in(fake.player, secret) == 0


async def test_interaction_carries_the_permissions_in_its_channel(fake, bot):
    await fake.set_overwrite(fake.channel_id, fake.bot_role_id, deny=P(embed_links=True).value)
    await fake.set_overwrite(fake.channel_id, fake.player, deny=P(attach_files=True).value)
    inter = await fake.interaction("oracle slow", member=fake.player)
    await inter.wait_acknowledged()
    assert int(inter.payload["app_permissions"]) == fake.permissions_in(fake.bot, fake.channel_id)
    assert not P(int(inter.payload["app_permissions"])).embed_links
    assert not P(int(inter.payload["channel"]["permissions"])).attach_files
    assert inter.payload["member"]["permissions"] == inter.payload["channel"]["permissions"]


# ----- DMs and reactions --------------------------------------------------------------------


async def test_dms_are_stored_editable_and_refused_once_closed(fake, bot):
    said = asyncio.ensure_future(bot.wait_for("message", check=lambda m: m.author.id == fake.player.id))
    await fake.message(fake.channel_id, fake.player, "hello")
    user = (await asyncio.wait_for(said, 3)).author  # a Member, as an interaction's user is
    sent = await user.send("A private word.")
    again = await user.send("And another.")
    [opened] = fake.requests_for("POST", "/users/@me/channels")  # discord.py caches the DM channel
    assert opened.json == {"recipient_id": fake.player.id}
    assert opened.response["type"] == 1 and opened.response["recipients"][0]["id"] == str(fake.player.id)
    assert (await bot.http.start_private_message(fake.player.id))["id"] == opened.response["id"]  # stable
    assert sent.channel.id == again.channel.id == int(opened.response["id"])
    await sent.edit(content="A private word, amended.")
    assert [m.content for m in fake.dm_messages(fake.player)] == ["A private word, amended.", "And another."]
    assert fake.dm_messages(fake.gm) == []
    assert fake.channels.get(sent.channel.id) is None  # not a guild channel
    with pytest.raises(discord.HTTPException) as info:  # discord.py itself refuses sent.create_thread
        await bot.http.request(discord.http.Route("POST", "/channels/{channel_id}/messages/{message_id}/threads",
                                                  channel_id=sent.channel.id, message_id=sent.id),
                               json={"name": "no threads in DMs"})
    assert (info.value.status, info.value.code) == (400, 50003)

    fake.close_dms(fake.player)
    with pytest.raises(discord.Forbidden) as info:
        await user.send("Are you there?")
    assert (info.value.status, info.value.code, info.value.text) == (
        403, 50007, "Cannot send messages to this user")
    assert len(fake.dm_messages(fake.player)) == 2


async def test_reactions_are_added_and_removed(fake, bot):
    channel = bot.get_channel(fake.channel_id)
    message = await channel.send("react to me")
    await message.add_reaction("🔔")
    await message.add_reaction("🔔")
    await message.add_reaction("✅")
    assert fake.get_message(message.id).reactions == ["🔔", "✅"]
    await message.remove_reaction("🔔", bot.user)
    assert fake.get_message(message.id).reactions == ["✅"]
    assert fake.requests_for("DELETE")[-1].status == 204
    with pytest.raises(discord.NotFound) as info:
        await channel.get_partial_message(1234).add_reaction("✅")
    assert info.value.code == 10008
    with pytest.raises(discord.NotFound) as info:
        await channel.get_partial_message(1234).remove_reaction("✅", bot.user)
    assert info.value.code == 10008


# ----- components, clicks, context menus and simulated time --------------------------------


async def test_invalid_components_are_refused_with_the_error_tree(fake, bot):
    route = discord.http.Route("POST", "/channels/{channel_id}/messages", channel_id=fake.channel_id)

    def button(custom_id: str | None = "b", **extra) -> dict:
        data = {"type": 2, "style": 1, "label": "Ring", **extra}
        if custom_id is not None:
            data["custom_id"] = custom_id
        return data

    def row(*children: dict) -> dict:
        return {"type": 1, "components": list(children)}

    bad = {
        "six rows": ([row(button(f"b{i}")) for i in range(6)],
                     {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 5 or fewer in length."}]}),
        "six buttons": ([row(*[button(f"b{i}") for i in range(6)])],
                        {"0": {"components": {"_errors": [{"code": "BASE_TYPE_BAD_LENGTH",
                                                           "message": "Must be between 1 and 5 in length."}]}}}),
        "bare button": ([button()], {"0": {"type": {"_errors": [{"code": "UNION_TYPE_CHOICES",
                                                                   "message": 'Value of field "type" must be one of (1,).'}]}}}),
        "no custom_id": ([row(button(None))], {"0": {"components": {"0": {"custom_id": {
            "_errors": [{"code": "BASE_TYPE_REQUIRED", "message": "This field is required"}]}}}}}),
        "duplicate": ([row(button("same"), button("same"))], {"0": {"components": {"1": {"custom_id": {
            "_errors": [{"code": "COMPONENT_CUSTOM_ID_DUPLICATED",
                         "message": "Component custom id was already specified"}]}}}}}),
        "long custom_id": ([row(button("x" * 101))], None),
        "bad style": ([row(button(style=9))], None),
        "link with custom_id": ([row(button("b", style=5, url="https://example.com"))], None),
        "link without url": ([row(button(None, style=5))], None),
        "no label": ([row({"type": 2, "style": 1, "custom_id": "b"})], None),
        "long label": ([row(button(label="x" * 81))], None),
        "select and button": ([row({"type": 3, "custom_id": "s", "options": [{"label": "a", "value": "a"}]},
                                   button())], None),
        "premium button": ([row(button(None, style=6, sku_id="1"))], None),  # the Oracle sells nothing
    }
    for what, (components, tree) in bad.items():
        with pytest.raises(discord.HTTPException) as info:
            await bot.http.request(route, json={"content": "x", "components": components})
        assert (info.value.status, info.value.code) == (400, 50035), what
        response = fake.requests[-1].response
        assert response["message"] == "Invalid Form Body" and "components" in response["errors"], what
        if tree is not None:
            assert response["errors"]["components"] == tree, what

    ok = [row(button("a"), button("b", style=4)), row({"type": 2, "style": 2, "custom_id": "e", "emoji": {"name": "🔔"}})]
    sent = await bot.http.request(route, json={"content": "fine", "components": ok})
    with pytest.raises(discord.HTTPException) as info:  # edits are checked the same way
        await bot.http.request(discord.http.Route("PATCH", "/channels/{channel_id}/messages/{message_id}",
                                                  channel_id=fake.channel_id, message_id=sent["id"]),
                               json={"components": [row(button("dup"), button("dup"))]})
    assert info.value.code == 50035


class BellButton(discord.ui.DynamicItem[discord.ui.Button], template=r"bell:(?P<n>\d+)"):
    """A persistent button: its state lives in its custom id, so it works after a restart."""

    rung: ClassVar[list[tuple[int, int]]] = []

    def __init__(self, n: int) -> None:
        super().__init__(discord.ui.Button(label="Ring", style=discord.ButtonStyle.primary, custom_id=f"bell:{n}"))
        self.n = n

    @classmethod
    async def from_custom_id(cls, interaction: discord.Interaction, item: discord.ui.Button,
                             match) -> BellButton:
        return cls(int(match["n"]))

    async def callback(self, interaction: discord.Interaction) -> None:
        BellButton.rung.append((self.n, interaction.user.id))
        await interaction.response.send_message(f"rang {self.n}", ephemeral=True)


async def test_a_persistent_button_click_reaches_the_client_after_a_restart(fake):
    BellButton.rung = []
    first = EchoBot(fake.guild_id)
    async with fake.run_client(first):
        view = discord.ui.View(timeout=None)
        view.add_item(BellButton(7))
        sent = await first.get_channel(fake.channel_id).send("Ring the bell", view=view)
    message = fake.get_message(sent.id)
    assert message.components[0]["components"][0]["custom_id"] == "bell:7"

    second = EchoBot(fake.guild_id)
    second.add_dynamic_items(BellButton)
    async with fake.run_client(second):
        with pytest.raises(ValueError, match="no button"):
            await fake.click(message, "bell:8")
        inter = await fake.click(message, "bell:7", member=fake.gm)
        await inter.wait_acknowledged()
        assert (inter.type, inter.response.type, inter.payload["data"]["custom_id"]) == (3, 4, "bell:7")
        assert BellButton.rung == [(7, fake.gm.id)]
        assert inter.original.content == "rang 7" and inter.original.ephemeral


async def test_clicks_only_on_what_the_member_can_see(fake, bot):
    @bot.tree.command(name="bell", description="a private bell", guild=bot.guild_obj)
    async def bell(interaction: discord.Interaction) -> None:
        view = discord.ui.View(timeout=None)
        view.add_item(discord.ui.Button(label="Ring", custom_id="ring"))
        view.add_item(discord.ui.Button(label="Off", custom_id="off", disabled=True))
        await interaction.response.send_message("only you", view=view, ephemeral=True)

    await bot.tree.sync(guild=bot.guild_obj)
    inter = await fake.interaction("bell", member=fake.player)
    await inter.wait_acknowledged()
    private = inter.original
    with pytest.raises(ValueError, match="ephemeral"):
        await fake.click(private, "ring", member=fake.gm)
    with pytest.raises(ValueError, match="disabled"):
        await fake.click(private, "off", member=fake.player)
    with pytest.raises(ValueError, match="no button"):
        await fake.click(private, "bell", member=fake.player)
    click = await fake.click(private, "ring", member=fake.player)
    assert click.payload["message"]["id"] == str(private.id)


async def test_message_context_menu_reaches_the_clients_context_menu(fake, bot):
    seen: list[tuple[int, str, int]] = []

    @app_commands.context_menu(name="Ask the Oracle")
    async def ask_about(interaction: discord.Interaction, message: discord.Message) -> None:
        seen.append((message.id, message.content, interaction.channel_id))
        await interaction.response.send_message(f"About: {message.content}")

    bot.tree.add_command(ask_about, guild=bot.guild_obj)
    await bot.tree.sync(guild=bot.guild_obj)
    registered = next(c for c in fake.commands(fake.guild_id) if c["type"] == 3)
    thread = await fake.add_thread(fake.channel_id, "lore")
    said = await fake.message(thread, fake.gm, "The bell sank in 1203.")

    with pytest.raises(ValueError, match="context menu"):
        await fake.context_menu("Not registered", said)
    inter = await fake.context_menu("Ask the Oracle", said, member=fake.player)
    await inter.wait_acknowledged()
    assert inter.payload["data"] == {
        "id": registered["id"], "name": "Ask the Oracle", "type": 3, "target_id": str(said.id),
        "resolved": {"messages": {str(said.id): said.data}}, "guild_id": str(fake.guild_id)}
    assert inter.channel_id == thread
    assert seen == [(said.id, "The bell sank in 1203.", thread)]
    assert inter.original.content == "About: The bell sank in 1203."
    assert inter.original.data["interaction_metadata"]["target_message_id"] == str(said.id)


async def test_advance_expires_the_interaction_token(fake, bot):
    gate = asyncio.Event()
    failures: list[Exception] = []

    @bot.tree.command(name="later", description="answers much later", guild=bot.guild_obj)
    async def later(interaction: discord.Interaction) -> None:
        await interaction.response.defer(thinking=True)
        await gate.wait()
        try:
            await interaction.followup.send("too late")
        except discord.HTTPException as exc:
            failures.append(exc)

    await bot.tree.sync(guild=bot.guild_obj)
    inter = await fake.interaction("later", member=fake.gm)
    await inter.wait_acknowledged()
    fake.advance(fake.token_ttl + 1)
    gate.set()
    await fake.wait_until(lambda: failures, 3, "the followup to fail")
    [error] = failures
    assert type(error) is discord.HTTPException  # 401: discord.py has no subclass for it
    assert (error.status, error.code, error.text) == (401, 50027, "Invalid Webhook Token")

    slow = await fake.interaction("oracle slow", member=fake.gm)
    fake.advance(fake.ack_deadline)  # past the 3 s before the bot can answer
    await fake.wait_until(lambda: bot.errors, 3, "the late acknowledgement")
    assert slow.callbacks[0].status == 404 and not slow.acknowledged


async def test_members_run_commands_only_where_they_can(fake, bot):
    secret = await fake.add_text_channel("gm-screen")
    await fake.set_overwrite(secret, fake.guild_id, deny=P(view_channel=True).value)
    await fake.set_overwrite(secret, fake.gm_role_id, allow=P(view_channel=True).value)
    with pytest.raises(ValueError, match="cannot use application commands"):
        await fake.interaction("oracle slow", member=fake.player, channel_id=secret)
    inter = await fake.interaction("oracle slow", member=fake.gm, channel_id=secret)
    await inter.wait_acknowledged()
    category = await fake.add_category("Campaign")
    with pytest.raises(ValueError, match="category or forum"):
        await fake.interaction("oracle slow", member=fake.gm, channel_id=category)


async def test_nothing_reaches_the_client_from_a_channel_it_cannot_view(fake, bot):
    secret = await fake.add_text_channel("gm-screen")
    await fake.set_overwrite(secret, fake.bot, deny=P(view_channel=True).value)
    await fake.message(secret, fake.gm, "the twist is the bell")
    hidden = await fake.add_thread(secret, "more secrets", owner=fake.gm)
    await fake.message(fake.channel_id, fake.player, "hello")
    await fake.wait_until(lambda: bot.seen, 3, "the visible message")
    assert [m.content for m in bot.seen] == ["hello"]
    assert bot.get_channel(hidden) is None and fake.dispatched("THREAD_CREATE") == []


async def test_users_act_only_as_their_permissions_allow(fake, bot):
    forum = await fake.add_forum_channel("questions")
    await fake.set_overwrite(fake.channel_id, fake.player,
                             deny=P(send_messages=True, create_public_threads=True).value)
    await fake.set_overwrite(forum, fake.player, deny=P(send_messages=True).value)
    with pytest.raises(ValueError, match="may not post"):
        await fake.message(fake.channel_id, fake.player, "muted")
    with pytest.raises(ValueError, match="may not open a thread"):
        fake.add_thread(fake.channel_id, "side talk", owner=fake.player)
    with pytest.raises(ValueError, match="may not post"):
        fake.add_forum_post(forum, fake.player, "Question", "muted")
    await fake.message(fake.channel_id, fake.gm, "the GM still may")

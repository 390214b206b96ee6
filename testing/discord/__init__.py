"""A fake Discord for tests: a real gateway websocket and REST API on 127.0.0.1, against which the
unmodified discord.py client runs. What it serves, what it refuses and its sources: docs/fakes.md.

    async with FakeDiscord() as fake:                     # listens, patches discord.py
        async with fake.run_client(bot):                  # bot.start("fake-token"), waits for READY
            inter = await fake.interaction("oracle ask", {"question": "Who is Pip?"}, member=fake.player)
            await inter.wait_followups(1)
"""

from .constants import EPHEMERAL, LOADING
from .gateway import GatewayConnection, GatewaySession
from .interactions import FakeInteraction, InteractionEvent
from .models import FakeMember, FakeMessage, Pending, PendingId
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
    "RecordedRequest",
]

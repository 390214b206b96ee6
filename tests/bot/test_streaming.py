"""The bot's pacing of edits while the model writes: pure, with a clock and a sleep of the test's own."""
from __future__ import annotations

import asyncio

import discord
import pytest

from bot.formatting import MESSAGE_LIMIT
from bot.streaming import WRITING_MARK, LiveReply, Pacer, preview


class Clock:
    """Simulated time: a `sleep` ends at its own target, moving the clock there (never back), so the
    edits' turns come without waiting."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        target = self.now + seconds
        await asyncio.sleep(0)
        self.now = max(self.now, target)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_edits_come_in_the_channels_turn_with_the_latest_text_and_never_hold_up_the_words():
    clock, edits = Clock(), []

    async def edit(text: str) -> None:
        edits.append((clock.now, text))

    pacer = Pacer(1.5, clock)
    live = LiveReply(edit, pacer, channel=1, sleep=clock.sleep)
    for text in ["a", "a b", "a b c"]:  # three words at once: each update returns without waiting
        await live.update(text)
    await settle()
    assert edits == [(101.5, "a b c" + WRITING_MARK)]  # 1.5 s after the message was sent, the latest text
    await live.update("a b c d")
    await settle()
    assert edits[1:] == [(103.0, "a b c d" + WRITING_MARK)]
    await live.update("a b c d")  # the same text: nothing to send
    await settle()
    assert len(edits) == 2 and live.edits == 2

    live.touch()  # a progress line was written: the next text waits 1.5 s from it
    await live.update("a b c d e")
    await settle()
    assert edits[2:] == [(104.5, "a b c d e" + WRITING_MARK)]


@pytest.mark.asyncio
async def test_two_answers_in_one_channel_share_its_pace_and_another_channel_has_its_own():
    clock, turns = Clock(), []

    async def edit(text: str) -> None:
        pass

    pacer = Pacer(1.5, clock)
    reserve = pacer.reserve

    def spied(channel: int, earliest: float) -> float:
        turns.append((channel, reserve(channel, earliest)))
        return turns[-1][1]

    pacer.reserve = spied  # type: ignore[method-assign]
    lives = [LiveReply(edit, pacer, channel=c, sleep=clock.sleep) for c in (1, 1, 2)]
    for text in ["one", "one two", "one two three"]:
        for live in lives:
            await live.update(text)
        await settle()
    in_channel = sorted(t for c, t in turns if c == 1)
    assert len(in_channel) >= 4 and all(b - a >= 1.5 for a, b in zip(in_channel, in_channel[1:], strict=False))
    assert [t for c, t in turns if c == 2][0] == 101.5  # channel 2 waited for no one


@pytest.mark.asyncio
async def test_a_preview_past_one_message_is_sent_once_and_a_failed_edit_stops_nothing():
    clock, edits = Clock(), []

    async def edit(text: str) -> None:
        edits.append(text)
        if len(edits) == 2:
            raise discord.HTTPException(FakeResponse(), "rate limited")

    live = LiveReply(edit, Pacer(1.5, clock), channel=1, sleep=clock.sleep)
    long = "word " * 1000
    for n in range(5):  # the model goes on writing past 2,000 characters
        await live.update(long + "more " * n)
        await settle()
    assert len(edits) == 1 and edits[0] == preview(long)
    await live.update("short again")
    await settle()  # this edit fails: the stream goes on
    await live.update("short again, and more")
    await settle()
    assert edits[2:] == ["short again, and more" + WRITING_MARK]
    await live.close()


@pytest.mark.asyncio
async def test_closing_drops_the_waiting_preview_so_the_final_answer_is_never_overwritten():
    clock, edits = Clock(), []

    async def edit(text: str) -> None:
        edits.append(text)

    never = asyncio.Event()

    async def sleep_forever(seconds: float) -> None:
        await never.wait()

    live = LiveReply(edit, Pacer(1.5, clock), channel=1, sleep=sleep_forever)
    await live.update("a b c")
    await settle()
    await live.close()
    never.set()
    await settle()
    assert edits == []


class FakeResponse:
    status = 429
    reason = "Too Many Requests"


def test_a_preview_past_one_message_shows_its_head_within_the_limit():
    text = "word " * 1000
    shown = preview(text)
    assert len(shown) <= MESSAGE_LIMIT
    assert shown.endswith(" …" + WRITING_MARK)
    assert text.startswith(shown[: -len(" …" + WRITING_MARK)])
    assert preview("  short  ") == "short" + WRITING_MARK

"""The bot's pacing of edits while the model writes: pure, with a clock of the test's own."""
from __future__ import annotations

import pytest

from bot.formatting import MESSAGE_LIMIT
from bot.streaming import WRITING_MARK, LiveReply, preview


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.asyncio
async def test_at_most_one_edit_a_second_counted_from_the_last_edit():
    clock, edits = Clock(), []

    async def edit(text: str) -> None:
        edits.append(text)

    live = LiveReply(edit, 1.0, clock)
    for now, text in [(100.5, "a"), (101.0, "a b"), (101.2, "a b c"), (101.9, "a b c d"), (102.0, "a b c d e")]:
        clock.now = now
        await live.update(text)
    assert edits == ["a b" + WRITING_MARK, "a b c d e" + WRITING_MARK]

    clock.now = 102.5
    live.touch()  # a progress line was written: the next text waits a second from it
    clock.now = 103.2
    await live.update("a b c d e f")
    clock.now = 103.5
    await live.update("a b c d e f g")
    assert edits[2:] == ["a b c d e f g" + WRITING_MARK] and live.edits == 3


def test_a_preview_past_one_message_shows_its_head_within_the_limit():
    text = "word " * 1000
    shown = preview(text)
    assert len(shown) <= MESSAGE_LIMIT
    assert shown.endswith(" …" + WRITING_MARK)
    assert text.startswith(shown[: -len(" …" + WRITING_MARK)])
    assert preview("  short  ") == "short" + WRITING_MARK

"""The questions under way (`bot.questions.Questions`): how many are taken at once, and what each is
told when the bot stops. End to end, SIGTERM to a bot process: tests/bot/test_service.py."""
from __future__ import annotations

import asyncio

from bot.questions import BUSY, RESTARTING, Questions


def question(questions: Questions, told: list[str], seconds: float) -> asyncio.Task:
    async def tell(text: str) -> None:
        told.append(text)

    async def answer() -> str:
        async with questions.answering(tell):
            await asyncio.sleep(seconds)
        return "answered"

    return asyncio.ensure_future(answer())


async def test_over_the_limit_a_question_is_refused_at_once_and_taken_again_once_one_ends():
    questions, told = Questions(2), []
    first, second = question(questions, told, 0.05), question(questions, told, 10)
    await asyncio.sleep(0)
    assert (2, BUSY.format(n=2)) == (len(questions), questions.refusal())
    await first
    assert (1, None) == (len(questions), questions.refusal())
    second.cancel()
    await asyncio.gather(second, return_exceptions=True)
    assert (0, []) == (len(questions), told)  # cancelled, but not by a stop: nothing said


async def test_a_stop_lets_quick_questions_finish_and_tells_the_others_to_ask_again():
    questions, quick_told, slow_told = Questions(4), [], []
    quick, slow = question(questions, quick_told, 0.05), question(questions, slow_told, 60)
    await asyncio.sleep(0)
    await asyncio.wait_for(questions.stop(grace=0.5), 10)
    assert "answered" == await quick and [] == quick_told
    assert slow.cancelled() and [RESTARTING] == slow_told
    assert (0, RESTARTING) == (len(questions), questions.refusal())  # and nothing new is taken


async def test_a_stop_with_nothing_under_way_returns_at_once():
    questions = Questions(4)
    await asyncio.wait_for(questions.stop(grace=60), 1)
    assert RESTARTING == questions.refusal()

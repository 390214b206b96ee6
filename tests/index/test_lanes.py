"""The lanes: pure Python that takes long on the CPU runs off the event loop on one thread per
kind of step, in turn, so the loop competes for the interpreter lock with one thread, not six."""
from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

import oracle.answer.writer as writer_mod
import oracle.index.ingest as ingest_mod
import oracle.index.scan as scan_mod
from oracle.index.ingest import ingest
from oracle.offload import INGEST_LANE, QUESTION_LANE, ingest_step, question_step
from oracle.oracle import Oracle

ASKED = contextvars.ContextVar("asked", default="")


async def test_a_lanes_steps_run_in_turn_on_one_thread_off_the_loop():
    running, most, threads = 0, 0, set()
    guard = threading.Lock()

    def step(n: int) -> int:
        nonlocal running, most
        with guard:
            running += 1
            most = max(most, running)
        threads.add(threading.get_ident())
        time.sleep(0.01)
        with guard:
            running -= 1
        return n * n

    assert [n * n for n in range(6)] == await asyncio.gather(*(question_step(step, n) for n in range(6)))
    assert 1 == most and 1 == len(threads)
    assert threading.get_ident() not in threads
    assert QUESTION_LANE.name != INGEST_LANE.name


async def test_a_questions_step_does_not_wait_behind_an_ingests():
    release = threading.Event()
    long_step = asyncio.ensure_future(ingest_step(release.wait, 10))
    try:
        assert 4 == await asyncio.wait_for(question_step(pow, 2, 2), timeout=5)
        assert not long_step.done()
    finally:
        release.set()
    assert await long_step


async def test_a_step_sees_the_callers_context_and_its_error_reaches_the_caller():
    ASKED.set("who is Mirela?")
    assert "who is Mirela?" == await question_step(ASKED.get)
    with pytest.raises(ZeroDivisionError):
        await ingest_step(divmod, 1, 0)
    assert (0, 1) == await ingest_step(divmod, 1, 2)  # the lane goes on


def recording(threads: list[str], fn):
    def wrapped(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return fn(*args, **kwargs)

    return wrapped


async def test_an_ingest_and_a_question_use_their_lanes(monkeypatch, make_settings, mini_notes, open_quick_index, fake_ollama):
    threads: list[str] = []
    for module, name in ((scan_mod, "scan_notes"), (scan_mod, "chunk_all"), (ingest_mod, "chunk_refs")):
        monkeypatch.setattr(module, name, recording(threads, getattr(module, name)))
    index = open_quick_index(make_settings(mini_notes, ollama_host=fake_ollama.url, model="qwen2.5:14b"))
    await ingest(index)
    assert 3 == len(threads) and all(t.startswith(INGEST_LANE.name) for t in threads)

    threads.clear()
    for name in ("fit_answer_prompt", "_checked"):
        monkeypatch.setattr(writer_mod, name, recording(threads, getattr(writer_mod, name)))
    answer = await Oracle(index).ask("Who ambushed Mirela at the ford?")
    assert answer.text
    assert 2 == len(threads) and all(t.startswith(QUESTION_LANE.name) for t in threads)

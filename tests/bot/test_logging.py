"""The bot's log over months: one line per thing that happened. The HTTP client does not add a line
for every request to Ollama (real ollama client, fake Ollama over HTTP), and under systemd a line
does not carry a second time stamp beside the journal's."""
from __future__ import annotations

import logging

import pytest

from bot.__main__ import QUIET, configure_logging, log_format
from oracle.llm import LLM


@pytest.fixture
def quiet_restored():
    levels = {name: logging.getLogger(name).level for name in QUIET}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


async def test_a_request_to_ollama_adds_no_line_from_the_http_client(fake_ollama, caplog, quiet_restored):
    configure_logging({})
    llm = LLM(fake_ollama.url, "qwen2.5:14b", timeout=30)
    try:
        with caplog.at_level(logging.INFO):
            assert await llm.chat([{"role": "user", "content": "What happened to the archduke?"}])
    finally:
        await llm.close()

    assert [r.getMessage() for r in caplog.records if r.name.split(".")[0] in ("httpx", "httpcore")] == []


async def test_the_http_clients_warnings_still_show(caplog, quiet_restored):
    configure_logging({})
    with caplog.at_level(logging.INFO):
        logging.getLogger("httpx").warning("a connection was reset")

    assert ["a connection was reset"] == [r.getMessage() for r in caplog.records if r.name == "httpx"]


def test_under_systemd_the_journal_alone_stamps_the_time():
    assert "%(asctime)s" not in log_format({"JOURNAL_STREAM": "8:41235"})
    assert log_format({}).startswith("%(asctime)s ")
    record = logging.LogRecord("bot", logging.INFO, __file__, 1, "ready", None, None)
    assert "INFO bot: ready" == logging.Formatter(log_format({"JOURNAL_STREAM": "8:41235"})).format(record)

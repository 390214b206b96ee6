"""What a request to Ollama costs the event loop beyond the request: no import once the client is warm.

An import of a module that is not installed is never cached: each one looks in every folder of
sys.path again, and each look is a system call that hands the interpreter lock away from the loop,
which then waits for a busy thread to give it back. httpcore asks for `sniffio` on every request, so
it is a dependency of ours (pyproject.toml). Real ollama client, fake Ollama over HTTP.
"""
from __future__ import annotations

import sys

from oracle.llm import LLM


class _ImportSpy:
    """A finder consulted first: Python asks it for every module not yet in sys.modules."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def find_spec(self, name, path=None, target=None):
        self.asked.append(name)  # and no spec: the finders after it look as before


async def test_a_warm_client_imports_nothing_per_request(fake_ollama):
    llm = LLM(fake_ollama.url, "qwen2.5:14b", timeout=30)
    messages = [{"role": "user", "content": "What happened to the archduke?"}]
    try:
        for _ in range(2):  # first requests may import what a client needs once
            await llm.stream_chat(messages)
            await llm.chat(messages)
        spy = _ImportSpy()
        sys.meta_path.insert(0, spy)
        try:
            shown: list[str] = []

            async def show(text: str) -> None:
                shown.append(text)

            for _ in range(3):
                reply = await llm.stream_chat(messages, on_text=show)
                assert reply.text
                assert await llm.chat(messages)
        finally:
            sys.meta_path.remove(spy)
        assert shown
        assert spy.asked == []
    finally:
        await llm.close()

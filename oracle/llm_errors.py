"""What can go wrong talking to Ollama: the errors `llm.py` raises, each with a one-line reason a
game master can act on, and how a transport failure becomes one."""
from __future__ import annotations

import asyncio

import httpx
import ollama

from .errors import OracleError


class LLMError(OracleError, RuntimeError):
    """Ollama did not give a usable answer; `str(err)` is a one-line reason."""

    timed_out = False


class LLMTimeout(LLMError):
    """Ollama did not answer in time."""

    timed_out = True


class LLMUnavailable(LLMError):
    """No model to ask: nothing answers at Ollama's address, or Ollama does not have the model."""


class StreamCut(LLMError):
    """The streamed reply stopped before its end; `partial` is what had arrived. `bound`: "gap" when
    nothing came for the longest pause allowed, "whole" when the reply's own time ran out, "" when
    Ollama ended it."""

    def __init__(self, reason: str, partial: str, bound: str = "") -> None:
        super().__init__(reason)
        self.partial = partial
        self.bound = bound
        self.timed_out = bool(bound)


def reason_of(exc: BaseException, host: str, model: str) -> str:
    """What went wrong, in one line a game master can act on."""
    if isinstance(exc, ollama.ResponseError):
        if exc.status_code == 404:
            return f"Ollama does not have the model {model!r} (run: ollama pull {model})"
        return f"Ollama answered {exc.status_code}: {exc.error}"
    if isinstance(exc, (httpx.TimeoutException, asyncio.TimeoutError, TimeoutError)):
        return f"Ollama at {host} did not answer in time"
    if isinstance(exc, (ConnectionError, httpx.ConnectError)):
        return f"Ollama is not reachable at {host}"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
        return f"Ollama at {host} closed the connection mid-reply"
    return f"Ollama call failed: {type(exc).__name__}: {exc}"


def error_of(exc: BaseException, host: str, model: str) -> LLMError:
    """The transport failure as the `LLMError` its callers tell apart."""
    cls: type[LLMError] = LLMError
    if isinstance(exc, (httpx.TimeoutException, asyncio.TimeoutError, TimeoutError)):
        cls = LLMTimeout
    elif isinstance(exc, (ConnectionError, httpx.ConnectError)) or (
        isinstance(exc, ollama.ResponseError) and exc.status_code == 404
    ):
        cls = LLMUnavailable
    return cls(reason_of(exc, host, model))

"""The only module that speaks HTTP to Ollama.

Every call has a timeout (the client's default is none) and every transport failure becomes an
`LLMError` whose message is the reason a game master can act on.
"""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, TypeVar

import httpx
import ollama
from pydantic import BaseModel, ValidationError

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


class LLMError(RuntimeError):
    """Ollama did not give a usable answer; `str(err)` is a one-line reason."""


def _reason(exc: BaseException, host: str, model: str) -> str:
    if isinstance(exc, ollama.ResponseError):
        if exc.status_code == 404:
            return f"Ollama does not have the model {model!r} (run: ollama pull {model})"
        return f"Ollama answered {exc.status_code}: {exc.error}"
    if isinstance(exc, (httpx.TimeoutException, asyncio.TimeoutError, TimeoutError)):
        return f"Ollama at {host} did not answer in time"
    if isinstance(exc, (ConnectionError, httpx.ConnectError)):
        return f"Ollama is not reachable at {host}"
    return f"Ollama call failed: {type(exc).__name__}: {exc}"


class LLM:
    def __init__(
        self, host: str, model: str, *, timeout: float, max_timeout: float | None = None, keep_alive: str | None = "30m"
    ) -> None:
        """`timeout` bounds a call that names none; `max_timeout` is the transport's backstop and must
        cover the longest per-call timeout (the answer's), or httpx would cut that call first."""
        self.host = host
        self.model = model
        self.timeout = timeout
        self.keep_alive = keep_alive
        self._client = ollama.AsyncClient(host=host, timeout=max(timeout, max_timeout or 0) + 5)

    async def close(self) -> None:
        await self._client.close()

    async def probe(self, timeout: float = 3.0) -> str | None:
        """None when the model answers `show`, else the reason it cannot be used."""
        try:
            await asyncio.wait_for(self._client.show(self.model), timeout)
        except Exception as exc:  # every failure is a reason, never a crash
            return _reason(exc, self.host, self.model)
        return None

    async def chat(
        self, messages: list[dict[str, str]], *, schema: dict[str, Any] | None = None, timeout: float | None = None
    ) -> str:
        try:
            response = await asyncio.wait_for(
                self._client.chat(
                    model=self.model,
                    messages=messages,
                    format=schema,
                    options={"temperature": 0},
                    keep_alive=self.keep_alive,
                ),
                timeout or self.timeout,
            )
        except Exception as exc:
            raise LLMError(_reason(exc, self.host, self.model)) from exc
        return response.message.content or ""

    async def chat_model(self, messages: list[dict[str, str]], model_cls: type[M], **kwargs: Any) -> M:
        """A chat whose reply must validate as `model_cls` (its JSON schema is sent as `format`)."""
        content = await self.chat(messages, schema=model_cls.model_json_schema(), **kwargs)
        try:
            return model_cls.model_validate(json.loads(content))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise LLMError(f"the model's reply is not the JSON asked for: {str(exc).splitlines()[0]}") from exc

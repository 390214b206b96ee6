"""The only module that speaks HTTP to Ollama.

Every call has a timeout (the client's default is none) and every transport failure becomes an
`LLMError` whose message is the reason a game master can act on; a stream that dies after some text
becomes a `StreamCut` that keeps the text.

A question's time is bounded by its `deadline.Deadline`; every chat request carries the same
context window (`context_window.ContextWindow`).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import ollama
from pydantic import BaseModel, ValidationError

from .context_window import ContextWindow, context_length
from .llm_errors import LLMError, StreamCut, error_of, reason_of
from .settings import Settings

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Reply:
    """A finished chat reply and Ollama's own counts (None when it did not report them)."""

    text: str
    prompt_eval_count: int | None = None
    eval_count: int | None = None
    done_reason: str | None = None


TextFn = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Loaded:
    """Whether Ollama holds the model in memory (`/api/ps`): None when Ollama did not say, with why."""

    loaded: bool | None
    context_length: int | None = None
    reason: str | None = ""  # why it is unknown; a player's status has None or a reason without host

    def to_json(self) -> dict[str, Any]:
        return {"loaded": self.loaded, "context_length": self.context_length, "reason": self.reason}

    def describe(self) -> str:
        """As a status line."""
        if self.loaded is None:
            return f"unknown: {self.reason}"
        if not self.loaded:
            return "no: the next question loads it (until it is loaded, questions get the passages)"
        return f"yes, with {self.context_length} tokens of context" if self.context_length else "yes"


@dataclass
class _Reading:
    """A streamed reply as it arrives, and the bound its next wait is under."""

    # Mutable: when the stream fails midway, what had arrived and the bound in force make the error.
    loop: asyncio.AbstractEventLoop
    end: float  # the whole reply's deadline, on the loop's clock
    token_gap: float | None
    parts: list[str] = field(default_factory=list)
    bound: str = ""  # the bound in force: "" for the first text, then "gap" or "whole"
    final: Any = None
    stream: Any = None

    def next_piece_by(self, waiting: asyncio.Timeout) -> str:
        """Move the wait's deadline to the next piece's: `token_gap` from now, or the reply's end."""
        if self.token_gap is not None and self.loop.time() + self.token_gap < self.end:
            waiting.reschedule(self.loop.time() + self.token_gap)
            return "gap"
        waiting.reschedule(self.end)
        return "whole"


class LLM:
    def __init__(
        self,
        host: str,
        model: str,
        *,
        timeout: float,
        max_timeout: float | None = None,
        keep_alive: str | None = "30m",
        num_ctx: int = 16384,
        answer_tokens: int = 1024,
        client: ollama.AsyncClient | None = None,
    ) -> None:
        """`timeout` bounds a call that names none; `max_timeout` is the transport's backstop and must
        cover the longest per-call timeout (the answer's), or httpx would cut that call first.
        `client`: an Ollama client shared with other models' LLMs (see `for_model`); its owner closes it."""
        self.host = host
        self.model = model
        self.timeout = timeout
        self.keep_alive = keep_alive
        self.num_ctx = num_ctx
        self.answer_tokens = answer_tokens
        self._load: asyncio.Future[str | None] | None = None  # the load in flight, or the last one
        self._window: ContextWindow | None = None
        self._window_lock = asyncio.Lock()
        self.max_timeout = max_timeout
        self._owns_client = client is None
        self._client = client or ollama.AsyncClient(host=host, timeout=max(timeout, max_timeout or 0) + 5)

    @classmethod
    def from_settings(cls, settings: Settings) -> LLM:
        """The Ollama client the settings describe: ORACLE_MODEL, its window and timeouts."""
        return cls(
            settings.ollama_host,
            settings.model,
            timeout=settings.ollama_timeout,
            max_timeout=settings.answer_timeout,
            keep_alive=settings.keep_alive,
            num_ctx=settings.num_ctx,
            answer_tokens=settings.answer_tokens,
        )

    def for_model(self, model: str) -> LLM:
        """This LLM for another model, on the same Ollama client and connections (campaigns that
        answer with different models share one Ollama). Closing it leaves the client to this one."""
        if model == self.model:
            return self
        return LLM(
            self.host, model, timeout=self.timeout, max_timeout=self.max_timeout, keep_alive=self.keep_alive,
            num_ctx=self.num_ctx, answer_tokens=self.answer_tokens, client=self._client,
        )

    async def window(self, timeout: float = 10.0) -> ContextWindow:
        """The window requests are sent with: read from the model once; the setting while Ollama is away."""
        async with self._window_lock:
            if self._window is not None:
                return self._window
            try:
                shown = await asyncio.wait_for(self._client.show(self.model), min(timeout, self.timeout))
            except Exception as exc:  # not cached: the next request asks again
                reason = f"the model's context length is unknown ({reason_of(exc, self.host, self.model)})"
                return ContextWindow(self.num_ctx, self.num_ctx, self._answer_tokens(self.num_ctx), None, reason)
            limit = context_length(shown.modelinfo)
            num_ctx, reason = self.num_ctx, ""
            if limit is None:
                reason = "Ollama does not report the model's context length"
            elif limit < self.num_ctx:
                num_ctx = limit
                reason = f"lowered from ORACLE_NUM_CTX={self.num_ctx}: {self.model} serves at most {limit} tokens"
            self._window = ContextWindow(num_ctx, self.num_ctx, self._answer_tokens(num_ctx), limit, reason)
            if reason:
                log.warning("context window %d tokens: %s", num_ctx, reason)
            return self._window

    def _answer_tokens(self, num_ctx: int) -> int:
        """The reply's budget, never more than half the window (a small model's window is mostly prompt)."""
        return min(self.answer_tokens, num_ctx // 2)

    async def _options(self, num_predict: int | None) -> dict[str, Any]:
        window = await self.window()
        return {
            "temperature": 0,
            "num_ctx": window.num_ctx,
            "num_predict": min(num_predict or window.answer_tokens, window.num_ctx // 2),
        }

    async def load(self, timeout: float | None = None) -> str | None:
        """Load the model with the window every request uses (Ollama loads on an empty chat), and keep
        it loaded for keep_alive. None when loaded, else the reason.

        One load at a time, a request of its own: a caller that stops waiting (a question past its
        deadline) leaves it running, since Ollama aborts a load whose client goes away. It may take
        as long as the longest call (`timeout`: the LLM's own, or its `max_timeout` when longer)."""
        return await asyncio.shield(self._begin_load(timeout))

    def _begin_load(self, timeout: float | None = None) -> asyncio.Future[str | None]:
        """The load in flight, started now when there is none."""
        if self._load is None or self._load.done():
            bound = timeout if timeout is not None else max(self.timeout, self.max_timeout or 0)
            self._load = asyncio.ensure_future(self._loaded_within(bound))
        return self._load

    async def _loaded_within(self, timeout: float) -> str | None:
        try:
            options = await self._options(None)
            await asyncio.wait_for(
                self._client.chat(
                    model=self.model, messages=[], options={"num_ctx": options["num_ctx"]}, keep_alive=self.keep_alive
                ),
                timeout,
            )
        except Exception as exc:
            reason = reason_of(exc, self.host, self.model)
            log.warning("loading the model %s failed: %s", self.model, reason)
            return reason
        return None

    @property
    def loading(self) -> bool:
        """A load of this process is in flight (`load`)."""
        return self._load is not None and not self._load.done()

    @property
    def load_failed(self) -> str | None:
        """Why this process's last load failed, once it has ended (None: it loaded, or none ended)."""
        if self._load is None or not self._load.done() or self._load.cancelled():
            return None
        return self._load.result()

    async def start_loading(self, timeout: float = 3.0) -> bool:
        """Whether the model is loading for this process now. When Ollama does not hold it with the
        window every request uses (`/api/ps`, asked within `timeout`), a load starts (`load`), so
        that the model goes on loading while questions that cannot wait for it get the passages."""
        if self.loading:
            return True
        state = await self.loaded(max(timeout, 0.001))
        if state.loaded is None:  # Ollama did not say: the calls will tell why
            return False
        if state.loaded:
            window = await self.window(max(timeout, 0.001))
            if state.context_length in (None, window.num_ctx):
                return False
        log.info("the model %s is not loaded: loading it", self.model)
        self._begin_load()
        return True

    async def wait_loaded(self, timeout: float) -> bool:
        """Whether no load is in flight now or the one in flight ended within `timeout` seconds (it is
        never cancelled by this wait)."""
        if not self.loading:
            return True
        assert self._load is not None
        done, _ = await asyncio.wait({self._load}, timeout=max(timeout, 0))
        return bool(done)

    async def loaded(self, timeout: float = 3.0) -> Loaded:
        """Whether Ollama holds the model in memory now (`/api/ps`), and with which context length."""
        try:
            running = await asyncio.wait_for(self._client.ps(), timeout)
        except Exception as exc:
            return Loaded(None, reason=reason_of(exc, self.host, self.model))
        wanted = {self.model, self.model if ":" in self.model else f"{self.model}:latest"}
        for model in running.models:
            if model.model in wanted or model.name in wanted:
                return Loaded(True, model.context_length)
        return Loaded(False)

    async def close(self) -> None:
        if self._load is not None and not self._load.done():
            self._load.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._load
        if self._owns_client:
            await self._client.close()

    async def probe(self, timeout: float = 3.0) -> str | None:
        """None when the model answers `show`, else the reason it cannot be used."""
        try:
            await asyncio.wait_for(self._client.show(self.model), timeout)
        except Exception as exc:  # every failure is a reason, never a crash
            return reason_of(exc, self.host, self.model)
        return None

    async def chat(
        self,
        messages: list[dict[str, str]],
        *,
        schema: dict[str, Any] | None = None,
        timeout: float | None = None,
        num_predict: int | None = None,
    ) -> str:
        """The reply, within `timeout` seconds (the LLM's own when None)."""
        try:
            async with asyncio.timeout(self.timeout if timeout is None else timeout):
                options = await self._options(num_predict)
                response = await self._client.chat(
                    model=self.model, messages=messages, format=schema, options=options, keep_alive=self.keep_alive
                )
        except Exception as exc:
            raise error_of(exc, self.host, self.model) from exc
        return response.message.content or ""

    async def stream_chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        on_text: TextFn | None = None,
        timeout: float | None = None,
        first_text: float | None = None,
        token_gap: float | None = None,
        num_predict: int | None = None,
    ) -> Reply:
        """The reply as it is written: `on_text` gets the whole text so far after each piece. A failure
        before any text is an LLMError; after some, a StreamCut holding it. Seconds: `timeout` bounds
        the whole reply (the LLM's own when None), `first_text` the wait for its first text, and
        `token_gap` each wait for the next piece once text flows (the time `on_text` takes is not
        counted)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + (self.timeout if timeout is None else timeout)
        first = end if first_text is None else min(loop.time() + first_text, end)
        reading = _Reading(loop, end, token_gap)
        try:
            async with asyncio.timeout_at(first) as waiting:
                await self._read_stream(messages, num_predict, on_text, reading, waiting)
        except Exception as exc:  # httpx errors arrive raw mid-stream; all become a reason
            raise self._stream_failure(exc, reading) from exc
        finally:
            if reading.stream is not None:  # the connection closes now, not when the generator is collected:
                with contextlib.suppress(Exception):  # Ollama stops writing for nobody
                    await reading.stream.aclose()
        return self._finished(reading)

    async def _read_stream(
        self, messages: Sequence[dict[str, str]], num_predict: int | None, on_text: TextFn | None, reading: _Reading,
        waiting: asyncio.Timeout,
    ) -> None:
        """Ask for the reply as a stream and take its pieces into `reading`, each wait under its bound."""
        options = await self._options(num_predict)
        reading.stream = await self._client.chat(
            model=self.model, messages=list(messages), options=options, keep_alive=self.keep_alive, stream=True
        )
        async for part in reading.stream:
            piece = part.message.content or "" if part.message else ""
            if piece:
                reading.parts.append(piece)
                reading.bound = reading.next_piece_by(waiting)
                if on_text is not None:
                    await on_text("".join(reading.parts))
                    reading.bound = reading.next_piece_by(waiting)
            if part.done:
                reading.final = part

    def _stream_failure(self, exc: Exception, reading: _Reading) -> LLMError:
        """What a failed stream raises: a StreamCut keeping the text when some came, else the LLMError."""
        error = error_of(exc, self.host, self.model)
        text = "".join(reading.parts)
        if not text.strip():
            return error
        if error.timed_out and reading.bound == "gap":
            return StreamCut(f"Ollama at {self.host} sent nothing for {reading.token_gap:g} s mid-reply", text, "gap")
        if error.timed_out:
            return StreamCut(f"Ollama at {self.host} was still writing when the reply's time ran out", text, "whole")
        return StreamCut(str(error), text)

    def _finished(self, reading: _Reading) -> Reply:
        """The reply of a stream that ended, or the failure of one that ended without its last line."""
        text = "".join(reading.parts)
        if reading.final is None:
            reason = f"Ollama at {self.host} ended the reply without its last line"
            if text.strip():
                raise StreamCut(reason, text)
            raise LLMError(reason)
        final = reading.final
        return Reply(text, final.prompt_eval_count, final.eval_count, final.done_reason)

    async def chat_model(self, messages: list[dict[str, str]], model_cls: type[M], **kwargs: Any) -> M:
        """A chat whose reply must validate as `model_cls` (its JSON schema is sent as `format`)."""
        content = await self.chat(messages, schema=model_cls.model_json_schema(), **kwargs)
        try:
            return model_cls.model_validate(json.loads(content))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise LLMError(f"the model's reply is not the JSON asked for: {str(exc).splitlines()[0]}") from exc

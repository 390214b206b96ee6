"""A fake Ollama for the tests and the benchmarks: real HTTP on 127.0.0.1, scripted answers.

The unmodified ``ollama`` client talks to it over a socket, so timeouts, refused connections, HTTP errors
and streams cut halfway reach the Oracle as in production. It serves what the Oracle calls, as strictly
as the real server: its rules, their sources and its tokenizer are in docs/fakes.md, "The fake
Ollama". As a process of its own, as a real Ollama is, it prints its URL:
``python -m testing.ollama_server --port 0 [--cited | --responder MODULE:FUNCTION]``.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import logging
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, NamedTuple

from aiohttp import web

from testing.serving import serve

DEFAULT_NUM_CTX = 2048
DEFAULT_NUM_KEEP = 4

log = logging.getLogger("fake_ollama")


# Directives: what a responder may return besides text, a dict or a list (sent as its JSON text).
@dataclass(frozen=True)
class Reply:
    """A normal answer; ``chunk_delay`` spaces out the streamed chunks."""

    content: str = ""
    done_reason: str = "stop"
    chunk_delay: float = 0.0


@dataclass(frozen=True)
class Delay:
    """No byte for ``seconds`` (a shorter client read timeout fires), then ``then`` (None: the default answer)."""

    seconds: float
    then: Any = None


@dataclass(frozen=True)
class HttpError:
    """An HTTP error with Ollama's error body ``{"error": ...}``."""

    status: int = 500
    error: str = "internal server error"


@dataclass(frozen=True)
class ModelNotFound:
    """404 as Ollama sends it for a model it does not have (None: the requested one)."""

    model: str | None = None


@dataclass(frozen=True)
class _MidReply:
    content: str | None = None  # None: the default answer
    after: int = 1  # content chunks streamed before it happens


@dataclass(frozen=True)
class CutStream(_MidReply):
    """Hang up after ``after`` chunks, before the ``done`` line (not streaming: halfway through the body)."""


@dataclass(frozen=True)
class Stall(_MidReply):
    """Nothing for ``seconds`` after ``after`` chunks (not streaming: before the answer), then the rest."""

    seconds: float = 60.0


@dataclass(frozen=True)
class TruncatedJson:
    """Half of the request's schema filled in (else of ``obj``), done_reason "length": a model at its limit."""

    obj: Any = field(default_factory=lambda: {"answer": "The dragon sleeps under the mountain."})


@dataclass(frozen=True)
class RawBody:
    """These exact bytes: protocol-level garbage the client must survive."""

    body: str | bytes
    status: int = 200
    content_type: str = "application/json"


EMPTY = Reply("")  # the model answered nothing at all (it happens, e.g. with a bad template)


def in_order(*answers: Any) -> Callable[[dict], Any]:
    """A responder giving ``answers`` one per request, the last one repeating: ``in_order(HttpError(500), "ok")``."""
    if not answers:
        raise ValueError("in_order() needs at least one answer")
    remaining = list(answers)
    return lambda _request: remaining.pop(0) if len(remaining) > 1 else remaining[0]


_SCALARS = {"string": "fake text", "integer": 0, "number": 0.0, "boolean": True}


def instance_from_schema(schema: dict, defs: dict | None = None) -> Any:
    """A value valid against a schema as pydantic writes one: every property, one item per array, the
    first of an enum, the first branch of an anyOf that is not null."""
    defs = schema.get("$defs", defs or {})
    if "$ref" in schema:
        return instance_from_schema(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return instance_from_schema(next((b for b in schema["anyOf"] if b.get("type") != "null"), {"type": "null"}), defs)
    kind = schema.get("type", "object")
    if kind == "object":
        return {name: instance_from_schema(sub, defs) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [instance_from_schema(schema.get("items", {"type": "string"}), defs)]
    return _SCALARS.get(kind)


def _question(request: dict) -> str:
    """The last user message of a chat request."""
    return next((m.get("content") or "" for m in reversed(request.get("messages") or []) if m.get("role") == "user"), "")


def default_responder(request: dict) -> str:
    """Schema-valid JSON when ``format`` is a schema, ``{"answer": ...}`` for "json", else an echo."""
    fmt = request.get("format")
    if isinstance(fmt, dict):
        return json.dumps(instance_from_schema(fmt))
    answer = f"Fake answer to: {_question(request)}"
    return json.dumps({"answer": answer}) if fmt == "json" else answer


_FRAGMENT_HEADER = re.compile(r"^\[(?P<label>[^\]\n]+)\] \(")
_FIRST_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def cited_responder(request: dict) -> Any:
    """A model that follows the Oracle's citation rules, deterministically, from what it was sent (``--cited``).

    Annotations: the passage's first 14 words. Reranking: candidates 1 to 8, the fused order. Answers: for
    each fragment of the "in full" block, its first sentence of four words or more, followed by the
    fragment's label in brackets; "The notes do not say." when it got none.
    """
    fmt = request.get("format")
    user = _question(request)
    if isinstance(fmt, dict):
        properties = fmt.get("properties", {})
        if "summary" in properties:
            passage = user.split("\n\n", 2)[1] if user.count("\n\n") >= 2 else user
            return {"summary": " ".join(passage.split()[:14]), "entities": []}
        return {"best": list(range(1, 9))} if "best" in properties else instance_from_schema(fmt)
    claims = []
    for block in user.split("\n\n---\n\n"):
        header, _, text = block.partition("\n")
        match = _FRAGMENT_HEADER.match(header)
        if not match:
            continue
        for line in text.splitlines():
            words = line.strip()
            if words.startswith("#") or len(words.split()) < 4:
                continue
            sentence = next((s for s in _FIRST_SENTENCE.split(words) if len(s.split()) >= 4), None)
            if sentence:
                claims.append(f"{sentence} [{match['label']}]")
                break
    return " ".join(claims) or "The notes do not say."


_PIECES = re.compile(r"\d|[^\W\d_]+|\n+|[^\S\n]+|.", re.S)
REPLY_OPENING = ["<|im_start|>", "assistant", "\n"]


def tokenize(text: str) -> list[str]:
    """The fake model's tokens: a word in pieces of four characters, each digit, each other visible
    character, each run of line breaks; spaces are not tokens. They join back to the text less its spaces."""
    tokens: list[str] = []
    for piece in _PIECES.findall(text):
        if piece[0].isalpha() and len(piece) > 4:
            tokens += [piece[i : i + 4] for i in range(0, len(piece), 4)]
        elif not piece[0].isspace() or piece[0] == "\n":
            tokens.append(piece)
    return tokens


def render_chatml(messages: list[dict]) -> list[list[str]]:
    """Each message's tokens in ChatML framing (``<|im_start|>role\\n … <|im_end|>\\n``)."""
    return [
        ["<|im_start|>", str(m.get("role", "user")), "\n", *tokenize(m.get("content") or ""), "<|im_end|>", "\n"]
        for m in messages
    ]


def split_tokens(content: str) -> list[str]:
    """Stream chunks shaped like model tokens (" word"); they join back exactly."""
    return re.findall(r"\s*\S+|\s+", content)


@dataclass
class FakeModel:
    """What ``/api/show`` and ``/api/ps`` report about one installed model."""

    name: str
    family: str = "qwen2"
    context_length: int = 32768
    parameter_size: str = "14.8B"
    load_seconds: float = 0.0  # how long a (re)load takes; the first call per num_ctx waits for it

    def details(self) -> dict:
        return {"parent_model": "", "format": "gguf", "family": self.family, "families": [self.family],
                "parameter_size": self.parameter_size, "quantization_level": "Q4_K_M"}


@dataclass
class Served:
    """How a chat request was served: its window, its prompt, and what was cut."""

    model: str
    num_ctx: int
    num_predict: int  # -1: no limit, as Ollama reads it
    num_keep: int
    prompt_tokens: int  # the rendered prompt, before anything was cut
    evaluated: int  # what the model read: prompt_eval_count
    dropped_messages: int = 0  # whole messages chatPrompt left out
    truncated: dict | None = None  # the runner's cut: limit, prompt, keep, new
    loaded: bool = False  # this request (re)loaded the model
    seen: str = ""  # the prompt the model read, tokens joined by spaces (after any cut)

    @property
    def fits(self) -> bool:
        """Nothing was cut and the whole reply budget fits beside the prompt."""
        if self.truncated or self.dropped_messages:
            return False
        return self.num_predict < 0 or self.prompt_tokens + self.num_predict <= self.num_ctx


class RecordedRequest(NamedTuple):
    """One request received: ``body`` parsed (None for GET); ``served`` for a chat request that was served."""

    path: str
    body: Any
    served: Served | None = None


def fit(body: dict, num_ctx: int) -> Served:
    """What the model reads of a request served with ``num_ctx`` tokens (docs/fakes.md)."""
    options = body.get("options") or {}
    num_keep = int(options.get("num_keep", DEFAULT_NUM_KEEP))
    messages = list(body.get("messages") or [])
    rendered = render_chatml(messages)
    prompt_tokens = total = sum(map(len, rendered)) + len(REPLY_OPENING)
    dropped = 0
    for start in range(len(messages) - 1):  # chatPrompt: whole messages from the front, never system ones
        if total <= num_ctx:
            break
        if messages[start].get("role") != "system":
            total -= len(rendered[start])
            rendered[start] = []
            dropped += 1
    tokens = [t for r in rendered for t in r] + REPLY_OPENING
    truncated = None
    if len(tokens) > num_ctx:  # the runner: keep num_keep tokens, discard what follows them
        keep = min(num_keep, num_ctx - 1)
        tokens = tokens[:keep] + tokens[keep + len(tokens) - num_ctx :]
        truncated = {"limit": num_ctx, "prompt": total, "keep": keep, "new": len(tokens)}
        log.warning("truncating input prompt limit=%d prompt=%d keep=%d new=%d", num_ctx, total, keep, len(tokens))
    return Served(
        model=body["model"], num_ctx=num_ctx, num_predict=int(options.get("num_predict", -1)), num_keep=num_keep,
        prompt_tokens=prompt_tokens, evaluated=len(tokens), dropped_messages=dropped, truncated=truncated,
        seen=" ".join(tokens),
    )


def _full_name(model: str) -> str:
    """Ollama resolves a model name without a tag to ``:latest``."""
    return model if ":" in model else f"{model}:latest"


def _seconds(keep_alive: Any) -> float:
    """Ollama's keep_alive in seconds: a number of seconds or a duration such as "30m", else its default, 5 minutes."""
    if isinstance(keep_alive, (int, float)):
        return float(keep_alive)
    match = re.fullmatch(r"\s*(-?[\d.]+)\s*(ms|s|m|h)?\s*", str(keep_alive))
    return float(match[1]) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[match[2]] if match else 300.0


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class FakeOllama:
    """A scripted Ollama on 127.0.0.1; an async context manager, or a thread (``with``, ``run_in_thread``).

    ``responder(request_json)`` decides chat answers: text, a dict or list, a directive, or an awaitable of
    those; if it raises, the client gets HTTP 500 naming the exception. A model not in ``models`` gets 404
    before the responder runs. ``slow``: seconds every chat reply but a load waits before its first byte.
    """

    def __init__(
        self, models: list[str | FakeModel] | tuple[str | FakeModel, ...] = ("qwen2.5:14b",),
        responder: Callable[[dict], Any] | None = None, *, port: int = 0, slow: float = 0.0,
    ) -> None:
        self.models: dict[str, FakeModel] = {}
        for model in models:
            self.add_model(model)
        self.responder: Callable[[dict], Any] = responder or default_responder
        self.requests: list[RecordedRequest] = []
        self.loads: list[tuple[str, int]] = []  # every (model, num_ctx) the fake loaded, in order
        self.loaded: dict[str, tuple[int, float | None]] = {}  # model -> (num_ctx, expiry) of its runner
        self.truncations: list[dict] = []  # every "truncating input prompt" the runner logged
        self.aborted_loads: list[tuple[str, int]] = []  # loads whose client went away before they ended
        self.abandoned: list[dict] = []  # bodies of chat requests whose client left before the end
        self.slow = slow
        self.port = port
        self._loading: dict[tuple[str, int], asyncio.Future] = {}
        self._runner: web.AppRunner | None = None
        self._thread: tuple[asyncio.AbstractEventLoop, threading.Thread] | None = None

    @property
    def url(self) -> str:
        """The base URL for ``ollama.AsyncClient(host=...)``, once started."""
        if not self.port:
            raise RuntimeError("FakeOllama is not started")
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> FakeOllama:
        """Listen. A restart reuses the port of the first start, so clients can reconnect."""
        app = web.Application()
        app.router.add_post("/api/chat", self._chat)
        app.router.add_post("/api/show", self._show)
        app.router.add_get("/api/ps", self._ps)
        self._runner, self.port = await serve(app, "127.0.0.1", self.port)  # a timed-out client stops a Delay
        return self

    async def stop(self) -> None:
        """Close the listening socket and open connections; then connections are refused."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> FakeOllama:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def run_in_thread(self) -> FakeOllama:
        """Serve from a daemon thread with its own event loop, for sync tests and subprocess CLIs."""
        if self._thread is not None:
            raise RuntimeError("FakeOllama already runs in a thread")
        loop = asyncio.new_event_loop()
        self._thread = (loop, threading.Thread(target=loop.run_forever, name="fake-ollama", daemon=True))
        self._thread[1].start()
        try:
            asyncio.run_coroutine_threadsafe(self.start(), loop).result(timeout=10)
        except BaseException:
            self.stop_thread()
            raise
        return self

    def stop_thread(self) -> None:
        """Undo ``run_in_thread``; calling ``run_in_thread`` again restarts on the same port."""
        if self._thread is None:
            return
        (loop, thread), self._thread = self._thread, None
        try:
            asyncio.run_coroutine_threadsafe(self.stop(), loop).result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()

    def __enter__(self) -> FakeOllama:
        return self.run_in_thread()

    def __exit__(self, *exc_info: object) -> None:
        self.stop_thread()

    def add_model(self, model: str | FakeModel) -> None:
        """Install a model (``ollama pull``), or replace it."""
        model = model if isinstance(model, FakeModel) else FakeModel(model)
        self.models[_full_name(model.name)] = replace(model, name=_full_name(model.name))

    def chat_requests(self) -> list[dict]:
        return [r.body for r in self.requests if r.path == "/api/chat"]

    def served(self) -> list[Served]:
        """How each chat request was served, oldest first."""
        return [r.served for r in self.requests if r.served is not None]

    def reset(self) -> None:
        """Forget recorded requests and go back to the default responder, at full speed."""
        for recorded in (self.requests, self.truncations, self.loads, self.aborted_loads, self.abandoned):
            recorded.clear()
        self.slow = 0.0
        self.responder = default_responder

    async def _model(self, request: web.Request) -> tuple[Any, FakeModel | web.Response]:
        """The request's body, recorded, and its model or the error Ollama would answer with."""
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = raw.decode(errors="replace")
        self.requests.append(RecordedRequest(request.path, body))
        if not isinstance(body, dict):
            return body, _error(400, "invalid request body")
        if not body.get("model"):
            return body, _error(400, "model is required")
        return body, self.models.get(_full_name(body["model"])) or _error(404, f"model '{body['model']}' not found")

    async def _show(self, request: web.Request) -> web.Response:
        _, model = await self._model(request)
        if isinstance(model, web.Response):
            return model
        return web.json_response({
            "modelfile": f"# Modelfile generated by \"ollama show\"\nFROM {model.name}\n",
            "parameters": 'stop "<|im_start|>"\nstop "<|im_end|>"', "details": model.details(),
            "template": "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}{{ .Prompt }}",
            "model_info": {"general.architecture": model.family, f"{model.family}.context_length": model.context_length},
            "capabilities": ["completion"], "modified_at": "2025-01-01T00:00:00Z",
        })

    async def _ps(self, request: web.Request) -> web.Response:
        """Loaded models, as ``GET /api/ps`` lists them, with the context each was loaded with."""
        self.requests.append(RecordedRequest(request.path, None))
        now = time.time()
        for name in [n for n, (_, expiry) in self.loaded.items() if expiry is not None and expiry <= now]:
            del self.loaded[name]
        running = [{
            "name": name, "model": name, "size": 9_000_000_000, "size_vram": 9_000_000_000,
            "details": self.models[name].details(), "expires_at": _stamp(now + 10**9 if expiry is None else expiry),
            "context_length": num_ctx,
        } for name, (num_ctx, expiry) in self.loaded.items() if name in self.models]
        return web.json_response({"models": running})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body, model = await self._model(request)
        if isinstance(model, web.Response):
            return model
        position = len(self.requests) - 1
        try:
            served = await self._load(model, body)
            self.requests[position] = self.requests[position]._replace(served=served)
            answer: Any = Reply("", done_reason="load")  # an empty chat is Ollama's "load the model" call
            if body.get("messages") != []:
                await asyncio.sleep(self.slow)  # nothing at all, headers included, before the first token
                try:
                    answer = self.responder(body)
                    answer = await answer if inspect.isawaitable(answer) else answer
                except Exception as exc:  # a broken test script should fail loudly, client-side
                    answer = HttpError(500, f"fake responder failed: {exc!r}")
            while isinstance(answer, Delay):
                await asyncio.sleep(answer.seconds)
                answer = default_responder(body) if answer.then is None else answer.then
            return await self._send(request, body, answer, served)
        except asyncio.CancelledError:  # the client went away before the reply's end
            self.abandoned.append(body)
            raise

    async def _load(self, model: FakeModel, body: dict) -> Served:
        """Load the model's runner for this request's window unless it is, then fit the prompt to it."""
        num_ctx = min(int((body.get("options") or {}).get("num_ctx") or DEFAULT_NUM_CTX), model.context_length)
        reload = self.loaded.get(model.name, (None, None))[0] != num_ctx
        if reload:
            await self._wait_for_load((model.name, num_ctx), model.load_seconds)
        seconds = _seconds(body.get("keep_alive"))
        if seconds == 0:
            self.loaded.pop(model.name, None)
        else:
            self.loaded[model.name] = (num_ctx, None if seconds < 0 else time.time() + seconds)  # < 0: for good
        served = replace(fit(body, num_ctx), loaded=reload)
        if served.truncated:
            self.truncations.append(served.truncated)
        return served

    async def _wait_for_load(self, key: tuple[str, int], seconds: float) -> None:
        """One load per (model, num_ctx) for every request waiting, owned by the one that started it: when
        that one's client leaves first, the load is aborted and a request still waiting starts it again."""
        while (loading := self._loading.get(key)) is not None:  # another request's load
            try:
                await asyncio.shield(loading)
                return
            except asyncio.CancelledError:
                task = asyncio.current_task()  # its load aborted, not this request: start it again
                if not loading.cancelled() or task is None or task.cancelling():
                    raise
        self.loads.append(key)
        loading = self._loading[key] = asyncio.ensure_future(asyncio.sleep(seconds))
        try:
            await asyncio.shield(loading)
        except asyncio.CancelledError:
            if not loading.done():  # this request's client went away mid-load
                loading.cancel()
                self.aborted_loads.append(key)
                log.warning("client connection closed before server finished loading, aborting load")
            raise
        finally:
            self._loading.pop(key, None)

    async def _send(self, request: web.Request, body: dict, answer: Any, served: Served) -> web.StreamResponse:
        if isinstance(answer, HttpError):
            return _error(answer.status, answer.error)
        if isinstance(answer, ModelNotFound):
            return _error(404, f"model '{answer.model or body['model']}' not found")
        if isinstance(answer, RawBody):
            return web.Response(body=answer.body, status=answer.status, content_type=answer.content_type)
        reply = _reply(body, answer)
        if reply is None:
            return _error(500, f"fake responder returned an unknown answer: {answer!r}")
        pieces = split_tokens(reply.content)
        if 0 <= served.num_predict < len(pieces):  # the reply's budget: cut, as the runner stops
            pieces = pieces[: served.num_predict]
            reply = replace(reply, done_reason="length")
        load = 100_000  # durations are set, not timed: a loaded model's, or a load's (load_seconds, at least 1 ms)
        if served.loaded:
            load = int(1e9 * self.models[_full_name(body["model"])].load_seconds) or 1_000_000
        final = {
            "done": True, "done_reason": reply.done_reason, "total_duration": 1_000_000 * (len(pieces) + 10),
            "load_duration": load, "prompt_eval_count": served.evaluated, "prompt_eval_duration": 4_000_000,
            "eval_count": len(pieces), "eval_duration": 1_000_000 * len(pieces),
        }
        if body.get("stream", True):
            return await _stream(request, body["model"], pieces, final, reply.chunk_delay, answer)
        if isinstance(answer, Stall):
            await asyncio.sleep(answer.seconds)
        whole = _line(body["model"], "".join(pieces)) | final
        if not isinstance(answer, CutStream):
            return web.json_response(whole)
        data = json.dumps(whole).encode()
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = len(data)  # the whole body announced, half of it sent
        await response.prepare(request)
        await response.write(data[: len(data) // 2])
        request.transport.close()
        return response


def _reply(body: dict, answer: Any) -> Reply | None:
    """The answer as a Reply (None: the responder returned something no model could)."""
    if isinstance(answer, TruncatedJson):
        whole = json.dumps(instance_from_schema(body["format"]) if isinstance(body.get("format"), dict) else answer.obj)
        return Reply(whole[: len(whole) // 2], done_reason="length")
    if isinstance(answer, _MidReply):
        return Reply(default_responder(body) if answer.content is None else answer.content)
    if isinstance(answer, (dict, list)):
        return Reply(json.dumps(answer))
    if isinstance(answer, str):
        return Reply(answer)
    return answer if isinstance(answer, Reply) else None


def _line(model: str, content: str) -> dict:
    """A line of a reply, as Ollama starts each: the model, the time, a piece of the message."""
    message = {"role": "assistant", "content": content}
    return {"model": model, "created_at": _stamp(time.time()), "message": message, "done": False}


async def _stream(
    request: web.Request, model: str, pieces: list[str], final: dict, delay: float, answer: Any
) -> web.StreamResponse:
    """The streamed lines: one per piece, then the ``done`` line, unless a CutStream hangs up first."""
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await response.prepare(request)
    for number, piece in enumerate(pieces, 1):
        if isinstance(answer, CutStream) and number > answer.after:
            break
        await response.write(json.dumps(_line(model, piece)).encode() + b"\n")
        stall = answer.seconds if isinstance(answer, Stall) and number == answer.after else 0.0
        await asyncio.sleep(delay + stall)
    if isinstance(answer, CutStream):
        request.transport.close()  # ends the chunked body early: httpx sees an incomplete read
        return response
    await response.write(json.dumps(_line(model, "") | final).encode() + b"\n")
    await response.write_eof()
    return response


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGINT/SIGTERM; print the URL first so a parent process can read it."""
    parser = argparse.ArgumentParser(description="Fake Ollama server for tests.")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--model", action="append", help="installed model (repeatable); default qwen2.5:14b")
    parser.add_argument("--reply", help="fixed text for every answer (default: echo, or JSON for a schema)")
    parser.add_argument("--cited", action="store_true", help="answer citing the context sent (cited_responder)")
    parser.add_argument("--responder", metavar="MODULE:FUNCTION", help="answer with this function of a request")
    parser.add_argument("--slow", type=float, default=0.0, metavar="SECONDS", help="send nothing for SECONDS before each reply")
    args = parser.parse_args(argv)

    async def run() -> None:
        fake = FakeOllama(models=args.model or ("qwen2.5:14b",), port=args.port, slow=args.slow)
        if args.reply is not None:
            fake.responder = lambda _request: args.reply
        elif args.cited:
            fake.responder = cited_responder
        elif args.responder:
            module, _, name = args.responder.partition(":")
            fake.responder = getattr(importlib.import_module(module), name)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        async with fake:
            print(fake.url, flush=True)
            await stop.wait()

    asyncio.run(run())


if __name__ == "__main__":
    main()

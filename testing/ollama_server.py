"""A fake Ollama server for tests: real HTTP on 127.0.0.1, scripted answers.

Why a real server rather than a mock of ``ollama.AsyncClient``: the Oracle's
failure handling (timeouts, refused connections, HTTP errors, streams that die
halfway, malformed model output) lives at the boundary between the client
library and the network. Mocking the client would test our guesses about that
boundary; a real socket speaking Ollama's REST protocol lets the unmodified
``ollama.AsyncClient`` / ``ollama.Client`` (and httpx underneath) raise exactly
what they raise in production.

Protocol shapes follow Ollama's ``docs/api.md`` and the response models in
``ollama/_types.py`` (ollama-python 0.6.x).

Strict about the context window, as the real server is (sources: ollama/ollama
``server/prompt.go`` ``chatPrompt`` and ``runner/ollamarunner/runner.go`` /
``runner/llamarunner/runner.go`` ``NewSequence``; the log line and its fields are the
runner's, e.g. ``msg="truncating input prompt" limit=2048 prompt=74706 keep=5 new=2048``
as reported in dzhng/deep-research#107):

1. A request is served with its ``options.num_ctx``, or ``DEFAULT_NUM_CTX`` (2,048,
   what most installs default to) when it sets none. A model serves at most its own
   ``context_length``. A different ``num_ctx`` for a loaded model reloads it.
2. ``chatPrompt`` renders the messages through the template; while the rendered
   prompt is longer than ``num_ctx`` it drops whole messages from the front, always
   keeping the system messages and the last message.
3. The runner then cuts what is still too long: it keeps the first ``num_keep``
   tokens (``options.num_keep``, default 4; llamarunner adds one for a BOS token)
   and discards the ``prompt - num_ctx`` tokens that follow them, so the model sees
   exactly ``num_ctx`` tokens whose front (the system prompt, the citation rules) is
   gone. It logs ``truncating input prompt`` with limit, prompt, keep and new.
4. While the reply is written, a full context shifts: ``ShiftCacheSlot`` /
   ``ShiftDiscard`` (``runner/*/cache.go``) free (num_ctx - num_keep) / 2 tokens by
   discarding the oldest ones after the kept head, so a prompt plus ``num_predict``
   over ``num_ctx`` loses its front again if the reply runs to its budget (this is
   why a cut prompt is seen to keep only about half the window: ollama/ollama#17427).
   ``Served.fits`` says whether a request left room for its whole reply. A reply stops
   at ``num_predict`` tokens with ``done_reason`` "length".

Slow, as an overloaded GPU or a CPU-only box is: ``FakeOllama(slow=SECONDS)`` (``--slow``) sends
nothing, not even headers, for SECONDS after each chat request before its reply, as
Ollama writes nothing before the first token; ``Stall`` pauses a stream mid-reply. A model's load
(``FakeModel.load_seconds``) belongs to the request that started it: when that client goes away
before it ends, the load is aborted, as Ollama does ("client connection closed before server
finished loading, aborting load", ollama/ollama#4638), and a request still waiting starts it again.

The fake's tokenizer is deterministic and simpler than a BPE: a word is one token
per four characters (at least one), every digit and every other visible character
one, a run of line breaks one, spaces none, and ChatML framing five per message plus
three for the reply's opening. What the model saw, and whether it was cut, is on
``RecordedRequest.served``.

Typical use::

    async with FakeOllama(models=["qwen2.5:14b"]) as fake:
        fake.responder = lambda req: HttpError(500, "boom")
        client = ollama.AsyncClient(host=fake.url)
        ...
        assert fake.chat_requests()[0]["model"] == "qwen2.5:14b"

From synchronous code or for a CLI subprocess: ``fake.run_in_thread()`` /
``fake.stop_thread()`` (or ``with FakeOllama() as fake:``), or
``python -m testing.ollama_server --port 0 [--cited | --responder MODULE:FUNCTION]``, which
prints its URL (a process of its own, as a real Ollama is: it never holds the caller's GIL).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
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

__all__ = [
    "CutStream",
    "Delay",
    "EMPTY",
    "FakeModel",
    "FakeOllama",
    "HttpError",
    "ModelNotFound",
    "RawBody",
    "RecordedRequest",
    "Served",
    "Reply",
    "Stall",
    "TruncatedJson",
    "cited_responder",
    "default_responder",
    "in_order",
    "instance_from_schema",
    "split_tokens",
    "tokenize",
]

FAKE_VERSION = "0.12.6"
DEFAULT_NUM_CTX = 2048
DEFAULT_NUM_KEEP = 4

log = logging.getLogger("fake_ollama")


# --------------------------------------------------------------------------
# Directives: what a responder may return besides plain text.
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """A normal answer. ``chunk_delay`` spaces out streamed chunks (to test progress UIs)."""

    content: str = ""
    done_reason: str = "stop"
    chunk_delay: float = 0.0


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` before sending any byte, then answer with ``then``.

    No byte before the delay, so a client read timeout shorter than ``seconds``
    fires. ``then=None`` means the default responder's answer.
    """

    seconds: float
    then: Any = None


@dataclass(frozen=True)
class HttpError:
    """Answer with an HTTP error and Ollama's error body ``{"error": ...}``."""

    status: int = 500
    error: str = "internal server error"


@dataclass(frozen=True)
class ModelNotFound:
    """Answer 404 as Ollama does for a missing model (defaults to the requested model)."""

    model: str | None = None


@dataclass(frozen=True)
class CutStream:
    """Close the connection mid-answer.

    Streaming: send ``after`` content chunks, then drop the connection before
    the final ``done`` line. Non-streaming: announce the full Content-Length,
    send half the body, drop the connection. Either way httpx raises
    ``httpx.RemoteProtocolError``. ``content=None`` means the default answer.
    """

    content: str | None = None
    after: int = 1


@dataclass(frozen=True)
class Stall:
    """Stop writing mid-reply: stream ``after`` content chunks, send nothing for ``seconds``, then the
    rest and the ``done`` line (non-streaming: the whole answer after ``seconds``). A model stuck
    behind another request, or swapped out, does this. ``content=None`` means the default answer."""

    content: str | None = None
    after: int = 1
    seconds: float = 60.0


@dataclass(frozen=True)
class TruncatedJson:
    """Answer with JSON cut in half: what a model emits when it hits its token limit.

    The whole JSON is ``instance_from_schema(request["format"])`` when the
    request has a schema, else ``obj``; ``done_reason`` is "length" like Ollama's.
    """

    obj: Any = field(default_factory=lambda: {"answer": "The dragon sleeps under the mountain."})


@dataclass(frozen=True)
class RawBody:
    """Send these exact bytes: for protocol-level garbage the client must survive."""

    body: str | bytes
    status: int = 200
    content_type: str = "application/json"


EMPTY = Reply("")
"""The model answered nothing at all (it happens, e.g. with a bad template)."""


def in_order(*answers: Any) -> Callable[[dict], Any]:
    """A responder giving ``answers`` one per request; the last one repeats.

    For retry tests: ``fake.responder = in_order(HttpError(500), "recovered")``.
    """
    if not answers:
        raise ValueError("in_order() needs at least one answer")
    remaining = list(answers)

    def responder(_request: dict) -> Any:
        return remaining.pop(0) if len(remaining) > 1 else remaining[0]

    return responder


# --------------------------------------------------------------------------
# Default, deterministic answers.
# --------------------------------------------------------------------------


def instance_from_schema(schema: dict, defs: dict | None = None) -> Any:
    """Build a JSON value valid against a *simple* JSON schema.

    Covers what pydantic's ``model_json_schema()`` produces for plain models:
    objects (every listed property is filled in), strings, integers, numbers,
    booleans, arrays, enums/const, ``anyOf``/``oneOf``/``allOf`` (first branch)
    and ``$ref`` into ``$defs``. Patterns and formats are not honoured.
    """
    defs = schema.get("$defs", defs or {})
    if "$ref" in schema:
        return instance_from_schema(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            branches = [b for b in schema[key] if b.get("type") != "null"] or schema[key]
            return instance_from_schema(branches[0], defs)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: instance_from_schema(sub, defs) for name, sub in props.items()}
    if kind == "array":
        count = max(schema.get("minItems", 1), 1)
        return [instance_from_schema(schema.get("items", {"type": "string"}), defs) for _ in range(count)]
    if kind == "string":
        text = "fake text".ljust(schema.get("minLength", 0), "x")
        return text[: schema["maxLength"]] if "maxLength" in schema else text
    if kind in ("integer", "number"):
        value = schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1)
        value = min(value, schema.get("maximum", value))
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return True
    return None


def _question(request: dict) -> str:
    """The last user message of a chat request."""
    for message in reversed(request.get("messages") or []):
        if message.get("role") == "user":
            return message.get("content") or ""
    return ""


def default_responder(request: dict) -> str:
    """Deterministic answer: schema-valid JSON when ``format`` is a schema, else an echo."""
    fmt = request.get("format")
    if isinstance(fmt, dict):
        return json.dumps(instance_from_schema(fmt))
    if fmt == "json":
        return json.dumps({"answer": f"Fake answer to: {_question(request)}"})
    return f"Fake answer to: {_question(request)}"


_PIECES = re.compile(r"\d|[^\W\d_]+|\n+|[^\S\n]+|.", re.S)


def tokenize(text: str) -> list[str]:
    """The fake model's tokens: a word in pieces of four characters, each digit, each other visible
    character, each run of line breaks; spaces are not tokens. They join back to the text less its spaces."""
    tokens: list[str] = []
    for piece in _PIECES.findall(text):
        if piece[0].isspace() and piece[0] != "\n":
            continue
        if piece[0].isalpha() and len(piece) > 4:
            tokens += [piece[i : i + 4] for i in range(0, len(piece), 4)]
        else:
            tokens.append(piece)
    return tokens


def render_chatml(messages: list[dict]) -> list[list[str]]:
    """Each message's tokens in ChatML framing (``<|im_start|>role\\n … <|im_end|>\\n``)."""
    return [
        ["<|im_start|>", str(m.get("role", "user")), "\n", *tokenize(m.get("content") or ""), "<|im_end|>", "\n"]
        for m in messages
    ]


REPLY_OPENING = ["<|im_start|>", "assistant", "\n"]


_FRAGMENT_HEADER = re.compile(r"^\[(?P<label>[^\]\n]+)\] \(")
_FIRST_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def cited_responder(request: dict) -> Any:
    """A model that follows the Oracle's citation rules, deterministically, from what it was sent.

    Annotations: the passage's first 14 words. Reranking: candidates 1 to 8, the fused order.
    Answers: for each fragment of the "in full" block, its first sentence of four words or more,
    quoted, followed by the fragment's label in brackets; "The notes do not say." when it got none.
    Anything else asking for a schema gets a schema-valid value.
    """
    fmt = request.get("format")
    user = _question(request)
    if isinstance(fmt, dict):
        properties = fmt.get("properties", {})
        if "summary" in properties:
            passage = user.split("\n\n", 2)[1] if user.count("\n\n") >= 2 else user
            return {"summary": " ".join(passage.split()[:14]), "entities": []}
        if "best" in properties:
            return {"best": list(range(1, 9))}
        return instance_from_schema(fmt)
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


def split_tokens(content: str) -> list[str]:
    """Split text into stream chunks shaped like model tokens (" word"); they join back exactly."""
    return re.findall(r"\s*\S+|\s+", content)


# --------------------------------------------------------------------------
# Models and recorded requests.
# --------------------------------------------------------------------------


@dataclass
class FakeModel:
    """What ``/api/show`` and ``/api/tags`` report about one installed model."""

    name: str
    family: str = "qwen2"
    context_length: int = 32768
    parameter_size: str = "14.8B"
    quantization_level: str = "Q4_K_M"
    parameters: str = 'stop "<|im_start|>"\nstop "<|im_end|>"'
    load_seconds: float = 0.0  # how long a (re)load takes; the first call per num_ctx waits for it
    template: str = "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}{{ .Prompt }}"

    def details(self) -> dict:
        return {
            "parent_model": "",
            "format": "gguf",
            "family": self.family,
            "families": [self.family],
            "parameter_size": self.parameter_size,
            "quantization_level": self.quantization_level,
        }

    def digest(self) -> str:
        return hashlib.sha256(self.name.encode()).hexdigest()


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
    """One request the fake received; ``body`` is the parsed JSON (None for GET); ``served`` says
    how a chat request was served (None for other endpoints and refused requests)."""

    path: str
    body: Any
    served: Served | None = None


def _full_name(model: str) -> str:
    """Ollama resolves a model name without a tag to ``:latest``."""
    return model if ":" in model else f"{model}:latest"


def _seconds(keep_alive: Any) -> float | None:
    """Ollama's keep_alive as seconds: a number of seconds, or a duration such as "30m"; None: the default."""
    if keep_alive is None:
        return None
    if isinstance(keep_alive, (int, float)):
        return float(keep_alive)
    match = re.fullmatch(r"\s*(-?[\d.]+)\s*(ms|s|m|h)?\s*", str(keep_alive))
    if not match:
        return None
    return float(match.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]


def _cancelling() -> bool:
    """Whether the running task itself is being cancelled (not only something it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


# --------------------------------------------------------------------------
# The server.
# --------------------------------------------------------------------------


class FakeOllama:
    """A scripted Ollama on 127.0.0.1; async context manager, or run in a thread.

    ``responder(request_json)`` decides chat answers. It may
    return a ``str``, a ``dict``/``list`` (sent as its JSON text), a directive
    (``Reply``, ``Delay``, ``HttpError``, ``ModelNotFound``, ``CutStream``, ``Stall``,
    ``TruncatedJson``, ``RawBody``) or an awaitable of those. If it raises, the
    client gets HTTP 500 naming the exception, so a broken script is visible.
    Requests for a model not in ``models`` get 404 before the responder runs.
    ``slow``: seconds every chat reply waits before its first byte
    (the load call aside), the slow mode.
    """

    def __init__(
        self,
        models: list[str | FakeModel] | tuple[str | FakeModel, ...] = ("qwen2.5:14b",),
        responder: Callable[[dict], Any] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        slow: float = 0.0,
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
        self.slow = slow  # seconds before the first byte of every reply (0: at once)
        self.abandoned: list[dict] = []  # bodies of chat requests whose client left before the end
        self._loading: dict[tuple[str, int], asyncio.Future] = {}
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None
        self._thread: tuple[asyncio.AbstractEventLoop, threading.Thread] | None = None

    # ----- lifecycle ------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL to give ``ollama.AsyncClient(host=...)``; valid once started."""
        if not self.port:
            raise RuntimeError("FakeOllama is not started")
        return f"http://{self.host}:{self.port}"

    async def start(self) -> FakeOllama:
        """Listen. A restart reuses the port of the first start, so clients can reconnect."""
        app = web.Application()
        app.router.add_get("/", self._root)
        app.router.add_get("/api/version", self._version)
        app.router.add_get("/api/tags", self._tags)
        app.router.add_post("/api/show", self._show)
        app.router.add_get("/api/ps", self._ps)
        app.router.add_post("/api/chat", self._chat)
        self._runner, self.port = await serve(app, self.host, self.port)  # a timed-out client stops a Delay
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
        thread = threading.Thread(target=loop.run_forever, name="fake-ollama", daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.start(), loop).result(timeout=10)
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
            raise
        self._thread = (loop, thread)
        return self

    def stop_thread(self) -> None:
        """Undo ``run_in_thread``; calling ``run_in_thread`` again restarts on the same port."""
        if self._thread is None:
            return
        loop, thread = self._thread
        self._thread = None
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

    # ----- scripting and inspection helpers --------------------------------

    def add_model(self, model: str | FakeModel) -> None:
        """Install a model (simulates ``ollama pull``)."""
        model = model if isinstance(model, FakeModel) else FakeModel(model)
        model = replace(model, name=_full_name(model.name))
        self.models[model.name] = model

    def remove_model(self, name: str) -> None:
        """Uninstall a model (simulates ``ollama rm``)."""
        self.models.pop(_full_name(name), None)

    def requests_to(self, path: str) -> list[Any]:
        """Bodies of the requests received on ``path``, oldest first."""
        return [r.body for r in self.requests if r.path == path]

    def chat_requests(self) -> list[dict]:
        return self.requests_to("/api/chat")

    def served(self) -> list[Served]:
        """How each chat request was served, oldest first."""
        return [r.served for r in self.requests if r.served is not None]

    def reset(self) -> None:
        """Forget recorded requests and go back to the default responder, at full speed."""
        self.requests.clear()
        self.truncations.clear()
        self.loads.clear()
        self.aborted_loads.clear()
        self.abandoned.clear()
        self.slow = 0.0
        self.responder = default_responder

    # ----- simple endpoints -----------------------------------------------

    async def _record(self, request: web.Request) -> Any:
        body = None
        if request.method == "POST":
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = raw.decode(errors="replace")
        self.requests.append(RecordedRequest(request.path, body))
        return body

    def _find_model(self, body: Any) -> FakeModel | web.Response:
        """The requested model, or the error response Ollama would send."""
        if not isinstance(body, dict):
            return _error(400, "invalid request body")
        if not body.get("model"):
            return _error(400, "model is required")
        model = self.models.get(_full_name(body["model"]))
        return model or _error(404, f"model '{body['model']}' not found")

    async def _root(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.Response(text="Ollama is running")

    async def _version(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response({"version": FAKE_VERSION})

    async def _tags(self, request: web.Request) -> web.Response:
        await self._record(request)
        models = [
            {
                "name": m.name,
                "model": m.name,
                "modified_at": "2025-01-01T00:00:00Z",
                "size": 9_000_000_000,
                "digest": m.digest(),
                "details": m.details(),
            }
            for m in self.models.values()
        ]
        return web.json_response({"models": models})

    async def _show(self, request: web.Request) -> web.Response:
        model = self._find_model(await self._record(request))
        if isinstance(model, web.Response):
            return model
        return web.json_response(
            {
                "modelfile": f"# Modelfile generated by \"ollama show\"\nFROM {model.name}\n",
                "parameters": model.parameters,
                "template": model.template,
                "details": model.details(),
                "model_info": {
                    "general.architecture": model.family,
                    f"{model.family}.context_length": model.context_length,
                },
                "capabilities": ["completion"],
                "modified_at": "2025-01-01T00:00:00Z",
            }
        )

    async def _ps(self, request: web.Request) -> web.Response:
        """Loaded models, as ``GET /api/ps`` lists them, with the context each was loaded with."""
        await self._record(request)
        now = time.time()
        running = []
        for name, (num_ctx, expiry) in list(self.loaded.items()):
            if expiry is not None and expiry <= now:
                del self.loaded[name]
                continue
            model = self.models.get(name)
            if model is None:
                continue
            expires = datetime.fromtimestamp(expiry if expiry is not None else now + 10**9, UTC)
            running.append({
                "name": name, "model": name, "size": 9_000_000_000, "digest": model.digest(),
                "details": model.details(), "expires_at": expires.isoformat().replace("+00:00", "Z"),
                "size_vram": 9_000_000_000, "context_length": num_ctx,
            })
        return web.json_response({"models": running})

    # ----- chat -----------------------------------------------------------

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._record(request)
        model = self._find_model(body)
        if isinstance(model, web.Response):
            return model
        position = len(self.requests) - 1
        try:
            served = await self._load(model, body)
            self.requests[position] = self.requests[position]._replace(served=served)
            if body.get("messages") == []:
                answer: Any = Reply("", done_reason="load")  # Ollama's "load the model" call
            else:
                if self.slow:  # nothing at all, headers included, before the first token
                    await asyncio.sleep(self.slow)
                answer = await self._ask(self.responder, body)
            while isinstance(answer, Delay):
                await asyncio.sleep(answer.seconds)
                answer = default_responder(body) if answer.then is None else answer.then
            return await self._send(request, body, answer)
        except asyncio.CancelledError:  # the client went away before the reply's end
            self.abandoned.append(body)
            raise

    async def _load(self, model: FakeModel, body: dict) -> Served:
        """Load the model's runner for this request's window if it is not, then fit the prompt to it."""
        options = body.get("options") or {}
        num_ctx = min(int(options.get("num_ctx") or DEFAULT_NUM_CTX), model.context_length)
        reload = self.loaded.get(model.name, (None, None))[0] != num_ctx
        if reload:
            await self._wait_for_load((model.name, num_ctx), model.load_seconds)
        keep_alive = body.get("keep_alive")
        seconds = _seconds(keep_alive)
        if seconds == 0:
            self.loaded.pop(model.name, None)
        else:
            self.loaded[model.name] = (num_ctx, None if seconds is None or seconds < 0 else time.time() + seconds)
        served = self.fit(model.name, body, num_ctx)
        served.loaded = reload
        return served

    async def _wait_for_load(self, key: tuple[str, int], seconds: float) -> None:
        """One load per (model, num_ctx), however many requests wait for it, belonging to the request
        that started it: if that one's client leaves first, the load is aborted and a request still
        waiting starts it again."""
        while True:
            loading = self._loading.get(key)
            owner = loading is None
            if owner:
                self.loads.append(key)
                loading = self._loading[key] = asyncio.ensure_future(asyncio.sleep(seconds))
            try:
                await asyncio.shield(loading)
            except asyncio.CancelledError:
                if owner and not loading.done():  # this request's client went away mid-load
                    loading.cancel()
                    self._loading.pop(key, None)
                    self.aborted_loads.append(key)
                    log.warning("client connection closed before server finished loading, aborting load")
                    raise
                if loading.cancelled() and not _cancelling():  # another's load was aborted: start again
                    continue
                raise
            self._loading.pop(key, None)
            return

    def fit(self, model: str, body: dict, num_ctx: int) -> Served:
        """What the model reads of a request served with ``num_ctx`` tokens (see the module's docstring)."""
        options = body.get("options") or {}
        num_predict = int(options.get("num_predict", -1))
        num_keep = int(options.get("num_keep", DEFAULT_NUM_KEEP))
        messages = list(body.get("messages") or [])
        rendered = render_chatml(messages)
        total = sum(map(len, rendered)) + len(REPLY_OPENING)
        start = 0
        # chatPrompt: drop whole messages from the front, keep system messages and the last one.
        while total > num_ctx and start < len(messages) - 1:
            if messages[start].get("role") != "system":
                total -= len(rendered[start])
                rendered[start] = []
            start += 1
        dropped = sum(1 for m, r in zip(messages, rendered, strict=False) if not r and m.get("role") != "system")
        tokens = [t for r in rendered for t in r] + REPLY_OPENING
        prompt_tokens = sum(len(r) for r in render_chatml(messages)) + len(REPLY_OPENING)
        truncated = None
        if len(tokens) > num_ctx:
            keep = min(num_keep, num_ctx - 1)
            discard = len(tokens) - num_ctx
            cut = tokens[:keep] + tokens[keep + discard :]
            truncated = {"limit": num_ctx, "prompt": len(tokens), "keep": keep, "new": len(cut)}
            log.warning("truncating input prompt limit=%d prompt=%d keep=%d new=%d", num_ctx, len(tokens), keep, len(cut))
            self.truncations.append(truncated)
            tokens = cut
        return Served(
            model=body.get("model", model), num_ctx=num_ctx, num_predict=num_predict, num_keep=num_keep,
            prompt_tokens=prompt_tokens, evaluated=len(tokens), dropped_messages=dropped,
            truncated=truncated, seen=" ".join(tokens),
        )

    @staticmethod
    async def _ask(responder: Callable[[dict], Any], body: dict) -> Any:
        try:
            answer = responder(body)
            return await answer if inspect.isawaitable(answer) else answer
        except Exception as exc:  # a broken test script should fail loudly, client-side
            return HttpError(500, f"fake responder failed: {exc!r}")

    async def _send(self, request: web.Request, body: dict, answer: Any) -> web.StreamResponse:
        if isinstance(answer, HttpError):
            return _error(answer.status, answer.error)
        if isinstance(answer, ModelNotFound):
            return _error(404, f"model '{answer.model or body['model']}' not found")
        if isinstance(answer, RawBody):
            return web.Response(body=answer.body, status=answer.status, content_type=answer.content_type)
        if isinstance(answer, TruncatedJson):
            fmt = body.get("format")
            whole = json.dumps(instance_from_schema(fmt) if isinstance(fmt, dict) else answer.obj)
            answer = Reply(whole[: len(whole) // 2], done_reason="length")
        cut_after = None
        if isinstance(answer, CutStream):
            cut_after = answer.after
            answer = Reply(default_responder(body) if answer.content is None else answer.content)
        stall: tuple[int, float] | None = None
        if isinstance(answer, Stall):
            stall = (answer.after, answer.seconds)
            answer = Reply(default_responder(body) if answer.content is None else answer.content)
            if not body.get("stream", True):
                await asyncio.sleep(stall[1])
        if isinstance(answer, str):
            answer = Reply(answer)
        elif isinstance(answer, (dict, list)):
            answer = Reply(json.dumps(answer))
        if not isinstance(answer, Reply):
            return _error(500, f"fake responder returned an unknown answer: {answer!r}")
        limit = int((body.get("options") or {}).get("num_predict", -1))
        if 0 <= limit < len(split_tokens(answer.content)):  # the reply's budget: cut, as the runner stops
            answer = replace(answer, content="".join(split_tokens(answer.content)[:limit]), done_reason="length")

        chunks, final = self._frames(body, answer, self._served_for(body))
        if body.get("stream", True):
            return await self._stream(request, chunks, final, answer.chunk_delay, cut_after, stall)
        whole = dict(final) | {"message": self._message(answer.content)}
        if cut_after is None:
            return web.json_response(whole)
        return await self._cut(request, json.dumps(whole).encode(), "application/json")

    @staticmethod
    def _message(content: str) -> dict:
        return {"role": "assistant", "content": content}

    def _served_for(self, body: dict) -> Served | None:
        for recorded in reversed(self.requests):
            if recorded.body is body:
                return recorded.served
        return None

    def _frames(self, body: dict, reply: Reply, served: Served | None = None) -> tuple[list[dict], dict]:
        """The streamed lines of an answer: content chunks, then the final ``done`` line."""
        model, created = body["model"], _now()
        chunks = [{"model": model, "created_at": created, "message": self._message(t), "done": False}
                  for t in split_tokens(reply.content)]
        prompt_tokens = served.evaluated if served else 0
        load_ns = int(1_000_000_000 * self.models[_full_name(model)].load_seconds) if served and served.loaded else 0
        final = {
            "model": model,
            "created_at": created,
            "message": self._message(""),
            "done": True,
            "done_reason": reply.done_reason,
            "total_duration": 1_000_000 * (len(chunks) + 10),
            "load_duration": (load_ns or 1_000_000) if served and served.loaded else 100_000,
            "prompt_eval_count": prompt_tokens,
            "prompt_eval_duration": 1_000_000 * 4,
            "eval_count": len(chunks),
            "eval_duration": 1_000_000 * len(chunks),
        }
        return chunks, final

    @staticmethod
    async def _stream(
        request: web.Request, chunks: list[dict], final: dict, delay: float, cut_after: int | None,
        stall: tuple[int, float] | None = None,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        lines = chunks if cut_after is None else chunks[:cut_after]
        for number, chunk in enumerate(lines, 1):
            await response.write(json.dumps(chunk).encode() + b"\n")
            if delay:
                await asyncio.sleep(delay)
            if stall is not None and number == stall[0]:
                await asyncio.sleep(stall[1])
        if cut_after is not None:
            request.transport.close()  # ends the chunked body early: httpx sees an incomplete read
            return response
        await response.write(json.dumps(final).encode() + b"\n")
        await response.write_eof()
        return response

    @staticmethod
    async def _cut(request: web.Request, data: bytes, content_type: str) -> web.StreamResponse:
        """Promise ``len(data)`` bytes, send half, hang up."""
        response = web.StreamResponse(headers={"Content-Type": content_type})
        response.content_length = len(data)
        await response.prepare(request)
        await response.write(data[: len(data) // 2])
        request.transport.close()
        return response


# --------------------------------------------------------------------------
# CLI: python -m testing.ollama_server --port N
# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGINT/SIGTERM; print the URL first so a parent process can read it."""
    parser = argparse.ArgumentParser(description="Fake Ollama server for tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--model", action="append", help="installed model (repeatable); default qwen2.5:14b")
    parser.add_argument("--reply", help="fixed text for every answer (default: echo, or JSON for a schema)")
    parser.add_argument("--cited", action="store_true", help="answer with citations from the context sent "
                        "(cited_responder): for `oracle eval --answers` without a model")
    parser.add_argument("--responder", metavar="MODULE:FUNCTION",
                        help="answer with this function of a request (a benchmark's own, in a process of its own)")
    parser.add_argument("--slow", type=float, default=0.0, metavar="SECONDS",
                        help="send nothing for SECONDS before each reply, as an overloaded or CPU-only Ollama")
    args = parser.parse_args(argv)

    async def serve() -> None:
        fake = FakeOllama(models=args.model or ("qwen2.5:14b",), host=args.host, port=args.port, slow=args.slow)
        if args.reply is not None:
            fake.responder = lambda _request: args.reply
        elif args.cited:
            fake.responder = cited_responder
        elif args.responder:
            module, _, name = args.responder.partition(":")
            fake.responder = getattr(importlib.import_module(module), name)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with fake:
            print(fake.url, flush=True)
            await stop.wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()

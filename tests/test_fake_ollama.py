"""The fake Ollama server speaks the protocol the real ``ollama`` client expects.

Every test drives the unmodified ``ollama.AsyncClient`` (or ``ollama.Client``)
over a real socket, so the faults scripted here surface as exactly the
exceptions the Oracle will meet in production.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

import httpx
import ollama
import pydantic
import pytest
import pytest_asyncio

from tests.fakes.ollama_server import (
    EMPTY,
    CutStream,
    Delay,
    FakeModel,
    FakeOllama,
    HttpError,
    ModelNotFound,
    RawBody,
    RecordedRequest,
    Reply,
    TruncatedJson,
    in_order,
)

MODEL = "qwen2.5:14b"
ASK = [{"role": "user", "content": "Who is Vex?"}]


# loop_scope="function": the project's default fixture loop is the session loop, and a
# server started there would never run while a function-scoped test loop is running.
@pytest_asyncio.fixture(loop_scope="function")
async def fake():
    async with FakeOllama(models=[MODEL]) as server:
        yield server


@pytest_asyncio.fixture(loop_scope="function")
async def client(fake):
    async with ollama.AsyncClient(host=fake.url) as c:
        yield c


@pytest.mark.asyncio
async def test_non_stream_chat_returns_scripted_content(fake, client):
    fake.responder = lambda request: "The dragon sleeps."

    response = await client.chat(model=MODEL, messages=ASK)

    assert response.message.role == "assistant"
    assert response.message.content == "The dragon sleeps."
    assert response.model == MODEL
    assert response.done is True
    assert response.done_reason == "stop"
    assert response.eval_count == 3


@pytest.mark.asyncio
async def test_default_answer_echoes_the_question(client):
    response = await client.chat(model=MODEL, messages=ASK)

    assert response.message.content == "Fake answer to: Who is Vex?"


@pytest.mark.asyncio
async def test_streamed_chunks_join_to_the_content(fake, client):
    fake.responder = lambda request: "The dragon sleeps under the mountain."

    parts = [part async for part in await client.chat(model=MODEL, messages=ASK, stream=True)]

    contents = [p.message.content for p in parts]
    assert contents == ["The", " dragon", " sleeps", " under", " the", " mountain.", ""]
    assert "".join(contents) == "The dragon sleeps under the mountain."
    assert all(p.message.role == "assistant" for p in parts)
    assert [p.done for p in parts] == [False] * 6 + [True]
    assert parts[-1].done_reason == "stop"
    assert parts[-1].eval_count == 6
    assert parts[-1].total_duration == 16_000_000


class Source(pydantic.BaseModel):
    note: str
    line: int


class Answer(pydantic.BaseModel):
    verdict: Literal["known", "unknown"]
    text: str
    confidence: float | None = None
    sources: list[Source]


@pytest.mark.asyncio
async def test_schema_format_gets_schema_valid_json(client):
    response = await client.chat(model=MODEL, messages=ASK, format=Answer.model_json_schema())

    answer = Answer.model_validate_json(response.message.content)
    expected = Answer(verdict="known", text="fake text", confidence=0.0, sources=[Source(note="fake text", line=0)])
    assert answer == expected


@pytest.mark.asyncio
async def test_unknown_model_is_a_404_response_error(client):
    with pytest.raises(ollama.ResponseError) as caught:
        await client.chat(model="llama9:7b", messages=ASK)

    assert caught.value.status_code == 404
    assert caught.value.error == "model 'llama9:7b' not found"


@pytest.mark.asyncio
async def test_model_not_found_directive_and_streamed_404(fake, client):
    fake.responder = lambda request: ModelNotFound()

    with pytest.raises(ollama.ResponseError) as caught:
        async for _ in await client.chat(model=MODEL, messages=ASK, stream=True):
            pass

    assert (caught.value.status_code, caught.value.error) == (404, f"model '{MODEL}' not found")


@pytest.mark.asyncio
async def test_http_500_is_a_response_error(fake, client):
    fake.responder = lambda request: HttpError(500, "CUDA out of memory")

    with pytest.raises(ollama.ResponseError) as caught:
        await client.chat(model=MODEL, messages=ASK)

    assert (caught.value.status_code, caught.value.error) == (500, "CUDA out of memory")


@pytest.mark.asyncio
async def test_a_broken_responder_becomes_a_visible_500(fake, client):
    fake.responder = lambda request: 1 / 0

    with pytest.raises(ollama.ResponseError) as caught:
        await client.chat(model=MODEL, messages=ASK)

    assert caught.value.status_code == 500
    assert caught.value.error == "fake responder failed: ZeroDivisionError('division by zero')"


@pytest.mark.asyncio
async def test_delay_beyond_the_client_timeout_raises_a_timeout(fake):
    fake.responder = lambda request: Delay(5, then="too late")
    started = time.monotonic()

    async with ollama.AsyncClient(host=fake.url, timeout=0.5) as slow_client:
        with pytest.raises(httpx.ReadTimeout):
            await slow_client.chat(model=MODEL, messages=ASK)

    assert time.monotonic() - started < 2


@pytest.mark.asyncio
async def test_delay_within_the_timeout_answers(fake, client):
    fake.responder = lambda request: Delay(0.05, then="patience")

    response = await client.chat(model=MODEL, messages=ASK)

    assert response.message.content == "patience"


@pytest.mark.asyncio
async def test_cut_stream_raises_after_the_first_chunks(fake, client):
    fake.responder = lambda request: CutStream("one two three four", after=2)
    received = []

    with pytest.raises(httpx.RemoteProtocolError):
        async for part in await client.chat(model=MODEL, messages=ASK, stream=True):
            received.append(part.message.content)

    assert received == ["one", " two"]


@pytest.mark.asyncio
async def test_cut_non_stream_body_raises(fake, client):
    fake.responder = lambda request: CutStream("one two three four")

    with pytest.raises(httpx.RemoteProtocolError):
        await client.chat(model=MODEL, messages=ASK)


@pytest.mark.asyncio
async def test_truncated_json_content(fake, client):
    fake.responder = lambda request: TruncatedJson()

    response = await client.chat(model=MODEL, messages=ASK, format="json")

    assert response.message.content == '{"answer": "The dragon sl'
    assert response.done_reason == "length"
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.message.content)


@pytest.mark.asyncio
async def test_truncated_json_follows_the_requested_schema(fake, client):
    fake.responder = lambda request: TruncatedJson()

    response = await client.chat(model=MODEL, messages=ASK, format=Source.model_json_schema())

    assert response.message.content == '{"note": "fake t'


@pytest.mark.asyncio
async def test_empty_content_both_modes(fake, client):
    fake.responder = lambda request: EMPTY

    response = await client.chat(model=MODEL, messages=ASK)
    parts = [p async for p in await client.chat(model=MODEL, messages=ASK, stream=True)]

    assert response.message.content == ""
    assert [(p.message.content, p.done) for p in parts] == [("", True)]


@pytest.mark.asyncio
async def test_raw_garbage_body_breaks_json_decoding(fake, client):
    fake.responder = lambda request: RawBody('{"message": {"role": "assis')

    with pytest.raises(json.JSONDecodeError):
        await client.chat(model=MODEL, messages=ASK)


@pytest.mark.asyncio
async def test_dict_answers_are_sent_as_json_text_and_tool_calls_pass_through(fake, client):
    fake.responder = in_order(
        {"verdict": "known"},
        Reply("", tool_calls=[{"function": {"name": "lookup", "arguments": {"q": "Vex"}}}]),
    )

    first = await client.chat(model=MODEL, messages=ASK)
    second = await client.chat(model=MODEL, messages=ASK)

    assert first.message.content == '{"verdict": "known"}'
    assert second.message.tool_calls[0].function.name == "lookup"
    assert second.message.tool_calls[0].function.arguments == {"q": "Vex"}


@pytest.mark.asyncio
async def test_thinking_streams_first_and_chunk_delay_paces_the_stream(fake, client):
    fake.responder = lambda request: Reply("Yes.", thinking="Let me see.", chunk_delay=0.05)
    started = time.monotonic()

    parts = [p async for p in await client.chat(model=MODEL, messages=ASK, stream=True, think=True)]

    assert [(p.message.thinking, p.message.content) for p in parts] == [
        ("Let", ""), (" me", ""), (" see.", ""), (None, "Yes."), (None, ""),
    ]
    assert time.monotonic() - started >= 0.2
    assert fake.chat_requests()[0]["think"] is True


@pytest.mark.asyncio
async def test_in_order_scripts_a_retry(fake, client):
    fake.responder = in_order(HttpError(503, "busy"), "recovered")

    with pytest.raises(ollama.ResponseError):
        await client.chat(model=MODEL, messages=ASK)
    assert (await client.chat(model=MODEL, messages=ASK)).message.content == "recovered"
    assert (await client.chat(model=MODEL, messages=ASK)).message.content == "recovered"


@pytest.mark.asyncio
async def test_empty_messages_load_the_model(client):
    response = await client.chat(model=MODEL, messages=[])

    assert (response.message.content, response.done_reason) == ("", "load")


@pytest.mark.asyncio
async def test_generate_stream_and_non_stream(fake, client):
    fake.responder = lambda request: f"echo {request['prompt']}"

    whole = await client.generate(model=MODEL, prompt="ping")
    parts = [p async for p in await client.generate(model=MODEL, prompt="ping", stream=True)]

    assert whole.response == "echo ping"
    assert [p.response for p in parts] == ["echo", " ping", ""]
    assert parts[-1].done is True


@pytest.mark.asyncio
async def test_show_reports_model_info_and_404s_unknown_models(fake, client):
    fake.add_model(FakeModel("llama3.1:8b", family="llama", context_length=131072, parameter_size="8.0B"))

    qwen = await client.show(MODEL)
    llama = await client.show("llama3.1:8b")
    with pytest.raises(ollama.ResponseError) as caught:
        await client.show("nope")

    assert qwen.modelinfo == {"general.architecture": "qwen2", "qwen2.context_length": 32768}
    assert (qwen.details.format, qwen.details.family) == ("gguf", "qwen2")
    assert (qwen.details.parameter_size, qwen.details.quantization_level) == ("14.8B", "Q4_K_M")
    assert qwen.template and qwen.modelfile and qwen.parameters
    assert llama.modelinfo == {"general.architecture": "llama", "llama.context_length": 131072}
    assert (caught.value.status_code, caught.value.error) == (404, "model 'nope' not found")


@pytest.mark.asyncio
async def test_tags_version_and_root(fake, client):
    fake.add_model("nomic-embed-text")

    listed = await client.list()
    async with httpx.AsyncClient(base_url=fake.url) as http:
        version = (await http.get("/api/version")).json()
        root = await http.get("/")

    assert [m.model for m in listed.models] == [MODEL, "nomic-embed-text:latest"]
    assert listed.models[0].details.family == "qwen2"
    assert version == {"version": "0.12.6"}
    assert (root.status_code, root.text) == (200, "Ollama is running")


@pytest.mark.asyncio
async def test_embed_is_deterministic(client):
    first = await client.embed(model=MODEL, input=["a", "b"])
    again = await client.embed(model=MODEL, input="a")

    assert len(first.embeddings) == 2
    assert len(first.embeddings[0]) == 8
    assert first.embeddings[0] == again.embeddings[0]
    assert first.embeddings[0] != first.embeddings[1]


@pytest.mark.asyncio
async def test_requests_are_recorded_with_their_bodies(fake, client):
    await client.chat(model=MODEL, messages=ASK, options={"temperature": 0}, format="json")
    await client.show(MODEL)

    assert fake.requests == [
        RecordedRequest(
            "/api/chat",
            {
                "model": MODEL,
                "messages": ASK,
                "tools": [],
                "stream": False,
                "format": "json",
                "options": {"temperature": 0},
            },
        ),
        RecordedRequest("/api/show", {"model": MODEL}),
    ]
    assert fake.chat_requests() == [fake.requests[0].body]
    fake.reset()
    assert fake.requests == []


@pytest.mark.asyncio
async def test_stop_refuses_connections_and_restart_reuses_the_port(fake, client):
    port = fake.port
    await fake.stop()

    with pytest.raises(ConnectionError):
        await client.chat(model=MODEL, messages=ASK)

    await fake.start()
    assert fake.port == port
    assert (await client.chat(model=MODEL, messages=ASK)).message.content == "Fake answer to: Who is Vex?"


@pytest.mark.asyncio
async def test_a_closed_port_is_connection_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async with ollama.AsyncClient(host=f"http://127.0.0.1:{port}") as c:
        with pytest.raises(ConnectionError):
            await c.chat(model=MODEL, messages=ASK)


def test_sync_client_against_the_threaded_fake():
    with FakeOllama(responder=lambda request: "from a thread") as server, ollama.Client(host=server.url) as c:
        assert c.chat(model=MODEL, messages=ASK).message.content == "from a thread"
        assert len(server.chat_requests()) == 1

        server.stop_thread()
        with pytest.raises(ConnectionError):
            c.chat(model=MODEL, messages=ASK)

        server.run_in_thread()  # restart, same port
        assert c.chat(model=MODEL, messages=ASK).message.content == "from a thread"


def test_cli_entry_point_prints_its_url_and_serves():
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.ollama_server", "--port", "0", "--reply", "from the CLI"],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        text=True,
    )
    with process, process.stdout:
        try:
            url = process.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:")
            with ollama.Client(host=url, timeout=5) as c:
                assert c.chat(model=MODEL, messages=ASK).message.content == "from the CLI"
        finally:
            process.terminate()
            assert process.wait(timeout=5) == 0

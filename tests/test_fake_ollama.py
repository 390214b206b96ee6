"""The fake Ollama server speaks the protocol the real ``ollama`` client expects.

Every test drives the unmodified ``ollama.AsyncClient`` (or ``ollama.Client``)
over a real socket, so the faults scripted here surface as exactly the
exceptions the Oracle will meet in production.
"""

from __future__ import annotations

import asyncio
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

from testing.ollama_server import (
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
    Stall,
    TruncatedJson,
    in_order,
    render_chatml,
    tokenize,
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
async def test_dict_answers_are_sent_as_json_text(fake, client):
    fake.responder = lambda request: {"verdict": "known"}

    first = await client.chat(model=MODEL, messages=ASK)

    assert first.message.content == '{"verdict": "known"}'


@pytest.mark.asyncio
async def test_chunk_delay_paces_the_stream(fake, client):
    fake.responder = lambda request: Reply("Yes, at once.", chunk_delay=0.05)
    started = time.monotonic()

    parts = [p async for p in await client.chat(model=MODEL, messages=ASK, stream=True)]

    assert [p.message.content for p in parts] == ["Yes,", " at", " once.", ""]
    assert time.monotonic() - started >= 0.15


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
async def test_a_route_the_oracle_never_calls_is_refused(fake, client):
    with pytest.raises(ollama.ResponseError) as caught:
        await client.list()
    async with httpx.AsyncClient(base_url=fake.url) as http:
        statuses = [(await http.get(path)).status_code for path in ("/", "/api/version")]
        statuses.append((await http.post("/api/generate", json={"model": MODEL, "prompt": "hi"})).status_code)

    assert [caught.value.status_code, *statuses] == [404, 404, 404, 404]


@pytest.mark.asyncio
async def test_requests_are_recorded_with_their_bodies(fake, client):
    await client.chat(model=MODEL, messages=ASK, options={"temperature": 0}, format="json")
    await client.show(MODEL)

    assert [(r.path, r.body) for r in fake.requests] == [
        (
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
        ("/api/show", {"model": MODEL}),
    ]
    assert fake.requests[1] == RecordedRequest("/api/show", {"model": MODEL})  # nothing served
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
        [sys.executable, "-m", "testing.ollama_server", "--port", "0", "--reply", "from the CLI"],
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


# ---------------------------------------------------------------------------------------------
# The context window, served as the real server serves it


def words(n: int, start: int = 0) -> str:
    """`n` distinct one-token words (four letters: "w" and three more), numbered from `start`."""
    abc = "abcdefghijklmnopqrstuvwxyz"
    return " ".join("w" + abc[i // 676 % 26] + abc[i // 26 % 26] + abc[i % 26] for i in range(start, start + n))


def test_the_fake_tokenizer_is_deterministic_and_simple():
    assert tokenize("Hello  Aldercott,\n\nthe 1200 gold!") == [
        "Hell", "o", "Alde", "rcot", "t", ",", "\n\n", "the", "1", "2", "0", "0", "gold", "!",
    ]
    assert [len(m) for m in render_chatml([{"role": "system", "content": "a b"}])] == [7]


@pytest.mark.asyncio
async def test_without_num_ctx_a_long_prompt_is_cut_from_the_front(fake, client, caplog):
    system = "RULE " + words(100)
    question = words(3000, start=100)
    await client.chat(model=MODEL, messages=[{"role": "system", "content": system}, {"role": "user", "content": question}])

    served = fake.served()[0]
    total = 3 + 1 + 100 + 2 + 3 + 3000 + 2 + 3  # framing, "RULE", the words, the reply's opening
    assert (served.num_ctx, served.prompt_tokens) == (2048, total)
    assert served.truncated == {"limit": 2048, "prompt": total, "keep": 4, "new": 2048}
    assert served.evaluated == 2048
    # The first four tokens stay; the system prompt after them is gone; the end of the question is kept.
    assert served.seen.startswith("<|im_start|> system \n RULE ")
    assert words(1) not in served.seen
    assert served.seen.endswith(words(1, start=3099) + " <|im_end|> \n <|im_start|> assistant \n")
    assert not served.fits
    assert fake.truncations == [served.truncated]
    assert f"truncating input prompt limit=2048 prompt={total:d} keep=4 new=2048" in caplog.text


@pytest.mark.asyncio
async def test_num_ctx_serves_the_whole_prompt_and_reports_the_counts(fake, client):
    messages = [{"role": "system", "content": "RULE " + words(100)}, {"role": "user", "content": words(3000)}]
    response = await client.chat(model=MODEL, messages=messages, options={"num_ctx": 4096, "num_predict": 256})

    served = fake.served()[0]
    assert served.truncated is None and served.fits
    assert (served.num_ctx, served.num_predict) == (4096, 256)
    assert response.prompt_eval_count == served.prompt_tokens == served.evaluated
    assert response.eval_count == len(response.message.content.split())
    assert fake.truncations == []


@pytest.mark.asyncio
async def test_a_reply_budget_over_the_window_does_not_fit(fake, client):
    await client.chat(model=MODEL, messages=[{"role": "user", "content": words(1900)}],
                      options={"num_ctx": 2048, "num_predict": 512})

    served = fake.served()[0]
    assert served.truncated is None  # the runner admits it, but a long reply would shift the front out
    assert not served.fits


@pytest.mark.asyncio
async def test_old_messages_are_dropped_first_keeping_the_system_and_the_last(fake, client):
    messages = [
        {"role": "system", "content": "RULE"},
        {"role": "user", "content": words(1500)},
        {"role": "assistant", "content": words(300)},
        {"role": "user", "content": words(1000)},
    ]
    await client.chat(model=MODEL, messages=messages, options={"num_ctx": 2048})

    served = fake.served()[0]
    assert (served.dropped_messages, served.truncated) == (1, None)  # the oldest turn alone was enough
    assert served.seen.startswith("<|im_start|> system \n RULE <|im_end|> \n <|im_start|> assistant \n waaa ")


@pytest.mark.asyncio
async def test_a_model_serves_at_most_its_context_length(fake, client):
    fake.add_model(FakeModel("tiny:1b", context_length=1024))

    await client.chat(model="tiny:1b", messages=[{"role": "user", "content": words(1500)}], options={"num_ctx": 8192})

    served = fake.served()[0]
    assert served.num_ctx == 1024
    assert served.truncated["limit"] == 1024


@pytest.mark.asyncio
async def test_the_first_call_loads_and_a_new_num_ctx_reloads(fake, client):
    async def ask(num_ctx):
        return await client.chat(model=MODEL, messages=ASK, options={"num_ctx": num_ctx}, keep_alive="5m")

    first, second, third, fourth = [await ask(n) for n in (4096, 4096, 8192, 8192)]

    assert fake.loads == [(MODEL, 4096), (MODEL, 8192)]
    # The durations the fake reports (set, not timed): a load's, then a loaded model's.
    assert [r.load_duration for r in (first, second, third, fourth)] == [1_000_000, 100_000, 1_000_000, 100_000]
    assert [s.loaded for s in fake.served()] == [True, False, True, False]
    running = await client.ps()
    assert [(m.model, m.context_length) for m in running.models] == [(MODEL, 8192)]


@pytest.mark.asyncio
async def test_keep_alive_zero_unloads_and_ps_lists_nothing(fake, client):
    await client.chat(model=MODEL, messages=[], options={"num_ctx": 4096}, keep_alive="5m")
    assert [m.model for m in (await client.ps()).models] == [MODEL]

    await client.chat(model=MODEL, messages=[], keep_alive=0)

    assert (await client.ps()).models == []


@pytest.mark.asyncio
async def test_every_streamed_line_has_a_message_and_the_last_the_counts(fake):
    fake.responder = lambda request: "one two three"
    async with httpx.AsyncClient() as http:
        body = {"model": MODEL, "messages": ASK, "options": {"num_ctx": 4096}}
        lines = [json.loads(line) for line in (await http.post(f"{fake.url}/api/chat", json=body)).text.splitlines()]

    assert all("message" in line for line in lines)
    assert [line["done"] for line in lines] == [False, False, False, True]
    assert lines[-1]["prompt_eval_count"] == fake.served()[0].evaluated
    assert lines[-1]["eval_count"] == 3
    assert "load_duration" in lines[-1]


@pytest.mark.asyncio
async def test_a_reply_stops_at_num_predict(fake, client):
    fake.responder = lambda request: "one two three four five"

    response = await client.chat(model=MODEL, messages=ASK, options={"num_predict": 3})

    assert (response.message.content, response.done_reason, response.eval_count) == ("one two three", "length", 3)


# ---------------------------------------------------------------------------------------------
# Slow, stalled, and a load whose client leaves


async def _until(check, what: str) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


@pytest.mark.asyncio
async def test_the_slow_mode_sends_nothing_not_even_headers_before_its_time(fake):
    fake.slow = 600
    async with ollama.AsyncClient(host=fake.url, timeout=0.3) as impatient:
        assert (await impatient.chat(model=MODEL, messages=[])).done_reason == "load"  # loading is not slow
        with pytest.raises(httpx.ReadTimeout):
            async for _ in await impatient.chat(model=MODEL, messages=ASK, stream=True):
                raise AssertionError("a line came before the slow mode's time")
    await _until(lambda: fake.abandoned, "the fake saw the client leave")
    assert fake.abandoned == [fake.chat_requests()[1]]

    fake.slow = 0.05  # and after its time, the reply as usual
    async with ollama.AsyncClient(host=fake.url, timeout=5) as patient:
        parts = [p.message.content async for p in await patient.chat(model=MODEL, messages=ASK, stream=True)]
    assert "".join(parts) == "Fake answer to: Who is Vex?"


@pytest.mark.asyncio
async def test_a_stall_stops_the_stream_after_its_chunks_then_sends_the_rest(fake, client):
    fake.responder = lambda request: Stall("one two three four", after=2, seconds=600)
    received = []
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            async for part in await client.chat(model=MODEL, messages=ASK, stream=True):
                received.append(part.message.content)
    assert received == ["one", " two"]

    fake.responder = lambda request: Stall("one two three four", after=2, seconds=0.05)
    parts = [p async for p in await client.chat(model=MODEL, messages=ASK, stream=True)]
    assert ["one", " two", " three", " four", ""] == [p.message.content for p in parts] and parts[-1].done
    assert (await client.chat(model=MODEL, messages=ASK)).message.content == "one two three four"


@pytest.mark.asyncio
async def test_a_load_whose_client_leaves_is_aborted_and_a_request_still_waiting_loads_again(fake):
    fake.add_model(FakeModel(MODEL, load_seconds=1.0))
    options = {"num_ctx": 4096}
    async with (ollama.AsyncClient(host=fake.url, timeout=0.3) as leaving,
                ollama.AsyncClient(host=fake.url, timeout=30) as staying):
        first = asyncio.ensure_future(leaving.chat(model=MODEL, messages=ASK, options=options))
        await _until(lambda: fake.loads, "the first request started the load")
        second = asyncio.ensure_future(staying.chat(model=MODEL, messages=ASK, options=options))
        with pytest.raises(httpx.ReadTimeout):
            await first
        answer = await second
        running = await staying.ps()

    assert answer.message.content == "Fake answer to: Who is Vex?"
    assert (fake.loads, fake.aborted_loads) == ([(MODEL, 4096)] * 2, [(MODEL, 4096)])
    assert [(m.model, m.context_length) for m in running.models] == [(MODEL, 4096)]
    assert [s.loaded for s in fake.served()] == [True]  # the second request's; the first never got one


def test_the_command_line_slow_mode():
    process = subprocess.Popen(
        [sys.executable, "-m", "testing.ollama_server", "--port", "0", "--slow", "600"],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        text=True,
    )
    with process, process.stdout:
        try:
            url = process.stdout.readline().strip()
            with ollama.Client(host=url, timeout=0.5) as c:
                assert c.chat(model=MODEL, messages=[]).done_reason == "load"
                with pytest.raises(httpx.ReadTimeout):
                    c.chat(model=MODEL, messages=ASK)
        finally:
            process.terminate()
            assert process.wait(timeout=5) == 0

"""Every wire API against ScriptedModelServer over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading

import pytest

from picontext.ai.event_stream import AbortSignal
from picontext.ai.providers import Context, StreamOptions
from picontext.ai.stream import complete, stream
from picontext.testing import (
    ScriptedModelServer,
    UnexpectedModelRequest,
    http_error,
    overflow,
    overloaded,
    rate_limit,
    reply,
    server_error,
    text,
    thinking,
    tokens,
    tool_call,
)

APIS = ["openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai"]
KEY = "sk-test-secret-123456"



def ctx(prompt: str = "hi") -> Context:
    return {
        "messages": [
            {"role": "system", "content": "You are terse.", "timestamp": 0},
            {"role": "user", "content": prompt, "timestamp": 1},
        ],
        "tools": [
            {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            }
        ],
    }


def opts(**kw: object) -> StreamOptions:
    return StreamOptions(api_key=KEY, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("api", APIS)
async def test_streaming_text_events_and_result(server: ScriptedModelServer, api: str) -> None:
    server.expect(reply(text("Hello there world"), usage=tokens(1000, 20)))
    model = server.model(api)  # type: ignore[arg-type]
    s = stream(model, ctx(), opts())
    types = [ev["type"] async for ev in s]
    msg = await s.result()
    assert types[0] == "start" and types[-1] == "done"
    assert "text_delta" in types and types.count("text_start") == 1 and types.count("text_end") == 1
    assert msg["content"] == [{"type": "text", "text": "Hello there world"}] or (
        msg["content"][0]["text"] == "Hello there world"
    )
    assert msg["stopReason"] == "stop"
    assert msg["usage"]["input"] == 1000 and msg["usage"]["output"] == 20
    assert msg["usage"]["cost"]["total"] == pytest.approx(1000 * 3 / 1e6 + 20 * 15 / 1e6)
    assert msg["api"] == api and msg["model"] == "scripted-model"
    (req,) = server.requests
    assert req.dialect == api
    assert KEY in " ".join(req.headers.values())


@pytest.mark.parametrize("api", APIS)
async def test_parallel_tool_calls_with_json_arguments(server: ScriptedModelServer, api: str) -> None:
    server.expect(
        reply(
            thinking("let me look"),
            tool_call("read", {"path": "a.txt", "opts": {"n": [1, 2]}}, call_id="call_1"),
            tool_call("read", {"path": "b.txt"}, call_id="call_2"),
            usage=tokens(50, 30),
        )
    )
    msg = await complete(server.model(api, reasoning=True), ctx(), opts(reasoning="medium"))  # type: ignore[arg-type]
    calls = [b for b in msg["content"] if b["type"] == "toolCall"]
    assert [c["arguments"] for c in calls] == [{"path": "a.txt", "opts": {"n": [1, 2]}}, {"path": "b.txt"}]
    assert all(c["name"] == "read" for c in calls)
    assert msg["stopReason"] == "toolUse"
    assert msg["content"][0]["type"] == "thinking" and msg["content"][0]["thinking"] == "let me look"


@pytest.mark.parametrize(
    ("api", "raw", "expected"),
    [
        ("openai-completions", "length", "length"),
        ("openai-completions", "content_filter", "error"),
        ("openai-responses", "max_output_tokens", "length"),
        ("anthropic-messages", "max_tokens", "length"),
        ("anthropic-messages", "refusal", "error"),
        ("google-generative-ai", "MAX_TOKENS", "length"),
        ("google-generative-ai", "SAFETY", "error"),
    ],
)
async def test_stop_reasons_mapped(server: ScriptedModelServer, api: str, raw: str, expected: str) -> None:
    server.expect(reply(text("partial answer"), stop=raw))
    msg = await complete(server.model(api), ctx(), opts())  # type: ignore[arg-type]
    assert msg["stopReason"] == expected
    assert msg.get("rawStopReason", "").startswith(("incomplete." if api == "openai-responses" else "") + raw)
    if expected == "error":
        assert msg["errorMessage"]


@pytest.mark.parametrize("api", APIS)
async def test_overflow_error_keeps_provider_text(server: ScriptedModelServer, api: str) -> None:
    server.expect(overflow())
    s = stream(server.model(api), ctx(), opts())  # type: ignore[arg-type]
    events = [ev async for ev in s]
    msg = await s.result()
    assert [e["type"] for e in events] == ["error"]
    assert msg["stopReason"] == "error"
    assert msg["errorMessage"].startswith("400 ")
    phrase = {
        "openai-completions": "maximum context length is 128000 tokens",
        "openai-responses": "exceeds the context window",
        "anthropic-messages": "prompt is too long",
        "google-generative-ai": "input token count (1196265) exceeds the maximum",
    }[api]
    assert phrase in msg["errorMessage"]
    assert KEY not in msg["errorMessage"]


@pytest.mark.parametrize(
    ("step", "status", "needle"),
    [
        (rate_limit(retry_after=1), "429", "rate limit"),
        (server_error(503), "503", "server had an error"),
        (overloaded(), "529", "Overloaded"),
        (http_error(400), "400", "status code (no body)"),
    ],
)
async def test_http_errors_become_error_messages(
    server: ScriptedModelServer, step: object, status: str, needle: str
) -> None:
    server.expect(step)  # type: ignore[arg-type]
    msg = await complete(server.model("anthropic-messages"), ctx(), opts())
    assert msg["stopReason"] == "error"
    assert msg["errorMessage"].startswith(status)
    assert needle.lower() in msg["errorMessage"].lower()


async def test_the_provider_driver_never_retries(server: ScriptedModelServer) -> None:
    # Retrying belongs to the one retry loop (picontext.ai.retrying), not to each request.
    server.expect(rate_limit(retry_after=2))
    msg = await complete(server.model("openai-completions"), ctx(), opts())
    assert msg["stopReason"] == "error" and msg["errorMessage"].startswith("429")
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
async def test_abort_mid_stream_keeps_partial_content(server: ScriptedModelServer, api: str) -> None:
    gate = threading.Event()
    server.expect(text("one two three four five six seven").hold_after(5, gate))
    signal = AbortSignal()
    s = stream(server.model(api), ctx(), opts(signal=signal))  # type: ignore[arg-type]
    seen: list[str] = []
    async for ev in s:
        seen.append(ev["type"])
        if ev["type"] == "text_delta":
            signal.abort()
    gate.set()
    msg = await s.result()
    assert seen[-1] == "error"
    assert msg["stopReason"] == "aborted"
    assert msg["errorMessage"] == "Request was aborted"
    assert msg["content"] and msg["content"][0]["type"] == "text"
    assert msg["content"][0]["text"].startswith("one")
    assert "partialJson" not in str(msg)


async def test_cancelling_the_consumer_aborts_the_request(server: ScriptedModelServer) -> None:
    gate = threading.Event()
    server.expect(text("alpha beta gamma delta").hold_after(4, gate))
    s = stream(server.model("anthropic-messages"), ctx(), opts())
    got_delta = asyncio.Event()

    async def consume() -> None:
        async for ev in s:
            if ev["type"] == "text_delta":
                got_delta.set()

    task = asyncio.create_task(consume())
    await got_delta.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    msg = await s.result()
    gate.set()
    assert msg["stopReason"] == "aborted"
    assert msg["content"][0]["text"].startswith("alpha")


@pytest.mark.parametrize("api", APIS)
async def test_dropped_connection_is_an_error_with_partial_content(server: ScriptedModelServer, api: str) -> None:
    server.expect(text("never finished sentence here").drop_after(4))
    msg = await complete(server.model(api), ctx(), opts())  # type: ignore[arg-type]
    assert msg["stopReason"] == "error"
    assert msg["errorMessage"]
    assert any(w in msg["errorMessage"].lower() for w in ("closed", "connection", "ended"))


async def test_slow_stream_still_completes(server: ScriptedModelServer) -> None:
    server.expect(text("a b c").slow(0.02))
    msg = await complete(server.model("openai-responses"), ctx(), opts())
    assert msg["content"][0]["text"] == "a b c"


async def test_cache_read_usage_and_cost(server: ScriptedModelServer) -> None:
    server.expect(reply(text("x"), usage=tokens(100, 10, cache_read=5000, cache_write=200)))
    msg = await complete(server.model("anthropic-messages"), ctx(), opts())
    u = msg["usage"]
    assert (u["input"], u["output"], u["cacheRead"], u["cacheWrite"]) == (100, 10, 5000, 200)
    assert u["totalTokens"] == 5310
    assert u["cost"]["cacheRead"] == pytest.approx(5000 * 0.3 / 1e6)
    assert u["cost"]["cacheWrite"] == pytest.approx(200 * 3.75 / 1e6)


async def test_no_cache_writes_and_no_session_id_when_retention_none(server: ScriptedModelServer) -> None:
    server.expect(text("a"), text("b"))
    await complete(server.model("anthropic-messages"), ctx(), opts(cache_retention="none", session_id="s1"))
    await complete(server.model("openai-responses"), ctx(), opts(cache_retention="none", session_id="s1"))
    anthropic, responses = server.requests
    assert "cache_control" not in str(anthropic.body)
    assert "prompt_cache_key" not in responses.body and "session_id" not in responses.headers


async def test_request_records_system_prompt_and_tools(server: ScriptedModelServer) -> None:
    server.expect(text("a"))
    await complete(server.model("anthropic-messages"), ctx("question"), opts())
    body = server.requests[0].body
    assert body["system"][0]["text"] == "You are terse."
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][0]["name"] == "read" and body["tools"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "question", "cache_control": {"type": "ephemeral"}}]}
    ]


async def test_requests_and_response_ends_are_timed(server: ScriptedModelServer) -> None:
    """What bench/bench_continue.py measures: when each request arrived and when its response
    had been written in full (time.monotonic, comparable across processes on one machine)."""
    import time

    server.expect(text("a b c").slow(0.05), text("d"))
    before = time.monotonic()
    model = server.model("openai-completions")
    await complete(model, ctx(), opts())
    await complete(model, ctx(), opts())
    after = time.monotonic()
    first, second = server.requests
    first_end, second_end = server.answered_at(first), server.answered_at(second)
    assert first_end is not None and second_end is not None
    assert before <= first.received
    assert first_end - first.received >= 0.05  # the slow stream's frames were waited for
    assert first_end <= second.received <= second_end <= after


def test_server_sends_without_nagle_delay() -> None:
    """Each accepted connection gets TCP_NODELAY (socketserver applies the handler's flag), so a
    stream's last frame is not held back waiting for the client's delayed ACK."""
    from picontext.testing import model_server

    assert model_server._Handler.disable_nagle_algorithm is True


async def test_unexpected_request_is_reported() -> None:
    with ScriptedModelServer() as srv:
        model = srv.model("openai-completions")
        msg = await complete(model, ctx(), opts())
        assert msg["stopReason"] == "error" and "unexpected request" in msg["errorMessage"]
        with pytest.raises(UnexpectedModelRequest):
            srv.assert_complete()


async def test_leftover_steps_fail_assert_complete() -> None:
    with ScriptedModelServer(text("never used")) as srv:
        with pytest.raises(AssertionError, match="never requested"):
            srv.assert_complete()


async def test_connection_refused_is_an_error_message() -> None:
    with ScriptedModelServer() as srv:
        model = srv.model("openai-completions")
    msg = await complete(model, ctx(), opts())  # server closed: nothing listens on the port
    assert msg["stopReason"] == "error"
    assert "connection" in msg["errorMessage"].lower()


async def test_multi_turn_replay_round_trips(server: ScriptedModelServer) -> None:
    """A tool-call turn fed back as history is accepted in each dialect's shape."""
    for api in APIS:
        server.expect(tool_call("read", {"path": "a"}, call_id="call_9"), text("done"))
        model = server.model(api)  # type: ignore[arg-type]
        first = await complete(model, ctx(), opts())
        history = ctx()
        call = next(b for b in first["content"] if b["type"] == "toolCall")
        history["messages"] += [
            first,
            {
                "role": "toolResult",
                "toolCallId": call["id"],
                "toolName": "read",
                "content": [{"type": "text", "text": "file body"}],
                "isError": False,
                "timestamp": 3,
            },
        ]
        second = await complete(model, history, opts())
        assert second["content"][0]["text"] == "done"
        assert "file body" in str(server.requests[-1].body)


async def test_a_models_compat_temperature_and_seed_are_sent_unless_the_request_sets_them(
        server: ScriptedModelServer) -> None:
    from picontext.ai.stream import with_model_sampling
    from picontext.errors import ConfigError

    model = {**server.model("openai-completions"), "compat": {"temperature": 0, "seed": 1234}}
    server.expect(text("a"), text("b"))
    await complete(model, ctx(), opts())  # type: ignore[arg-type]
    await complete(model, ctx(), StreamOptions(api_key="test", temperature=0.7, seed=7))  # type: ignore[arg-type]
    first, second = (r.body for r in server.requests)
    assert (first["temperature"], first["seed"]) == (0, 1234)
    assert (second["temperature"], second["seed"]) == (0.7, 7)
    plain = server.model("openai-completions")
    assert with_model_sampling(plain, StreamOptions()) == StreamOptions()  # nothing set, nothing sent
    for bad in ({"temperature": "cold"}, {"temperature": 5}, {"seed": 1.5}, {"seed": True}):
        with pytest.raises(ConfigError, match="compat"):
            with_model_sampling({**plain, "compat": bad}, StreamOptions())  # type: ignore[typeddict-item]

"""`complete_with_retry` / `complete_summarization` against ScriptedModelServer over real HTTP."""

from __future__ import annotations

import pytest

from picontext.ai.event_stream import AbortSignal
from picontext.ai.providers import Context, StreamOptions
from picontext.ai.retry import RetryPolicy
from picontext.ai.retrying import RetryCallbacks, complete_summarization, complete_with_retry
from picontext.testing import (
    ScriptedModelServer,
    http_error,
    overflow,
    overloaded,
    rate_limit,
    server_error,
    text,
)

KEY = "sk-test-secret-123456"
APIS = ["openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai"]



CTX: Context = {
    "messages": [
        {"role": "system", "content": "Summarize.", "timestamp": 0},
        {"role": "user", "content": "the conversation", "timestamp": 1},
    ]
}


class Sleeps:
    """An injectable sleep that records the delays and never waits."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.mark.parametrize("api", APIS)
async def test_rate_limit_then_success_honours_retry_after(server: ScriptedModelServer, api: str) -> None:
    server.expect(rate_limit(retry_after=7), text("done"))
    sleeps = Sleeps()
    msg = await complete_with_retry(server.model(api), CTX, StreamOptions(api_key=KEY), sleep=sleeps)
    assert msg["stopReason"] == "stop"
    assert msg["content"][0]["text"] == "done"
    assert sleeps.delays == [7.0]  # the server's retry-after, not the 2 s back-off
    assert len(server.requests) == 2


async def test_rate_limit_without_retry_after_uses_backoff(server: ScriptedModelServer) -> None:
    server.expect(rate_limit(retry_after=None), text("done"))
    sleeps = Sleeps()
    msg = await complete_with_retry(server.model("anthropic-messages"), CTX, StreamOptions(api_key=KEY), sleep=sleeps)
    assert msg["stopReason"] == "stop"
    assert sleeps.delays == [2.0]


async def test_429_without_header_uses_policy_backoff(server: ScriptedModelServer) -> None:
    server.expect(http_error(429, '{"error":{"message":"Too many requests"}}'), text("ok"))
    sleeps = Sleeps()
    policy = RetryPolicy(base_delay_ms=100)
    msg = await complete_with_retry(
        server.model("openai-completions"), CTX, StreamOptions(api_key=KEY), policy=policy, sleep=sleeps
    )
    assert msg["stopReason"] == "stop"
    assert sleeps.delays == [0.1]


@pytest.mark.parametrize("api", APIS)
async def test_5xx_twice_then_success_exponential_backoff(server: ScriptedModelServer, api: str) -> None:
    server.expect(server_error(503), overloaded(), text("recovered"))
    sleeps = Sleeps()
    scheduled: list[tuple[int, int, float]] = []
    finished: list[tuple[bool, int]] = []
    callbacks = RetryCallbacks(
        on_retry_scheduled=lambda a, m, d, e: scheduled.append((a, m, d)),
        on_retry_finished=lambda ok, a, e: finished.append((ok, a)),
    )
    msg = await complete_with_retry(
        server.model(api), CTX, StreamOptions(api_key=KEY), sleep=sleeps, callbacks=callbacks
    )
    assert msg["stopReason"] == "stop"
    assert msg["content"][0]["text"] == "recovered"
    assert sleeps.delays == [2.0, 4.0]
    assert scheduled == [(1, 3, 2000.0), (2, 3, 4000.0)]
    assert finished == [(True, 2)]
    assert len(server.requests) == 3


async def test_delay_cap_applies_to_backoff(server: ScriptedModelServer) -> None:
    server.expect(server_error(500), server_error(502), server_error(503), text("ok"))
    sleeps = Sleeps()
    policy = RetryPolicy(max_retries=3, base_delay_ms=3000, max_agent_delay_ms=5000)
    msg = await complete_with_retry(
        server.model("openai-responses"), CTX, StreamOptions(api_key=KEY), policy=policy, sleep=sleeps
    )
    assert msg["stopReason"] == "stop"
    assert sleeps.delays == [3.0, 5.0, 5.0]


@pytest.mark.parametrize("api", APIS)
async def test_overflow_is_never_retried(server: ScriptedModelServer, api: str) -> None:
    server.expect(overflow())
    sleeps = Sleeps()
    msg = await complete_with_retry(server.model(api), CTX, StreamOptions(api_key=KEY), sleep=sleeps)
    assert msg["stopReason"] == "error"
    assert sleeps.delays == []
    assert len(server.requests) == 1


async def test_overflow_worded_with_a_5xx_status_is_not_retried(server: ScriptedModelServer) -> None:
    body = '{"error":{"message":"prompt is too long: 213462 tokens > 200000 maximum"}}'
    server.expect(http_error(500, body))
    sleeps = Sleeps()
    msg = await complete_with_retry(server.model("anthropic-messages"), CTX, StreamOptions(api_key=KEY), sleep=sleeps)
    assert msg["stopReason"] == "error"
    assert "prompt is too long" in msg["errorMessage"]
    assert sleeps.delays == []


async def test_deterministic_error_is_not_retried(server: ScriptedModelServer) -> None:
    server.expect(http_error(400, '{"error":{"message":"max_tokens: 5000 > 4096"}}'))
    sleeps = Sleeps()
    msg = await complete_with_retry(server.model("openai-completions"), CTX, StreamOptions(api_key=KEY), sleep=sleeps)
    assert msg["stopReason"] == "error"
    assert sleeps.delays == []


async def test_attempts_exhausted_returns_final_error(server: ScriptedModelServer) -> None:
    server.expect(server_error(502), server_error(503), server_error(500))
    sleeps = Sleeps()
    finished: list[tuple[bool, int, str | None]] = []
    policy = RetryPolicy(max_retries=2)
    msg = await complete_with_retry(
        server.model("anthropic-messages"),
        CTX,
        StreamOptions(api_key=KEY),
        policy=policy,
        sleep=sleeps,
        callbacks=RetryCallbacks(on_retry_finished=lambda ok, a, e: finished.append((ok, a, e))),
    )
    assert msg["stopReason"] == "error"
    assert msg["errorMessage"].startswith("500 ")  # the last attempt's own text
    assert "server had an error" in msg["errorMessage"]
    assert sleeps.delays == [2.0, 4.0]
    assert len(server.requests) == 3
    assert finished == [(False, 2, msg["errorMessage"])]


async def test_disabled_policy_makes_one_call(server: ScriptedModelServer) -> None:
    server.expect(server_error(503))
    sleeps = Sleeps()
    msg = await complete_with_retry(
        server.model("openai-completions"),
        CTX,
        StreamOptions(api_key=KEY),
        policy=RetryPolicy(enabled=False),
        sleep=sleeps,
    )
    assert msg["stopReason"] == "error"
    assert sleeps.delays == []


async def test_server_delay_above_cap_stops_retrying(server: ScriptedModelServer) -> None:
    server.expect(rate_limit(retry_after=120))
    sleeps = Sleeps()
    msg = await complete_with_retry(server.model("openai-completions"), CTX, StreamOptions(api_key=KEY), sleep=sleeps)
    assert msg["stopReason"] == "error"
    assert msg["errorMessage"].endswith("Server requested 120s retry delay (max: 60s).")
    assert sleeps.delays == []


async def test_abort_during_backoff(server: ScriptedModelServer) -> None:
    server.expect(server_error(503))
    signal = AbortSignal()
    started: list[float] = []

    async def sleep_until_aborted(seconds: float) -> None:
        started.append(seconds)
        signal.abort()  # the user presses Esc while we wait
        await __import__("asyncio").Event().wait()  # would never return on its own

    msg = await complete_with_retry(
        server.model("anthropic-messages"), CTX, StreamOptions(api_key=KEY, signal=signal), sleep=sleep_until_aborted
    )
    assert started == [2.0]
    assert msg["stopReason"] == "aborted"
    assert msg["errorMessage"] == "Request was aborted"
    assert len(server.requests) == 1  # no retry after the abort


async def test_aborted_reply_is_not_retried(server: ScriptedModelServer) -> None:
    signal = AbortSignal()
    signal.abort()
    sleeps = Sleeps()
    msg = await complete_with_retry(
        server.model("openai-completions"), CTX, StreamOptions(api_key=KEY, signal=signal), sleep=sleeps
    )
    assert msg["stopReason"] == "aborted"
    assert sleeps.delays == []
    assert server.requests == []


async def test_dropped_stream_is_retried(server: ScriptedModelServer) -> None:
    server.expect(text("one two three four").drop_after(2), text("whole"))
    sleeps = Sleeps()
    msg = await complete_with_retry(server.model("anthropic-messages"), CTX, StreamOptions(api_key=KEY), sleep=sleeps)
    assert msg["stopReason"] == "stop"
    assert msg["content"] == [{"type": "text", "text": "whole"}]
    assert sleeps.delays == [2.0]


async def test_summarization_request_writes_no_cache_and_uses_fresh_ids(server: ScriptedModelServer) -> None:
    server.expect(server_error(503), text("summary one"), text("summary two"))
    sleeps = Sleeps()
    opts = StreamOptions(api_key=KEY, session_id="the-session")
    model = server.model("anthropic-messages")
    first = await complete_summarization(model, CTX, opts, sleep=sleeps)
    second = await complete_summarization(model, CTX, opts, sleep=sleeps)
    assert first["content"][0]["text"] == "summary one"
    assert second["content"][0]["text"] == "summary two"
    assert sleeps.delays == [2.0]
    for req in server.requests:
        assert "cache_control" not in str(req.body)
        assert "the-session" not in str(req.body) and "the-session" not in str(req.headers)


async def test_summarization_openai_sends_no_prompt_cache_key(server: ScriptedModelServer) -> None:
    server.expect(text("s"), text("s"))
    for api in ("openai-completions", "openai-responses"):
        msg = await complete_summarization(
            server.model(api), CTX, StreamOptions(api_key=KEY, session_id="the-session"), sleep=Sleeps()
        )
        assert msg["stopReason"] == "stop"
    for req in server.requests:
        assert "prompt_cache_key" not in req.body
        assert "the-session" not in str(req.headers)


async def test_a_connection_refused_on_this_machine_is_not_retried() -> None:
    with ScriptedModelServer() as gone:
        model = gone.model("openai-completions")  # 127.0.0.1: nothing listens there once it is closed
    sleeps = Sleeps()
    message = await complete_with_retry(model, CTX, StreamOptions(api_key=KEY), sleep=sleeps)
    assert message["stopReason"] == "error" and "connection refused" in message["errorMessage"]
    assert sleeps.delays == []  # failed at once: no back-off


async def test_a_connection_refused_by_a_remote_host_keeps_its_retries() -> None:
    with ScriptedModelServer() as gone:
        model = gone.model("openai-completions")
    # The same refusal, for a model whose base URL names another machine (as through a tunnel).
    remote = {**model, "baseUrl": model["baseUrl"].replace("127.0.0.1", "models.example.com")}
    refused = {"stopReason": "error", "errorMessage": "Connection error: All connection attempts failed "
                                                      "(connection refused)"}
    from picontext.ai.retrying import plan_retry

    plan = plan_retry(RetryPolicy(), 0, refused, base_url=remote["baseUrl"])
    assert plan is not None and plan.wait is not None and plan.wait.delay_ms == 2000
    assert plan_retry(RetryPolicy(), 0, refused, base_url=model["baseUrl"]) is None

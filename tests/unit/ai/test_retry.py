"""Behaviour of `picontext.ai.retry` (spec 03 §6.1, §6.2, §12 item 8); agreement with Pi is in
tests/differential/test_overflow_vs_pi.py."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from picontext.ai.overflow import is_context_overflow
from picontext.ai.retry import (
    DEFAULT_MAX_AGENT_RETRY_DELAY_MS,
    NON_RETRYABLE_PATTERNS,
    RETRYABLE_PATTERNS,
    RetryPolicy,
    find_transient_status,
    is_retryable_assistant_error,
    is_retryable_error,
    retry_delay_ms,
)


def err(text: str | None, stop: str = "error", provider: str = "openai") -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "stopReason": stop, "provider": provider}
    message["usage"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
    if text is not None:
        message["errorMessage"] = text
    return message


# --- classification --------------------------------------------------------------------------


@pytest.mark.parametrize("row", RETRYABLE_PATTERNS, ids=lambda r: f"{r.source}: {r.example[:40]}")
def test_each_transient_phrase_is_retryable(row: Any) -> None:
    assert row.regex.search(row.example)
    assert is_retryable_assistant_error(err(row.example))


@pytest.mark.parametrize("row", NON_RETRYABLE_PATTERNS, ids=lambda r: r.source)
def test_quota_and_billing_are_never_retried(row: Any) -> None:
    assert row.regex.search(row.example)
    assert not is_retryable_assistant_error(err(row.example))
    assert not is_retryable_assistant_error(err(row.example + " 503 overloaded, fetch failed"))


@pytest.mark.parametrize(
    "text",
    [
        "529 overloaded",
        "overloaded_error",
        "Rate limit exceeded",
        "service_unavailable",
        "serviceunavailable",
        "Provider returned error",
        "Provider finish_reason: network_error",
        "fetch failed",
        "terminated",
        "Anthropic stream ended before message_stop",
        "Server requested 120s retry delay (max: 60s).",
        "502 Bad Gateway",
        "Request failed with status code 429",
        "503",
        # Ours: throttling wording (docs/divergences.md `throttling-wording`).
        "Throttling error: Rate exceeded",
        "ThrottlingException: Too many tokens, please wait before trying again.",
        "Too many tokens per minute",
    ],
)
def test_transient_errors_are_retried(text: str) -> None:
    assert is_retryable_assistant_error(err(text))
    assert is_retryable_error(err(text), 200_000)


@pytest.mark.parametrize(
    "text",
    [
        "invalid_api_key",
        "400 Bad Request",
        "broken",
        "The server had an error while processing your request.",  # not "server error"
        "429 insufficient_quota: You exceeded your current quota",
        # Ours: digits that are not a status code (docs/divergences.md `status-digits`).
        "400 invalid_request_error: max_tokens: 5000 > 4096",
        "400 Bad Request: text block has 15020 characters",
        "400 max_tokens: 500 is below the minimum of 1024",
        "404 model not found (request id: req_8f5029ab)",
        "400 unsupported api version 1.502",
    ],
)
def test_deterministic_errors_are_not_retried(text: str) -> None:
    assert not is_retryable_assistant_error(err(text))


@pytest.mark.parametrize("stop", ["stop", "length", "toolUse", "aborted"])
def test_only_error_stops_are_retried(stop: str) -> None:
    assert not is_retryable_assistant_error(err("503 Service Unavailable", stop))


def test_missing_or_empty_error_text_is_not_retried() -> None:
    assert not is_retryable_assistant_error(err(None))
    assert not is_retryable_assistant_error(err(""))


@pytest.mark.parametrize(
    "text",
    [
        "500 Internal Server Error: prompt is too long: 300000 tokens > 200000 maximum",
        "Error: 503 litellm.ServiceUnavailableError: OpenAIException - Requested token count exceeds the "
        "model's maximum context length of 131072 tokens.",
        "Provider returned error: Input length 131393 exceeds the maximum allowed input length of 131040 tokens.",
    ],
)
def test_an_overflow_is_never_transient(text: str) -> None:
    assert is_retryable_assistant_error(err(text))  # the phrase list alone says yes…
    assert not is_retryable_error(err(text))  # …the session does not retry an overflow


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("429 Too Many Requests", 429),
        ("Error: 503 upstream", 503),
        ("status=502", 502),
        ('{"code":504}', 504),
        ("HTTP/1.1 503 Service Temporarily Unavailable", 503),
        ("Request failed: 520", 520),
        ("Error code 524.", 524),
        ("(500)", 500),
        ("max_tokens: 5000", None),
        ("max_tokens: 500", None),
        ('"max_tokens": 500', None),
        ("limit=503", None),
        ("15020 tokens", None),
        ("500 tokens", None),
        ("503ms", None),
        ("1,500", None),
        ("1.502", None),
        ("v500", None),
        ("req_5029", None),
        ("400 invalid", None),
        ("max_tokens: 5000, then 502 Bad Gateway", 502),
    ],
)
def test_find_transient_status(text: str, status: int | None) -> None:
    assert find_transient_status(text) == status


@given(text=st.text(max_size=60), quota=st.sampled_from([r.example for r in NON_RETRYABLE_PATTERNS]))
def test_quota_phrase_anywhere_blocks_retry(text: str, quota: str) -> None:
    assert not is_retryable_assistant_error(err(text + quota + text))


@given(text=st.text(max_size=80))
def test_session_retry_implies_no_overflow(text: str) -> None:
    message = err(text)
    if is_retryable_error(message, 200_000):
        assert is_retryable_assistant_error(message)
        assert not is_context_overflow(message, 200_000)


# --- back-off ----------------------------------------------------------------------------------


def test_default_policy_matches_settings_defaults() -> None:
    policy = RetryPolicy()
    assert (policy.enabled, policy.max_retries, policy.base_delay_ms) == (True, 3, 2000)
    assert policy.max_agent_delay_ms == DEFAULT_MAX_AGENT_RETRY_DELAY_MS == 60_000
    assert [policy.delay_ms(n) for n in (1, 2, 3)] == [2000, 4000, 8000]
    assert [policy.allows(n) for n in (0, 1, 3, 4)] == [False, True, True, False]
    assert not RetryPolicy(enabled=False).allows(1)


@pytest.mark.parametrize(
    ("policy", "attempt", "delay"),
    [
        (RetryPolicy(), 0, 2000),
        (RetryPolicy(), -5, 2000),
        (RetryPolicy(), 5, 32000),
        (RetryPolicy(), 6, 60000),
        (RetryPolicy(), 10_000, 60000),
        (RetryPolicy(max_agent_delay_ms=None), 7, 60000),
        (RetryPolicy(base_delay_ms=1000, max_agent_delay_ms=5000), 3, 4000),
        (RetryPolicy(base_delay_ms=1000, max_agent_delay_ms=5000), 4, 5000),
        (RetryPolicy(base_delay_ms=0), 2000, 60000),  # 0 × ∞ is NaN in JavaScript: the cap wins
        (RetryPolicy(base_delay_ms=0), 3, 0),
        (RetryPolicy(base_delay_ms=1.5), 1, 60000),  # not a safe integer: replaced, then capped
        (RetryPolicy(base_delay_ms=3, max_agent_delay_ms=0), 1, 0),
        (RetryPolicy(base_delay_ms=7, max_agent_delay_ms=2**60), 60, 2**53 - 1),
    ],
)
def test_retry_delay_edges(policy: RetryPolicy, attempt: int, delay: int) -> None:
    assert retry_delay_ms(policy, attempt) == delay


@given(base=st.integers(0, 10_000), cap=st.integers(0, 10**6), attempt=st.integers(1, 80))
def test_delay_grows_until_the_cap(base: int, cap: int, attempt: int) -> None:
    policy = RetryPolicy(base_delay_ms=base, max_agent_delay_ms=cap)
    delay = retry_delay_ms(policy, attempt)
    assert 0 <= delay <= cap
    assert delay <= retry_delay_ms(policy, attempt + 1)
    assert delay == min(base * 2 ** (attempt - 1), cap)


@pytest.mark.parametrize(("base_url", "local"), [
    ("http://127.0.0.1:8080/v1", True), ("http://localhost:11434/v1", True), ("http://[::1]:8000/v1", True),
    ("https://api.openai.com/v1", False), ("http://gpu-box.lan:8000/v1", False), (None, False)])
def test_a_refused_connection_is_transient_only_for_a_remote_host(base_url: str | None, local: bool) -> None:
    from picontext.ai.retry import is_local_refusal

    refused = {"stopReason": "error", "errorMessage": "Connection error: All connection attempts failed "
                                                      "(connection refused)"}
    assert is_local_refusal(refused, base_url) is local
    assert is_retryable_error(refused, 128_000, base_url) is not local
    other = {"stopReason": "error", "errorMessage": "Request timed out: read timeout"}  # a slow local server
    assert is_retryable_error(other, 128_000, base_url) is True

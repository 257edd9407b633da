"""Behaviour of `picontext.ai.overflow` (spec 03 §3); agreement with Pi is in
tests/differential/test_overflow_vs_pi.py."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from picontext.ai.overflow import (
    NON_OVERFLOW_PATTERNS,
    OVERFLOW_PATTERNS,
    is_context_overflow,
    is_recoverable_length,
    matching_overflow_pattern,
)


def msg(
    stop: str = "error",
    text: str | None = None,
    *,
    provider: str = "anthropic",
    input: int = 0,
    output: int = 0,
    cache_read: int = 0,
    cache_write: int = 0,
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": [],
        "api": "anthropic-messages",
        "provider": provider,
        "model": "m",
        "stopReason": stop,
        "timestamp": 0,
        "usage": {
            "input": input,
            "output": output,
            "cacheRead": cache_read,
            "cacheWrite": cache_write,
            "totalTokens": input + output + cache_read + cache_write,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
    }
    if text is not None:
        message["errorMessage"] = text
    return message


# --- form 1: error text -------------------------------------------------------------------


@pytest.mark.parametrize("row", OVERFLOW_PATTERNS, ids=lambda r: f"{r.source}: {r.example[:40]}")
def test_each_provider_phrase_is_overflow(row: Any) -> None:
    assert row.regex.search(row.example)
    assert matching_overflow_pattern(row.example) is not None  # an earlier row may win (Ollama)
    assert is_context_overflow(msg(text=row.example))


@pytest.mark.parametrize(
    "text",
    [
        '{"code":"1261","message":"Prompt too long"}',
        "Requested token count exceeds the model's maximum context length of 131072 tokens",
        "This request exceeds the maximum context length of 131,072 tokens",
        "Provider returned error: Input length 131393 exceeds the maximum allowed input length of 131040 tokens.",
        "context_length_exceeded",
        "Context length exceeded",
        "Error: 503 litellm.ServiceUnavailableError: OpenAIException - Requested token count exceeds "
        "the model's maximum context length of 131072 tokens.",
        "PROMPT IS TOO LONG",
        "429 too many tokens",
    ],
)
def test_wrapped_and_case_insensitive_overflow_texts(text: str) -> None:
    assert is_context_overflow(msg(text=text))


@pytest.mark.parametrize("row", NON_OVERFLOW_PATTERNS, ids=lambda r: r.source)
def test_exclusions_win_over_overflow_phrases(row: Any) -> None:
    assert not is_context_overflow(msg(text=row.example))
    assert not is_context_overflow(msg(text=row.example + " prompt is too long"))


@pytest.mark.parametrize(
    "text",
    [
        "Throttling error: Too many tokens, please wait before trying again.",
        "Service unavailable: prompt is too long",
        "Rate limit exceeded, please retry after 30 seconds.",
        "Too many requests: token limit exceeded",
        # Ours (docs/divergences.md): the reference calls these overflow.
        "429 rate_limit_exceeded: too many tokens per minute",
        "Rate-limit reached: too many tokens",
        "ThrottlingException: Too many tokens, please wait before trying again.",
        "Too many tokens per minute. Please wait a moment.",
    ],
)
def test_rate_limit_and_throttling_are_not_overflow(text: str) -> None:
    assert not is_context_overflow(msg(text=text))


@pytest.mark.parametrize(
    "text",
    [
        "Amazon Bedrock Mantle OpenAI Responses API error (400): invalid_prompt: prompt tokens (330095) "
        "exceed model maximum (278528) for base model abc",  # known non-match in 0.87.0
        "500 `model runner crashed unexpectedly`",
        "prompt is long",
        "413 Request too large",
        "Input exceeds the model's maximum context length",  # row 5 needs a number
        "maximum context length is unknown",
        "context-length-exceeded",
        "too many token",
        "input token count is 500",
        "the input token count (5)\nexceeds the maximum",  # JavaScript `.` stops at a line break
        "maximum prompt length is \uff11\uff12\uff13",  # JavaScript `\d` is ASCII only
        "prompt i\u017f too long",  # no Unicode case folding (U+017F is not `s`)
        "",
    ],
)
def test_near_misses_are_not_overflow(text: str) -> None:
    assert not is_context_overflow(msg(text=text), 200_000)


def test_javascript_whitespace_counts_as_space() -> None:
    assert is_context_overflow(msg(text="Input (9000) exceeds maximum context length\u00a0(8192)"))
    assert is_context_overflow(msg(text="Input (9000) exceeds maximum context length\u2028(8192)"))


@pytest.mark.parametrize("stop", ["stop", "length", "toolUse", "aborted"])
def test_error_text_needs_error_stop_reason(stop: str) -> None:
    assert not is_context_overflow(msg(stop, "prompt is too long"))


# --- Cerebras bodyless rule --------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "text", "overflow"),
    [
        ("cerebras", "400 status code (no body)", True),
        ("cerebras", "413 (no body)", True),
        ("cerebras", "400   status code   (no body)", True),
        ("cerebras", "400status code(no body)", True),
        ("cerebras", "413 STATUS CODE (NO BODY) trailing", True),
        ("cerebras", "429 status code (no body)", False),
        ("cerebras", "500 status code (no body)", False),
        ("cerebras", " 400 status code (no body)", False),
        ("cerebras", "Error: 400 status code (no body)", False),
        ("cerebras", "4000 status code (no body)", False),
        ("cerebras", "400 Bad Request", False),
        ("openai", "400 status code (no body)", False),
        ("Cerebras", "400 status code (no body)", False),
    ],
)
def test_cerebras_bodyless_rule(provider: str, text: str, overflow: bool) -> None:
    assert is_context_overflow(msg(text=text, provider=provider)) is overflow


# --- forms 2 and 3: usage ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "window", "overflow"),
    [
        (msg("stop", input=150_000, cache_read=60_000), 200_000, True),
        (msg("stop", input=150_000, cache_write=60_000), 200_000, False),
        (msg("stop", input=199_000, output=5_000), 200_000, False),
        (msg("stop", input=200_000), 200_000, False),
        (msg("stop", input=200_001), 200_000, True),
        (msg("stop", input=500_000), None, False),
        (msg("stop", input=500_000), 0, False),
        (msg("toolUse", input=300_000), 200_000, False),
        (msg("aborted", input=300_000), 200_000, False),
        (msg("error", "odd", input=300_000), 200_000, False),
        (msg("length", input=58, cache_read=1_048_512), 1_048_576, True),
        (msg("length", input=990), 1000, True),
        (msg("length", input=989), 1000, False),
        (msg("length", input=90, cache_read=900), 1000, True),
        (msg("length", input=10, cache_write=995), 1000, False),
        (msg("length", input=1000, output=4096), 200_000, False),
        (msg("length", input=100), 200_000, False),
        (msg("length", input=300_000, output=1), 200_000, False),
        (msg("length", input=1_048_576), None, False),
    ],
)
def test_usage_based_forms(message: dict[str, Any], window: int | None, overflow: bool) -> None:
    assert is_context_overflow(message, window) is overflow


def test_missing_or_partial_usage_is_not_overflow() -> None:
    bare = {"role": "assistant", "stopReason": "stop"}
    assert not is_context_overflow(bare, 100)
    assert not is_context_overflow({**bare, "usage": {"input": 500}}, 100)  # NaN in the reference


# --- recoverable length (spec 03 §3.5, §3.6) -----------------------------------------------


@pytest.mark.parametrize(
    ("message", "desired", "recoverable"),
    [
        (msg("length", output=64), 100, True),
        (msg("length", output=100), 100, False),
        (msg("length", output=150), 100, False),
        (msg("length", output=0, input=58, cache_read=1_048_512), 100, True),
        (msg("length", output=10), 0, False),
        (msg("length", output=10), -5, False),
        (msg("length", output=10), 10.5, True),
        (msg("stop", output=10), 100, False),
        (msg("error", "prompt is too long"), 100, False),
        (msg("toolUse", input=300_000), 100, False),
    ],
)
def test_recoverable_length(message: dict[str, Any], desired: float, recoverable: bool) -> None:
    assert is_recoverable_length(message, desired) is recoverable


def test_worked_examples_of_the_spec() -> None:
    """Spec 03 §3.6, row by row."""
    assert is_context_overflow(msg(text="prompt is too long"), 200_000)
    assert not is_context_overflow(msg(text="529 overloaded"), 200_000)
    assert is_context_overflow(msg("stop", input=150_000, cache_read=60_000), 200_000)
    assert not is_context_overflow(msg("stop", input=150_000, cache_write=60_000), 200_000)
    filled = msg("length", input=58, cache_read=1_048_512)
    assert is_context_overflow(filled, 1_048_576) and is_recoverable_length(filled, 100)
    assert not is_context_overflow(msg("length", output=64), 1_000_000)
    assert is_recoverable_length(msg("length", output=64), 100)
    assert not is_recoverable_length(msg("length", output=100), 100)
    assert not is_context_overflow(msg("toolUse", input=300_000), 200_000)


# --- properties ------------------------------------------------------------------------------

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_phrases = st.sampled_from([r.example for r in OVERFLOW_PATTERNS])


@given(prefix=_text, phrase=_phrases, suffix=_text)
def test_phrases_match_anywhere_unless_excluded(prefix: str, phrase: str, suffix: str) -> None:
    text = prefix + phrase + suffix
    assume(not any(p.regex.search(text) for p in NON_OVERFLOW_PATTERNS))
    assert is_context_overflow(msg(text=text))


@given(text=_text, phrase=_phrases)
def test_rate_limit_wording_always_excludes(text: str, phrase: str) -> None:
    assert not is_context_overflow(msg(text=f"{text} rate limit {phrase}"))


@given(stop=st.sampled_from(["stop", "length", "toolUse", "aborted"]), text=_text, n=st.integers(0, 10**7))
def test_without_a_window_only_error_text_counts(stop: str, text: str, n: int) -> None:
    assert not is_context_overflow(msg(stop, text, input=n, cache_read=n))


@given(
    window=st.integers(1, 10**7),
    prompt=st.integers(0, 10**7),
    extra=st.integers(0, 10**6),
    stop=st.sampled_from(["stop", "length"]),
)
def test_more_prompt_tokens_never_undo_an_overflow(window: int, prompt: int, extra: int, stop: str) -> None:
    if is_context_overflow(msg(stop, input=prompt), window):
        assert is_context_overflow(msg(stop, input=prompt + extra), window)


@given(output=st.integers(0, 10**6), desired=st.integers(-10, 10**6))
def test_recoverable_length_is_output_below_a_positive_limit(output: int, desired: int) -> None:
    assert is_recoverable_length(msg("length", output=output), desired) is (0 < desired and output < desired)

"""Context-overflow detection for finished assistant messages.

Mirrors Pi `isContextOverflow` and `isRecoverableLength` (packages/ai/src/utils/overflow.ts,
0.87.0; spec 03 §3). An assistant message overflowed the context when one of three forms holds:

1. *Error text*: `stopReason == "error"`, the `errorMessage` matches no exclusion
   (`NON_OVERFLOW_PATTERNS`) and either matches an overflow phrase (`OVERFLOW_PATTERNS`) or the
   Cerebras bodyless rule.
2. *Silent overflow*: a window is given, `stopReason == "stop"` and `input + cacheRead > window`.
3. *Length-stop overflow*: a window is given, `stopReason == "length"`, zero output and
   `input + cacheRead >= 0.99 * window`.

One deliberate divergence (docs/divergences.md, "Overflow and retry classification"): the
exclusion list also covers rate-limit wording the reference misses (`rate_limit`, `Rate-limit`,
`ThrottlingException`, "tokens per minute"), so a per-minute throttle that says "too many tokens"
is a transient error, not an overflow.

The patterns are compiled with `re.ASCII | re.IGNORECASE` and spell out JavaScript's `\\s` and
`.` explicitly, so they accept exactly the strings the reference's JavaScript regexes accept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CEREBRAS_BODYLESS_PATTERN",
    "LENGTH_STOP_FILL_RATIO",
    "NON_OVERFLOW_PATTERNS",
    "OVERFLOW_PATTERNS",
    "Pattern",
    "is_context_overflow",
    "is_recoverable_length",
    "matching_overflow_pattern",
    "reports_usage",
]

# JavaScript's `\s` (WhiteSpace + LineTerminator), and its `.` without the `s` flag.
JS_SPACE = "[\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]"
JS_ANY = "[^\\n\\r\\u2028\\u2029]"
_FLAGS = re.ASCII | re.IGNORECASE

LENGTH_STOP_FILL_RATIO = 0.99
"""Form 3 fires when `input + cacheRead` reaches this share of the window (Xiaomi MiMo)."""


@dataclass(frozen=True)
class Pattern:
    """One row of a classification table: who emits it, the rule, and a string it must match.

    Invariant: `regex` matches `example` (checked by the unit tests for every row).
    """

    source: str
    """Provider or intent the row exists for (spec 03 §3.2 "Intent")."""
    regex: re.Pattern[str]
    example: str
    """A real-looking error text the row must classify."""


def _row(source: str, pattern: str, example: str) -> Pattern:
    pattern = pattern.replace("\\s", JS_SPACE).replace("<any>", JS_ANY)
    return Pattern(source, re.compile(pattern, _FLAGS), example)


# Spec 03 §3.2, in the reference's order. Matching is unanchored and case-insensitive.
OVERFLOW_PATTERNS: tuple[Pattern, ...] = (
    _row("Anthropic / z.ai", r"prompt (?:is )?too long", "prompt is too long: 213462 tokens > 200000 maximum"),
    _row(
        "Anthropic HTTP 413",
        r"request_too_large",
        '413 {"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}',
    ),
    _row("Amazon Bedrock", r"input is too long for requested model", "Input is too long for requested model."),
    _row(
        "OpenAI Completions / Responses",
        r"exceeds the context window",
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
    ),
    _row(
        "OpenAI-compatible proxies / LiteLLM",
        r"exceeds (?:the )?(?:model'?s )?maximum context length(?: of [0-9,]+ tokens?|\s*\([0-9,]+\))",
        "Input length (265330) exceeds model's maximum context length (262144).",
    ),
    _row(
        "Google Gemini",
        r"input token count<any>*exceeds the maximum",
        "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)",
    ),
    _row(
        "xAI Grok",
        r"maximum prompt length is [0-9]+",
        "This model's maximum prompt length is 131072 but the request contains 537812 tokens",
    ),
    _row("Groq", r"reduce the length of the messages", "Please reduce the length of the messages or completion"),
    _row(
        "OpenRouter",
        r"maximum context length is [0-9]+ tokens",
        "This endpoint's maximum context length is 131072 tokens. However, you requested about 200000 tokens",
    ),
    _row(
        "OpenRouter / Poolside",
        r"exceeds (?:the )?maximum allowed input length of [0-9,]+ tokens?",
        "Input length 131393 exceeds the maximum allowed input length of 131040 tokens.",
    ),
    _row(
        "Together AI",
        r"input \([0-9]+ tokens\) is longer than the model'?s context length \([0-9]+ tokens\)",
        "400 The input (516368 tokens) is longer than the model's context length (262144 tokens).",
    ),
    _row(
        "GitHub Copilot",
        r"exceeds the limit of [0-9]+",
        "prompt token count of 139000 exceeds the limit of 128000",
    ),
    _row(
        "llama.cpp server",
        r"exceeds the available context size",
        "the request exceeds the available context size, try increasing it",
    ),
    _row(
        "LM Studio",
        r"greater than the context length",
        "tokens to keep from the initial prompt is greater than the context length",
    ),
    _row("MiniMax", r"context window exceeds limit", "invalid params, context window exceeds limit"),
    _row(
        "Kimi For Coding",
        r"exceeded model token limit",
        "Your request exceeded model token limit: 262144 (requested: 300000)",
    ),
    _row(
        "Mistral",
        r"too large for model with [0-9]+ maximum context length",
        "Prompt contains 140000 tokens and 0 draft tokens, too large for model with 131072 maximum context length",
    ),
    _row(
        "DS4 server",
        r"prompt has [0-9,]+ tokens?, but the configured context size is [0-9,]+ tokens?",
        "Prompt has 140000 tokens, but the configured context size is 131072 tokens",
    ),
    _row("z.ai finish reason", r"model_context_window_exceeded", "model_context_window_exceeded"),
    _row(
        "Ollama",
        r"prompt too long; exceeded (?:max )?context length",
        "400 `prompt too long; exceeded max context length by 100918 tokens`",
    ),
    _row("DashScope / Qwen", r"range of input length should be", "Range of input length should be [1, 98304]"),
    _row("generic", r"context[_ ]length[_ ]exceeded", "context_length_exceeded"),
    _row("generic", r"too many tokens", "Too many tokens in request"),
    _row("generic", r"token limit exceeded", "token limit exceeded"),
)

# Spec 03 §3.3, checked first. The first three rows are the reference's; the last two are ours
# (divergence: rate-limit wording, spec 03 §12 item 8).
NON_OVERFLOW_PATTERNS: tuple[Pattern, ...] = (
    _row(
        "Bedrock formatter prefixes",
        r"^(?:Throttling error|Service unavailable):",
        "Throttling error: Too many tokens, please wait before trying again.",
    ),
    # Ours: the reference has `rate limit` with exactly one space; `rate_limit_exceeded`,
    # `Rate-limit` and `ratelimit` are the same throttle.
    _row("rate limiting", r"rate[ _-]?limit", "429 rate_limit_exceeded: too many tokens per minute"),
    _row("HTTP 429 wording", r"too many requests", "Too many requests. Please slow down."),
    # Ours: raw Bedrock `ThrottlingException` (no formatter prefix) and throughput quotas.
    _row("throttling", r"throttl", "ThrottlingException: Too many tokens, please wait before trying again."),
    _row("per-minute quotas", r"tokens? per min(?:ute)?\b", "Too many tokens per minute for this organization"),
)

CEREBRAS_BODYLESS_PATTERN = re.compile(r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)".replace("\\s", JS_SPACE), _FLAGS)
"""Cerebras answers an overflow with a bare `400`/`413` and no body (spec 03 §3.4)."""

_CEREBRAS_ROW = Pattern("Cerebras (no body)", CEREBRAS_BODYLESS_PATTERN, "400 status code (no body)")


def matching_overflow_pattern(error_message: str, provider: str | None = None) -> Pattern | None:
    """Return the overflow row that classifies `error_message`, or None.

    This is form 1 of `is_context_overflow` alone: exclusions first, then the phrase table, then
    the Cerebras bodyless rule (only for `provider == "cerebras"`).
    """
    if not error_message:
        return None
    if any(p.regex.search(error_message) for p in NON_OVERFLOW_PATTERNS):
        return None
    for pattern in OVERFLOW_PATTERNS:
        if pattern.regex.search(error_message):
            return pattern
    if provider == "cerebras" and CEREBRAS_BODYLESS_PATTERN.search(error_message):
        return _CEREBRAS_ROW
    return None


def is_context_overflow(message: Mapping[str, Any], context_window: int | None = None) -> bool:
    """Return True when the assistant message shows the request did not fit the context window.

    Mirrors Pi `isContextOverflow(message, contextWindow?)` (pi-ai utils/overflow.ts), apart from
    the wider rate-limit exclusions documented in the module docstring.

    Args:
        message: An assistant message as stored in a session file (camelCase keys).
        context_window: The model's window in tokens. None or 0 disables forms 2 and 3, as
            `undefined`/`0` do in the reference.

    Example:
        >>> msg = {"role": "assistant", "stopReason": "error", "provider": "anthropic",
        ...        "errorMessage": "prompt is too long: 213462 tokens > 200000 maximum"}
        >>> is_context_overflow(msg)
        True
    """
    stop_reason = message.get("stopReason")
    error_message = message.get("errorMessage")
    if stop_reason == "error" and isinstance(error_message, str) and error_message:
        provider = message.get("provider")
        if matching_overflow_pattern(error_message, provider if isinstance(provider, str) else None):
            return True

    if not context_window or stop_reason not in ("stop", "length"):
        return False
    usage = message.get("usage")
    if not isinstance(usage, Mapping):
        return False
    prompt_tokens = _number(usage.get("input"), usage.get("cacheRead"))
    if prompt_tokens is None:  # the reference's sum would be NaN: every comparison is false
        return False
    if stop_reason == "stop":
        return prompt_tokens > context_window
    output = usage.get("output")
    return _is_number(output) and output == 0 and prompt_tokens >= context_window * LENGTH_STOP_FILL_RATIO


def is_recoverable_length(message: Mapping[str, Any], desired_max_output: int | float) -> bool:
    """Return True when a `length` stop ended below the intended output limit.

    Mirrors Pi `isRecoverableLength(message, desiredMaxOutput)` (pi-ai utils/overflow.ts). The
    session passes `model.maxTokens`, the limit before any context-based clamping; such a stop is
    treated as context pressure and earns one compact-and-retry (spec 03 §3.5).

    Example:
        >>> is_recoverable_length({"stopReason": "length", "usage": {"output": 64}}, 100)
        True
    """
    if message.get("stopReason") != "length" or not _is_number(desired_max_output):
        return False
    if not desired_max_output > 0:
        return False
    usage = message.get("usage")
    output = usage.get("output") if isinstance(usage, Mapping) else None
    return isinstance(output, int | float) and _is_number(output) and output < desired_max_output


def reports_usage(message: Mapping[str, Any]) -> bool:
    """True when the reply carries token counts. Ours: a server that sends no usage in streams
    (llama.cpp) leaves every count 0, so `is_recoverable_length` would read every `length` stop
    at the output cap as context pressure (0 < maxTokens) and compact and retry each time."""
    usage = message.get("usage")
    if not isinstance(usage, Mapping):
        return False
    return any(_is_number(usage.get(k)) and usage.get(k) for k in ("input", "output", "cacheRead", "totalTokens"))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(*values: object) -> float | int | None:
    total: float | int = 0
    for value in values:
        if not _is_number(value):
            return None
        total += value  # type: ignore[operator]
    return total

"""Which failed assistant messages are transient, and how long to wait before retrying them.

Mirrors Pi's `isRetryableAssistantError`, `retryDelayMs` and `RetryPolicy`
(packages/ai/src/utils/retry.ts, 0.87.0) and the session's `_isRetryableError`
(agent-session.ts): spec 03 §6.1 and §6.2.

A failed message (`stopReason == "error"`, non-empty `errorMessage`) is retryable when its text
matches no quota/billing phrase (`NON_RETRYABLE_PATTERNS`, checked first) and some transient
phrase (`RETRYABLE_PATTERNS`) or a transient HTTP status code. The session adds one rule on top:
a context overflow is never transient (`is_retryable_error`), because retrying the same request
cannot succeed; overflow goes to compaction instead.

Deliberate divergences (docs/divergences.md, "Overflow and retry classification"; spec 03 §12
item 8):

- Status codes count only as a standalone number that is not a quantity. The reference matches
  the digit runs `429`, `500`, … anywhere, so `max_tokens: 5000` or a token count `15020` made
  deterministic errors retryable.
- Throttling wording the reference misses (`ThrottlingException`, "tokens per minute") is
  retryable; in `picontext.ai.overflow` the same texts are excluded from overflow, so such a
  throttle is retried instead of compacted.
- A connection refused by a server on this machine (`is_local_refusal`) is not transient: nothing
  listens on that port, and three back-offs (~14 s) only delay the one-line answer. A remote
  host keeps its retries (a load balancer or a restarting gateway refuses for a moment).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from picontext.ai.models import is_local_base_url
from picontext.ai.overflow import JS_ANY, Pattern, is_context_overflow

__all__ = [
    "DEFAULT_MAX_AGENT_RETRY_DELAY_MS",
    "NON_RETRYABLE_PATTERNS",
    "RETRYABLE_PATTERNS",
    "TRANSIENT_STATUS_CODES",
    "RetryPolicy",
    "find_transient_status",
    "is_local_refusal",
    "is_retryable_assistant_error",
    "is_retryable_error",
    "retry_delay_ms",
]

DEFAULT_MAX_AGENT_RETRY_DELAY_MS = 60_000
_MAX_SAFE_INTEGER = 2**53 - 1
_FLAGS = re.ASCII | re.IGNORECASE


def _row(source: str, pattern: str, example: str) -> Pattern:
    # `.` in a reference pattern is JavaScript's dot: anything but a line terminator.
    return Pattern(source, re.compile(pattern.replace(".", JS_ANY), _FLAGS), example)


# Checked first: account limits that waiting will not fix.
NON_RETRYABLE_PATTERNS: tuple[Pattern, ...] = (
    _row("OpenCode Go limit", "GoUsageLimitError", '429 {"type":"GoUsageLimitError","message":"limit hit"}'),
    _row("OpenCode free tier", "FreeUsageLimitError", "FreeUsageLimitError: free usage exhausted"),
    _row("OpenCode Go monthly", "Monthly usage limit reached", "Monthly usage limit reached."),
    _row("OpenCode Go balance", "available balance", "Enable usage from your available balance"),
    _row("OpenAI quota", "insufficient_quota", "429 insufficient_quota: You exceeded your current quota"),
    _row("gateway budget", "out of budget", "Key is out of budget"),
    _row("gateway quota", "quota exceeded", "Daily quota exceeded for this key"),
    _row("billing", "billing", "Please check your plan and billing details."),
)

# Transient phrases, all unanchored and case-insensitive. `a.?b` allows one character between.
RETRYABLE_PATTERNS: tuple[Pattern, ...] = (
    _row("load", "overloaded", '529 {"type":"error","error":{"type":"overloaded_error"}}'),
    _row("load", "currently experiencing high demand", "We are currently experiencing high demand."),
    _row("rate", "rate.?limit", "Rate limit exceeded, please retry after 30 seconds."),
    _row("rate", "too many requests", "Too many requests. Please slow down."),
    _row("server", "service.?unavailable", "Service Unavailable"),
    _row("server", "server.?error", "upstream server_error"),
    _row("server", "internal.?error", "Internal error encountered."),
    _row("wrapper", "provider.?returned.?error", "Provider returned error"),
    _row(
        "wrapper",
        "exceeded request buffer limit while retrying upstream",
        "exceeded request buffer limit while retrying upstream",
    ),
    _row("network", "network.?error", "Provider finish_reason: network_error"),
    _row("network", "connection.?error", "Connection error."),
    _row("network", "connection.?refused", "connect ECONNREFUSED: connection refused"),
    _row("network", "connection.?lost", "Connection lost while streaming"),
    _row("network", "other side closed", "SocketError: other side closed"),
    _row("network", "fetch failed", "TypeError: fetch failed"),
    _row("network", "getaddrinfo", "getaddrinfo EAI_AGAIN api.anthropic.com"),
    _row("network", "ENOTFOUND", "getaddrinfo ENOTFOUND api.openai.com"),
    _row("network", "EAI_AGAIN", "EAI_AGAIN"),
    _row("network", "upstream.?connect", "upstream connect error or disconnect/reset before headers"),
    _row("network", "reset before headers", "reset before headers. reset reason: connection termination"),
    _row("network", "socket hang up", "Error: socket hang up"),
    _row("network", "socket connection was closed", "The socket connection was closed unexpectedly."),
    _row("timeout", "timed? out", "Request timed out."),
    _row("timeout", "timeout", "ETIMEDOUT: read timeout"),
    _row("stream", "terminated", "terminated"),
    _row("stream", "websocket.?closed", "WebSocket closed before the response completed"),
    _row("stream", "websocket.?error", "websocket error: 1006"),
    _row("stream", "ended without", "stream ended without a message_stop event"),
    _row("stream", "stream ended before message_stop", "Anthropic stream ended before message_stop"),
    _row(
        "stream",
        "stream ended before a terminal response event",
        "OpenAI stream ended before a terminal response event",
    ),
    _row("stream", "http2 request did not get a response", "http2 request did not get a response"),
    _row("delay cap", "retry delay", "Server requested 120s retry delay (max: 60s)."),
    _row("guidance", "you can retry your request", "An error occurred. You can retry your request."),
    _row("guidance", "try your request again", "Please try your request again later."),
    _row("guidance", "please retry your request", "Internal failure, please retry your request"),
    _row("gRPC", "ResourceExhausted", "ResourceExhausted: model busy"),
    # Ours (divergence): throttles worded without "rate limit".
    _row("throttling", "throttl", "ThrottlingException: Too many tokens, please wait before trying again."),
    _row("throttling", r"tokens? per min(?:ute)?\b", "Too many tokens per minute for this organization"),
)

TRANSIENT_STATUS_CODES: tuple[int, ...] = (429, 500, 502, 503, 504, 520, 524)

# A candidate is a whole number: no letter, digit or `_` glued to it, and not a group of a
# formatted number such as `1,500` or `2.503`.
_STATUS_CANDIDATE = re.compile(
    r"(?<![0-9A-Za-z_.,])(?:" + "|".join(map(str, TRANSIENT_STATUS_CODES)) + r")(?![0-9A-Za-z_]|[.,][0-9])"
)
# ... and not a quantity: followed by a unit, or the value of a field named like a quantity.
_UNIT_AFTER = re.compile(
    r"\s*(?:tokens?|bytes?|[kmg]i?b|ms|milliseconds?|s|secs?|seconds?|mins?|minutes?|hours?|"
    r"char(?:acter)?s?|words?|messages?|items?|lines?|requests?|%)(?![A-Za-z])",
    _FLAGS,
)
_FIELD_BEFORE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)[\"']?\s*[:=]\s*[\"']?$")
_QUANTITY_FIELD = re.compile(r"token|max|min|limit|length|size|count|num|budget", _FLAGS)


def find_transient_status(error_message: str) -> int | None:
    """Return the first transient HTTP status code written in `error_message`, or None.

    Ours, replacing the reference's bare digit match (divergence, see the module docstring).
    `429 Too Many Requests`, `Error: 503 upstream`, `status=502`, `{"code":504}` count;
    `max_tokens: 5000`, `15020 tokens`, `max_tokens: 500`, `1,500` do not.
    """
    for match in _STATUS_CANDIDATE.finditer(error_message):
        if _UNIT_AFTER.match(error_message, match.end()):
            continue
        field = _FIELD_BEFORE.search(error_message, 0, match.start())
        if field and _QUANTITY_FIELD.search(field.group(1)):
            continue
        return int(match.group())
    return None


def is_retryable_assistant_error(message: Mapping[str, Any]) -> bool:
    """Return True when a failed assistant message looks like a transient provider failure.

    Mirrors Pi `isRetryableAssistantError(message)` (pi-ai utils/retry.ts), with the status-code
    and throttling divergences of the module docstring. It does not look at overflow: callers
    handle that first (`is_retryable_error` does).

    Example:
        >>> is_retryable_assistant_error({"stopReason": "error", "errorMessage": "502 Bad Gateway"})
        True
    """
    error_message = message.get("errorMessage")
    if message.get("stopReason") != "error" or not isinstance(error_message, str) or not error_message:
        return False
    if any(p.regex.search(error_message) for p in NON_RETRYABLE_PATTERNS):
        return False
    if any(p.regex.search(error_message) for p in RETRYABLE_PATTERNS):
        return True
    return find_transient_status(error_message) is not None


_REFUSED = re.compile(r"connection refused|ECONNREFUSED", _FLAGS)


def is_local_refusal(message: Mapping[str, Any], base_url: str | None) -> bool:
    """Ours: the request to a server on this machine (`is_local_base_url`) was refused at connect.

    `picontext.ai._http.describe_transport_error` words every connect failure "... (connection
    refused)"; a server's own text saying so counts too."""
    error_message = message.get("errorMessage")
    return (message.get("stopReason") == "error" and isinstance(error_message, str)
            and bool(base_url) and is_local_base_url(str(base_url)) and bool(_REFUSED.search(error_message)))


def is_retryable_error(message: Mapping[str, Any], context_window: int | None = None,
                       base_url: str | None = None) -> bool:
    """Return True when the session should retry this failed message after a back-off.

    Mirrors Pi `AgentSession._isRetryableError` (agent-session.ts): an overflow (checked with the
    current model's window) is never retried, everything else follows
    `is_retryable_assistant_error`. Ours: with the model's `base_url`, a connection refused by a
    server on this machine is not retried either (`is_local_refusal`).
    """
    if is_context_overflow(message, context_window or 0):
        return False
    if is_local_refusal(message, base_url):
        return False
    return is_retryable_assistant_error(message)


@dataclass(frozen=True)
class RetryPolicy:
    """The `retry` settings: bounded attempts with exponential back-off and no jitter.

    Mirrors Pi `RetryPolicy` (pi-ai utils/retry.ts) and the defaults of `getRetrySettings`
    (settings-manager.ts). The first call never counts as a retry.
    """

    enabled: bool = True
    max_retries: int = 3
    """Retries after the first call (0 = none)."""
    base_delay_ms: int | float = 2000
    max_agent_delay_ms: int | float | None = DEFAULT_MAX_AGENT_RETRY_DELAY_MS
    """Cap on each computed delay; None means the default 60 s, as `undefined` does in Pi."""

    def allows(self, attempt: int) -> bool:
        """Return True when retry number `attempt` (1-based) is within the budget."""
        return self.enabled and 1 <= attempt <= self.max_retries

    def delay_ms(self, attempt: int) -> int | float:
        """Return the back-off before retry number `attempt` (see `retry_delay_ms`)."""
        return retry_delay_ms(self, attempt)


def retry_delay_ms(policy: RetryPolicy, attempt: int | float) -> int | float:
    """Return the wait before retry `attempt` (1-based): `min(base × 2^(attempt−1), cap)`.

    Mirrors Pi `retryDelayMs(policy, attempt)` (pi-ai utils/retry.ts), including its guard: a
    product that is not a safe JavaScript integer (too large, fractional, NaN) is replaced by
    2^53 − 1 before the cap applies, so the result is then the cap.

    Example:
        >>> [retry_delay_ms(RetryPolicy(), n) for n in (1, 2, 3, 10)]
        [2000, 4000, 8000, 60000]
    """
    try:
        power = 2.0 ** max(0, attempt - 1)
    except OverflowError:
        power = math.inf
    delay = policy.base_delay_ms * power
    if not (math.isfinite(delay) and delay == int(delay) and abs(delay) <= _MAX_SAFE_INTEGER):
        delay = _MAX_SAFE_INTEGER
    cap = DEFAULT_MAX_AGENT_RETRY_DELAY_MS if policy.max_agent_delay_ms is None else policy.max_agent_delay_ms
    result = min(delay, cap)
    return int(result) if result == int(result) else result

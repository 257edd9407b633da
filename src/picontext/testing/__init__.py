"""Public test doubles for code built on picontext: the scripted model server (its home is
`picontext.scripted`; these names stay importable from here) and transcript writers
(`transcripts.py`). See docs/testing.md. The suite's own doubles (PostgreSQL, PgBouncer, a
fault-injecting proxy, a llama.cpp server) live in the repository's `tests/support/`.
"""

from __future__ import annotations

from picontext.scripted import (
    Block,
    HttpError,
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    Step,
    UnexpectedModelRequest,
    http_error,
    measured,
    overflow,
    overloaded,
    rate_limit,
    raw_stream,
    reply,
    request_tokens,
    server_error,
    silent_stream,
    text,
    thinking,
    tokens,
    tool_call,
)

__all__ = [
    "Block",
    "HttpError",
    "RecordedRequest",
    "Reply",
    "ScriptedModelServer",
    "Step",
    "UnexpectedModelRequest",
    "http_error",
    "measured",
    "overflow",
    "overloaded",
    "rate_limit",
    "raw_stream",
    "reply",
    "request_tokens",
    "server_error",
    "silent_stream",
    "text",
    "thinking",
    "tokens",
    "tool_call",
]

"""A scripted model: `ScriptedModelServer`, a real HTTP model server on 127.0.0.1 that replays a
script of replies and errors in the OpenAI Chat Completions, OpenAI Responses, Anthropic Messages
and Gemini dialects, and records every request. `picontext demo` plays its coding session on
one; code built on picontext tests against one without network or keys (docs/testing.md).
"""

from __future__ import annotations

from picontext.scripted.model_server import (
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

"""Public test doubles for code built on picontext.

`ScriptedModelServer` is a real HTTP model server on 127.0.0.1 that replays a script of replies
and errors in the OpenAI Chat Completions, OpenAI Responses, Anthropic Messages and Gemini
dialects, and records every request. See docs/testing.md.
"""

from __future__ import annotations

from picontext.testing.model_server import (
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

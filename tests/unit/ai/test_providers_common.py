"""Shared pure pieces: SSE decoding, partial JSON, message transforms, error text, retry-after."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from picontext.ai._http import (
    decode_sse,
    format_http_error,
    parse_retry_after,
)
from picontext.ai.models import default_catalog
from picontext.ai.providers import StreamOptions, parse_streaming_json
from picontext.ai.providers._base import split_system
from picontext.ai.providers.transform import transform_messages


def test_decode_sse_multiline_comments_and_trailing_event() -> None:
    lines = [": ping", "event: a", "data: 1", "data: 2", "", "data: x", "", "data: last"]
    evs = list(decode_sse(lines))
    assert [(e.event, e.data) for e in evs] == [("a", "1\n2"), (None, "x"), (None, "last")]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"path": "a.txt"}', {"path": "a.txt"}),
        ('{"path": "a.t', {"path": "a.t"}),
        ('{"a": 1, "b', {"a": 1}),
        ('{"a": 1, "b":', {"a": 1}),
        ('{"a": [1, 2', {"a": [1, 2]}),
        ('{"a": {"b": "c\\', {"a": {"b": "c"}}),
        ("", {}),
        ("[1]", {}),
    ],
)
def test_parse_streaming_json(raw: str, expected: dict[str, object]) -> None:
    assert parse_streaming_json(raw) == expected


def test_format_http_error() -> None:
    assert format_http_error(400, "") == "400 status code (no body)"
    assert format_http_error(413, '{"error":{"type":"request_too_large"}}') == (
        '413 {"error":{"type":"request_too_large"}}'
    )
    assert format_http_error(500, "x" * 5000).endswith("... [truncated 1000 chars]")


def test_retry_after_headers() -> None:
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0) == 10.0
    assert parse_retry_after({"retry-after": "soon"}) is None


def test_split_system_leading_and_later_messages() -> None:
    prompt, rest = split_system(
        {
            "messages": [
                {"role": "system", "content": [{"type": "text", "text": "A"}], "timestamp": 0},
                {"role": "user", "content": "hi", "timestamp": 1},
                {"role": "system", "content": "B", "timestamp": 2},
            ]
        }
    )
    assert prompt == "A\n\nB" and [m["role"] for m in rest] == ["user"]


def test_transform_drops_failed_turns_and_fills_missing_results() -> None:
    model = default_catalog().get("anthropic/claude-sonnet-4-5")
    other = {"api": "openai-completions", "provider": "openai", "model": "gpt-4o", "usage": {}, "timestamp": 0}
    msgs = [
        {"role": "user", "content": "q", "timestamp": 0},
        {**other, "role": "assistant", "stopReason": "error", "content": [{"type": "text", "text": "bad"}]},
        {
            **other,
            "role": "assistant",
            "stopReason": "toolUse",
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "toolCall", "id": "call|weird/id", "name": "read", "arguments": {}},
            ],
        },
        {"role": "user", "content": "next", "timestamp": 2},
    ]
    original = repr(msgs)
    out = transform_messages(msgs, model, lambda i, _m, _s: i.replace("|", "_").replace("/", "_"))  # type: ignore[arg-type]
    assert repr(msgs) == original  # input untouched
    assert [m["role"] for m in out] == ["user", "assistant", "toolResult", "user"]
    assert out[1]["content"][0] == {"type": "text", "text": "hmm"}  # foreign thinking becomes text
    assert out[1]["content"][1]["id"] == "call_weird_id"
    assert out[2]["toolCallId"] == "call_weird_id" and out[2]["isError"] is True


@pytest.mark.parametrize(
    "api", ["openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai"]
)
def test_already_aborted_signal_ends_at_once_without_a_request(api: str) -> None:
    from picontext.ai.event_stream import AbortSignal
    from picontext.ai.stream import stream
    from picontext.scripted import ScriptedModelServer

    async def run(model: Any) -> tuple[list[str], Any]:
        signal = AbortSignal()
        signal.abort()
        s = stream(
            model,
            {"messages": [{"role": "user", "content": "hi", "timestamp": 1}]},
            StreamOptions(api_key="k", signal=signal),
        )
        types = [ev["type"] async for ev in s]
        return types, await asyncio.wait_for(s.result(), 2)

    with ScriptedModelServer() as srv:
        types, message = asyncio.run(asyncio.wait_for(run(srv.model(api)), 5))  # type: ignore[arg-type]
        assert srv.requests == []
    assert types == ["error"]
    assert message["stopReason"] == "aborted" and message["errorMessage"] == "Request was aborted"


def test_short_hash_matches_pi() -> None:
    from picontext.ai.providers.simple_options import short_hash

    for text, expected in SHORT_HASHES.items():
        assert short_hash(text) == expected


# pi-ai 0.87.0 dist/utils/hash.js shortHash, computed with node
SHORT_HASHES = {
    "": "k4n83c7h0j2b",
    "call_1|fc_abc": "1ovdkvd13vy6fo",
    "a" * 100: "1jlqf2piizwxq",
    "h\u00e9llo \U0001f600 w\u00f6rld": "zpm4hl1o2ak9i",
    "rs_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef": "hgxku110zic69",
}


def test_output_cap_keeps_an_eighth_of_a_small_window_free() -> None:
    from picontext.ai.providers.simple_options import base_max_tokens

    def cap(window: int, context_chars: int, max_tokens: int = 100_000) -> int:
        model = {"id": "m", "contextWindow": window, "maxTokens": max_tokens}
        context = {"messages": [{"role": "user", "content": "x" * context_chars, "timestamp": 1}]}
        return base_max_tokens(model, context, None)  # type: ignore[arg-type]

    assert cap(2048, 4000) == 2048 - 1000 - 256  # Pi: 1 (4096 is twice the window)
    assert cap(8192, 20000) == 8192 - 5000 - 1024  # Pi: 1 once the context passes ~4000 tokens
    assert cap(200_000, 400_000) == 200_000 - 100_000 - 4096  # from 32768 up, Pi's 4096
    assert cap(32768, 4000) == 32768 - 1000 - 4096
    assert cap(2048, 8000) == 1  # an estimate over the window still leaves the floor of one token
    assert cap(2048, 40, max_tokens=300) == 300  # the model's own cap when it fits

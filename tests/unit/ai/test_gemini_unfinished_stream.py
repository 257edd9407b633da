"""A Gemini stream that ends without a finish reason: block-end events come before the error."""

from __future__ import annotations

import json

import httpx

from picontext.ai._http import SseEvent
from picontext.ai.models import default_catalog
from picontext.ai.providers import StreamOptions, parse_events
from picontext.ai.providers.google_gemini import GeminiParser, stream_google_gemini

MODEL = default_catalog().get("google/gemini-2.5-flash")
CHUNKS = [
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "plan", "thought": True}]}}]},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hello "}]}}]},
    {"candidates": [{"content": {"role": "model", "parts": [{"text": "world"}]}}]},
]


def _check(events: list[dict]) -> None:
    types = [e["type"] for e in events]
    assert types == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "error",
    ]
    assert events[-2]["content"] == "Hello world"
    final = events[-1]["error"]
    assert final["stopReason"] == "error"
    assert final["errorMessage"] == "Google stream ended without a finish reason"
    assert final["content"] == [{"type": "thinking", "thinking": "plan"}, {"type": "text", "text": "Hello world"}]


def test_parse_events_keeps_block_ends_before_error() -> None:
    events = parse_events(GeminiParser, MODEL, [SseEvent(None, json.dumps(c)) for c in CHUNKS])
    _check(events)  # type: ignore[arg-type]


async def test_http_stream_keeps_block_ends_before_error() -> None:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in CHUNKS).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        s = stream_google_gemini(
            MODEL,
            {"messages": [{"role": "user", "content": "hi", "timestamp": 0}]},
            StreamOptions(api_key="k", client=client),
        )
        events = [ev async for ev in s]
    _check(events)  # type: ignore[arg-type]
    assert (await s.result())["stopReason"] == "error"

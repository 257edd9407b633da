"""Why `compat.serialRequests` exists, on the real llama-cpp-python server: with its defaults, a
second request arriving while it streams a reply cuts that reply off; with the flag set, the
second request waits and both replies end normally."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from llama_fixture import serve_llama

from picontext.ai.providers import StreamOptions
from picontext.ai.stream import complete, stream
from picontext.testing.llama_server import LlamaServer


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    yield from serve_llama(1024)


def _model(llama: LlamaServer, compat: dict[str, Any] | None) -> Any:
    [model] = llama.models_json(max_tokens=96)["providers"]["llama"]["models"]
    model = {**model, "provider": "llama", "api": "openai-completions", "baseUrl": llama.url + "/v1",
             "name": "smollm2", "reasoning": False, "input": ["text"],
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}
    # models_json declares serialRequests (what a user of this server should write); the test
    # decides it, keeping the pinned sampling.
    sampling = {k: v for k, v in (model.get("compat") or {}).items() if k != "serialRequests"}
    model["compat"] = {**sampling, **(compat or {})}
    return model


def _ctx(prompt: str) -> Any:
    return {"messages": [{"role": "user", "content": prompt, "timestamp": 1}]}


async def _overlapping(model: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A long reply, and a second request sent as soon as the first reply's text starts."""
    # Greedy decoding (temperature 0, LlamaServer.SAMPLING) answers "One hundred." to a request to
    # count; a story runs to the 96-token cap, long enough for the second request to overlap it.
    first = stream(model, _ctx("Tell me a long story about a dragon who learns to bake bread."), StreamOptions())
    started = asyncio.Event()

    async def drain() -> dict[str, Any]:
        async for event in first:
            if event["type"] == "text_delta":
                started.set()
        started.set()
        return await first.result()

    draining = asyncio.create_task(drain())
    await asyncio.wait_for(started.wait(), 120)
    second = await asyncio.wait_for(complete(model, _ctx("Say hello."), StreamOptions()), 300)
    return await asyncio.wait_for(draining, 300), second


async def test_the_real_server_cuts_a_streaming_reply_off_when_another_request_arrives(llama: LlamaServer) -> None:
    first, second = await _overlapping(_model(llama, None))
    assert first["stopReason"] == "error", first  # cut off: the stream ended without a finish reason
    assert second["stopReason"] in ("stop", "length")


async def test_with_serial_requests_both_replies_end_normally(llama: LlamaServer) -> None:
    first, second = await _overlapping(_model(llama, {"serialRequests": True}))
    assert first["stopReason"] in ("stop", "length"), first
    assert second["stopReason"] in ("stop", "length"), second
    assert first["content"] and first["content"][0]["text"].strip()

"""`compat.serialRequests`: requests to a server that cannot take two at once (llama-cpp-python's
server cancels the one it is streaming) wait for the one in flight; without the flag they overlap."""

from __future__ import annotations

import asyncio
import threading

import pytest

from picontext.ai.providers import StreamOptions
from picontext.ai.stream import complete
from picontext.testing import ScriptedModelServer, text


def _ctx(prompt: str) -> dict:
    return {"messages": [{"role": "user", "content": prompt, "timestamp": 1}]}


async def _two_at_once(server: ScriptedModelServer, compat: dict | None) -> tuple[float, float]:
    server.expect(text("a long reply streamed slowly word by word").slow(0.05), text("short"))
    model = dict(server.model("openai-completions"))
    if compat is not None:
        model["compat"] = compat
    first = asyncio.create_task(complete(model, _ctx("first"), StreamOptions(api_key="k")))  # type: ignore[arg-type]
    await asyncio.to_thread(server.wait_for_requests, 1)
    second = await complete(model, _ctx("second"), StreamOptions(api_key="k"))  # type: ignore[arg-type]
    assert (await first)["stopReason"] == "stop" and second["stopReason"] == "stop"
    one, two = server.requests
    end = server.answered_at(one)
    assert end is not None
    return end, two.received


async def test_a_serial_server_gets_the_second_request_after_the_first_has_ended(
        server: ScriptedModelServer) -> None:
    first_end, second_arrived = await _two_at_once(server, {"serialRequests": True})
    assert second_arrived >= first_end


async def _overlapping(server: ScriptedModelServer, compat: dict | None) -> None:
    """The first reply is held until the second request has arrived: only requests that are not
    serialized can both be in flight (events decide; a serialized pair fails on the guard)."""
    release = threading.Event()
    server.expect(text("first reply").hold_after(1, release), text("second"))
    model = dict(server.model("openai-completions"))
    if compat is not None:
        model["compat"] = compat
    first = asyncio.create_task(complete(model, _ctx("first"), StreamOptions(api_key="k")))  # type: ignore[arg-type]
    await asyncio.to_thread(server.wait_for_requests, 1)
    second = asyncio.create_task(complete(model, _ctx("second"), StreamOptions(api_key="k")))  # type: ignore[arg-type]
    try:
        await asyncio.to_thread(server.wait_for_requests, 2, 60)
    finally:
        release.set()
    assert (await first)["stopReason"] == "stop" and (await second)["stopReason"] == "stop"
    one, two = server.requests
    end = server.answered_at(one)
    assert end is not None and two.received < end


async def test_without_the_flag_the_requests_overlap(server: ScriptedModelServer) -> None:
    await _overlapping(server, None)


@pytest.mark.parametrize("flag", [False, "yes", 1])
async def test_only_true_turns_it_on(server: ScriptedModelServer, flag: object) -> None:
    await _overlapping(server, {"serialRequests": flag})


async def test_an_aborted_request_frees_the_server_for_the_next(server: ScriptedModelServer) -> None:
    from picontext.ai.event_stream import AbortSignal

    server.expect(text("a reply that is aborted midway through its many words").slow(0.2), text("next"))
    model = dict(server.model("openai-completions"))
    model["compat"] = {"serialRequests": True}
    signal = AbortSignal()
    first = asyncio.create_task(complete(model, _ctx("first"), StreamOptions(api_key="k", signal=signal)))  # type: ignore[arg-type]
    await asyncio.to_thread(server.wait_for_requests, 1)
    signal.abort()
    assert (await first)["stopReason"] == "aborted"
    second = await asyncio.wait_for(complete(model, _ctx("second"), StreamOptions(api_key="k")), 30)  # type: ignore[arg-type]
    assert second["stopReason"] == "stop"

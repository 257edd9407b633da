"""AssistantMessageStream and AbortSignal behaviour (push mode and producer mode)."""

from __future__ import annotations

import asyncio

from picontext.ai.event_stream import AbortSignal, AssistantMessageStream
from picontext.ai.events import EVENT_TYPES, is_terminal
from picontext.ai.types import AssistantMessage, empty_usage


def _msg(stop: str = "stop") -> AssistantMessage:
    return {
        "role": "assistant",
        "content": [],
        "api": "x",
        "provider": "p",
        "model": "m",
        "usage": empty_usage(),
        "stopReason": stop,  # type: ignore[typeddict-item]
        "timestamp": 0,
    }


def test_event_type_strings_are_pi_wire_strings() -> None:
    assert EVENT_TYPES == (
        "start", "text_start", "text_delta", "text_end", "thinking_start", "thinking_delta",
        "thinking_end", "toolcall_start", "toolcall_delta", "toolcall_end", "done", "error",
    )  # fmt: skip
    assert is_terminal({"type": "done", "reason": "stop", "message": _msg()})


async def test_push_mode_delivers_events_then_result() -> None:
    s = AssistantMessageStream()
    m = _msg()
    s.push({"type": "start", "partial": m})
    s.push({"type": "done", "reason": "stop", "message": m})
    s.push({"type": "start", "partial": m})  # after the terminal event: dropped
    assert [e["type"] async for e in s] == ["start", "done"]
    assert await s.result() is m


async def test_result_without_iterating() -> None:
    m = _msg("error")

    async def run(stream: AssistantMessageStream) -> None:
        await asyncio.sleep(0)
        stream.push({"type": "error", "reason": "error", "error": m})

    s = AssistantMessageStream.from_producer(run)
    assert await s.result() is m


async def test_abort_signal_cancels_producer() -> None:
    signal = AbortSignal()
    started = asyncio.Event()

    async def run(stream: AssistantMessageStream) -> None:
        m = _msg("pending")
        try:
            started.set()
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            m["stopReason"] = "aborted"
            stream.push({"type": "error", "reason": "aborted", "error": m})

    s = AssistantMessageStream.from_producer(run, signal=signal)
    await started.wait()
    signal.abort()
    msg = await asyncio.wait_for(s.result(), 5)
    assert msg["stopReason"] == "aborted" and s.cancel_requested


def test_abort_signal_is_one_shot() -> None:
    calls: list[int] = []
    sig = AbortSignal()
    sig.add_listener(lambda: calls.append(1))
    sig.abort("x")
    sig.abort("y")
    sig.add_listener(lambda: calls.append(2))  # already aborted: runs at once
    assert calls == [1, 2] and sig.reason == "x" and sig.aborted


async def test_producer_without_terminal_event_does_not_hang() -> None:
    async def run(stream: AssistantMessageStream) -> None:
        return None

    s = AssistantMessageStream.from_producer(run)
    assert [e async for e in s] == []

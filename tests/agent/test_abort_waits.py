"""One await-unless-aborted helper, and no listener left behind on a run's signal.

Every wait of the runtime that an abort must cut short (a tool, a retry back-off, a compaction's
summary, a background summary the threshold waits for) goes through `wait_unless_aborted` or
`aborts_with`; both take their listener off the signal when the wait ends, however it ends."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, ClassVar

from runtime_helpers import make

from picontext.agent.types import AgentToolResult
from picontext.ai.event_stream import AbortSignal, aborts_with, wait_unless_aborted
from picontext.ai.retry import RetryPolicy
from picontext.testing import ScriptedModelServer, overloaded, reply, text, tokens, tool_call


async def test_the_wait_ends_when_the_work_is_done_and_leaves_no_listener() -> None:
    signal = AbortSignal()
    assert await wait_unless_aborted(asyncio.sleep(0), signal) is True
    assert signal.listener_count == 0


async def test_the_wait_ends_at_an_abort_from_another_thread_and_the_work_goes_on() -> None:
    signal = AbortSignal()
    gate = asyncio.Event()
    work = asyncio.ensure_future(gate.wait())
    waiting = asyncio.ensure_future(wait_unless_aborted(work, signal))
    await asyncio.sleep(0)
    assert signal.listener_count == 1  # registered while it waits
    threading.Thread(target=signal.abort, args=("stop",)).start()
    assert await waiting is False
    assert signal.listener_count == 0 and not work.done()  # the caller decides what becomes of the work
    gate.set()
    await work


async def test_a_timeout_or_a_cancelled_waiter_leaves_no_listener() -> None:
    signal = AbortSignal()
    never = asyncio.ensure_future(asyncio.Event().wait())
    assert await wait_unless_aborted(never, signal, timeout=0) is False
    assert signal.listener_count == 0
    waiter = asyncio.ensure_future(wait_unless_aborted(never, signal))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert signal.listener_count == 0
    never.cancel()


def test_a_linked_signal_follows_its_parent_only_inside_the_block() -> None:
    parent, child, later = AbortSignal(), AbortSignal(), AbortSignal()
    with aborts_with(parent, child):
        assert parent.listener_count == 1
    assert parent.listener_count == 0
    with aborts_with(parent, later):
        parent.abort("user")
    assert later.aborted and not child.aborted


class SignalTool:
    """Returns at once, remembering the signal the run gave it (the run's own signal)."""

    name: ClassVar[str] = "probe"
    label: ClassVar[str] = "probe"
    description: ClassVar[str] = "probe"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.signals: list[AbortSignal] = []

    async def execute(self, call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        self.signals.append(signal)
        return AgentToolResult.text("x" * 4000)


async def test_a_run_with_a_tool_a_retry_and_a_compaction_leaves_no_listener_on_its_signal(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    probe = SignalTool()
    session, events = make(server, tmp_path, window=2600, tools=[probe],
                           compaction={"reserveTokens": 400, "keepRecentTokens": 1100},
                           retry=RetryPolicy(max_retries=3, base_delay_ms=1))
    for i in range(2):
        server.expect(reply(text(f"answer {i}"), usage=tokens(100 + 210 * (i + 1), 5)))
        await session.prompt(f"question {i} " + "q" * 800)
    server.expect(
        overloaded(),  # a retry back-off inside the run
        reply(tool_call("probe", {}), usage=tokens(1290, 10)),  # over the threshold: compacted between turns
        text("SUMMARY of the earlier questions"),
        text("final answer"),
    )
    await session.prompt("third")
    assert [e["type"] for e in events].count("compaction_end") == 1
    assert [e["type"] for e in events].count("auto_retry_start") == 1
    assert len(probe.signals) == 1
    assert probe.signals[0].listener_count == 0  # it was 2: the compaction's and the back-off's


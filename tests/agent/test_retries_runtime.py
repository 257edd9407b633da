"""Transient-error retries in the session (spec 03 §6, scenarios S6, S7)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from runtime_helpers import compact_types, file_entries, kinds, make, request_roles, types

from picontext.ai.retry import RetryPolicy
from picontext.scripted import ScriptedModelServer, http_error, overloaded, server_error, text, tool_call


async def test_s6_one_overloaded_then_success(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, retry=RetryPolicy(max_retries=3, base_delay_ms=1))
    server.expect(overloaded(), text("fine"))
    await session.prompt("hi")
    seq = compact_types(events)
    i = seq.index("agent_end")
    assert seq[i:i + 4] == ["agent_end", "auto_retry_start", "entry_appended", "agent_start"]
    assert [e["willRetry"] for e in events if e["type"] == "agent_end"] == [True, False]
    start = next(e for e in events if e["type"] == "auto_retry_start")
    assert (start["attempt"], start["maxAttempts"], start["delayMs"]) == (1, 3, 1)
    assert "verloaded" in start["errorMessage"]
    end = next(e for e in events if e["type"] == "auto_retry_end")
    assert end == {"type": "auto_retry_end", "success": True, "attempt": 1}
    # the success end comes right after the reply's message_end, before turn_end
    j = seq.index("auto_retry_end")
    assert seq[j - 1] == "message_end" and seq[j + 1] == "turn_end"
    assert request_roles(server, 1) == ["system", "user"]
    entries = file_entries(session)
    assert kinds(entries)[-4:] == ["user", "assistant", "context_edit", "assistant"]
    assert [m["role"] for m in session.messages] == ["system", "user", "assistant"]
    assert session.retries.attempt == 0 and not session.is_retrying


async def test_failed_attempt_with_tool_calls_is_not_executed_and_omitted(
    server: ScriptedModelServer, tmp_path: Path
) -> None:
    session, _ = make(server, tmp_path, retry=RetryPolicy(base_delay_ms=1))
    server.expect(tool_call("big", {"size": 10}).drop_after(3), text("ok"))
    await session.prompt("go")
    assert request_roles(server, 1) == ["system", "user"]
    assert "toolResult" not in kinds(file_entries(session))


async def test_s7_exhausted_retries_keep_the_last_error(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, retry=RetryPolicy(max_retries=2, base_delay_ms=1))
    server.expect(server_error(503), server_error(503), server_error(503))
    await session.prompt("hi")
    assert [e["willRetry"] for e in events if e["type"] == "agent_end"] == [True, True, False]
    assert [e["attempt"] for e in events if e["type"] == "auto_retry_start"] == [1, 2]
    end = [e for e in events if e["type"] == "auto_retry_end"]
    assert len(end) == 1 and end[0]["success"] is False and end[0]["attempt"] == 2 and end[0]["finalError"]
    assert session.messages[-1]["stopReason"] == "error"
    assert len(server.requests) == 3
    assert "compaction_start" not in types(events)


async def test_no_retry_when_disabled_or_not_transient(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, retry=RetryPolicy(enabled=False))
    server.expect(overloaded())
    await session.prompt("a")
    session2, events2 = make(server, tmp_path / "b")
    server.expect(http_error(401, {"error": {"message": "invalid_api_key"}}))
    await session2.prompt("b")
    assert "auto_retry_start" not in types(events) + types(events2)
    assert len(server.requests) == 2


async def test_abort_during_backoff_cancels_the_retry(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, retry=RetryPolicy(base_delay_ms=60_000))
    server.expect(overloaded())
    started = asyncio.Event()
    session.subscribe(lambda e: started.set() if e["type"] == "auto_retry_start" else None)
    run = asyncio.ensure_future(session.prompt("x"))
    await started.wait()
    await asyncio.sleep(0)
    assert session.is_retrying
    await session.abort()
    await run
    end = [e for e in events if e["type"] == "auto_retry_end"]
    assert end == [{"type": "auto_retry_end", "success": False, "attempt": 1, "finalError": "Retry cancelled"}]
    assert len(server.requests) == 1 and events[-1]["type"] == "agent_settled"
    # the failed attempt stays omitted; the next prompt works
    server.expect(text("back"))
    await session.prompt("again")
    assert request_roles(server, 1) == ["system", "user", "user"]


async def test_retry_whose_answer_calls_tools_runs_the_whole_loop(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path)
    server.expect(overloaded(), tool_call("big", {"size": 20}), text("done"))
    await session.prompt("x")
    assert len(server.requests) == 3 and session.messages[-1]["content"][0]["text"] == "done"
    server.expect(text("more"))
    await session.prompt("y")
    assert len(server.requests) == 4

"""Automatic and manual compaction inside a live AgentSession (spec 03 §2, §4, §5, §7, §10)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import compact_types, file_entries, kinds, make, request_text, types, wait_for_requests

from picontext.agent.hooks import Hooks
from picontext.agent.session import SessionBusyError
from picontext.errors import NothingToCompact
from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, reply, text, tokens, tool_call

S2 = {"reserveTokens": 400, "keepRecentTokens": 1100}


async def history(session: Any, server: ScriptedModelServer, n: int = 2, size: int = 800) -> None:
    """`n` exchanges: long questions, short answers (so cut points land on user messages)."""
    for i in range(n):
        server.expect(reply(text(f"answer {i}"), usage=tokens(100 + (size // 4 + 10) * (i + 1), 5)))
        await session.prompt(f"question {i} " + "q" * size)


async def test_s1_plain_prompt_no_compaction(server: ScriptedModelServer, tmp_path: Path) -> None:
    server.expect(text("hi"))
    session, events = make(server, tmp_path)
    await session.prompt("hello")
    assert compact_types(events) == [
        "agent_start", "turn_start", "message_start", "message_end", "message_start", "message_end",
        "message_start", "message_end", "turn_end", "agent_end", "agent_settled",
    ]  # fmt: skip
    assert kinds(file_entries(session))[-3:] == ["system", "user", "assistant"]


async def test_s2_threshold_crossed_mid_run_compacts_between_turns(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, window=2600, compaction=S2)
    await history(session, server)
    events.clear()
    server.expect(
        reply(tool_call("big", {"size": 4000}), usage=tokens(1290, 10)),
        text("SUMMARY of the earlier questions"),  # the summary request
        text("final answer"),
    )
    await session.prompt("third")
    assert compact_types(events) == [
        "agent_start", "turn_start", "message_start", "message_end", "message_start", "message_end",
        "tool_execution_start", "tool_execution_end", "message_start", "message_end", "turn_end",
        "compaction_start", "compaction_end", "turn_start", "message_start", "message_end", "turn_end",
        "agent_end", "agent_settled",
    ]  # fmt: skip
    start = next(e for e in events if e["type"] == "compaction_start")
    end = next(e for e in events if e["type"] == "compaction_end")
    assert start["reason"] == "threshold" and end["reason"] == "threshold" and end["willRetry"] is False
    assert end["tokensAfter"] == end["result"]["estimatedTokensAfter"] and end["tokensBefore"] > end["tokensAfter"]
    assert types(events).count("agent_start") == 1
    resumed = request_text(server, len(server.requests) - 1)
    assert "SUMMARY of the earlier questions" in resumed and "lorem ipsum" in resumed
    texts = [m.get("content") for m in server.requests[-1].body["messages"]]
    assert not any(isinstance(t, str) and t.startswith("question 0") for t in texts)  # only in the summary
    assert kinds(file_entries(session))[-5:] == ["user", "assistant", "toolResult", "compaction", "assistant"]
    assert session.messages[-1]["content"][0]["text"] == "final answer"


async def test_threshold_on_final_answer_compacts_after_the_run(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, compaction={"keepRecentTokens": 50})
    await history(session, server, n=2)
    events.clear()
    server.expect(reply(text("big context answer"), usage=tokens(190_000, 10)), text("SUMMARY"))
    await session.prompt("next")
    assert compact_types(events)[-4:] == ["agent_end", "compaction_start", "compaction_end", "agent_settled"]
    assert len(server.requests) == 4  # three answers and one summary; no extra conversation request
    # right after a compaction the usage is unknown, until the next reply
    usage = session.get_context_usage()
    assert usage is not None and usage.tokens is None and usage.percent is None and usage.context_window == 200_000
    # stale usage: the pre-prompt check sees the 190k reply, now older than the compaction: nothing happens
    events.clear()
    server.expect(reply(text("small"), usage=tokens(900, 5)))
    await session.prompt("again")
    assert "compaction_start" not in types(events)
    usage = session.get_context_usage()
    assert usage is not None and usage.tokens == 905 and usage.percent == pytest.approx(905 / 2000)


async def test_exactly_at_threshold_does_not_compact(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, window=10_000, compaction={"reserveTokens": 1000})
    server.expect(reply(text("a"), usage=tokens(8990, 10)))
    await session.prompt("x")
    assert "compaction_start" not in types(events)


async def test_compaction_disabled_never_compacts(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, compaction={"enabled": False, "keepRecentTokens": 50})
    await history(session, server, n=1)
    server.expect(reply(text("a"), usage=tokens(199_000, 10)))
    await session.prompt("x")
    assert "compaction_start" not in types(events)
    assert session.auto_compaction_enabled is False


async def test_aborted_reply_not_checked_after_run_but_before_next_prompt(
    server: ScriptedModelServer, tmp_path: Path
) -> None:
    """S10: an aborted reply with high usage compacts before the next prompt's agent_start."""
    manager = SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    session, events = make(server, tmp_path, manager=manager, compaction={"keepRecentTokens": 50})
    await history(session, server, n=2)
    model = session.model
    manager.append_message({"role": "user", "content": [{"type": "text", "text": "long task"}], "timestamp": 1})
    manager.append_message({
        "role": "assistant", "content": [{"type": "text", "text": "partial"}], "api": model["api"],
        "provider": model["provider"], "model": model["id"], "stopReason": "aborted", "timestamp": 2,
        "usage": {"input": 190_000, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 190_010,
                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
    })
    events.clear()
    server.expect(text("SUMMARY"), text("fresh answer"))
    await session.prompt("continue please")
    seq = compact_types(events)
    assert seq[:3] == ["compaction_start", "compaction_end", "agent_start"]
    assert events[0]["reason"] == "threshold"
    assert kinds(file_entries(session))[-3:] == ["compaction", "user", "assistant"]


async def test_manual_compact_and_nothing_to_compact(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, compaction={"keepRecentTokens": 50})
    with pytest.raises(NothingToCompact, match="Nothing to compact"):
        await session.compact()
    end = events[-1]
    assert end["type"] == "compaction_end" and end["errorMessage"].startswith("Compaction failed: Nothing to compact")
    await history(session, server, n=2)
    events.clear()
    server.expect(text("MANUAL SUMMARY"))
    result = await session.compact("focus on the questions")
    assert result["summary"].startswith("MANUAL SUMMARY") and result["estimatedTokensAfter"] > 0
    assert "focus on the questions" in request_text(server, -1)
    assert types(events) == ["compaction_start", "compaction_end"]
    assert events[-1]["reason"] == "manual" and events[-1]["result"]["firstKeptEntryId"] == result["firstKeptEntryId"]
    with pytest.raises(NothingToCompact, match="Already compacted"):
        await session.compact()


async def test_hooks_supply_cancel_and_report(server: ScriptedModelServer, tmp_path: Path) -> None:
    hooks = Hooks()
    seen: list[tuple[str, Any]] = []
    decision: dict[str, Any] = {"cancel": True}

    def before(event: dict[str, Any]) -> dict[str, Any]:
        seen.append(("before", (event["reason"], event["willRetry"], event["preparation"].settings.keep_recent_tokens)))
        return decision

    hooks.on("session_before_compact", before)
    hooks.on("session_compact", lambda e: seen.append(("compact", e["compactionEntry"]["id"])))
    hooks.on("session_compact_failed", lambda e: seen.append(("failed", e["aborted"])))
    session, events = make(server, tmp_path, compaction={"keepRecentTokens": 50}, hooks=hooks)
    await history(session, server, n=2)
    with pytest.raises(Exception, match="Compaction cancelled"):
        await session.compact()
    assert seen == [("before", ("manual", False, 50)), ("failed", True)]
    assert events[-1]["aborted"] is True and "errorMessage" not in events[-1]
    decision.clear()
    decision["compaction"] = {"summary": "FROM HOOK", "firstKeptEntryId": session.manager.get_leaf_id(),
                              "tokensBefore": 123}
    result = await session.compact()
    entry = file_entries(session)[-1]
    assert entry["type"] == "compaction" and entry["summary"] == "FROM HOOK" and entry["fromHook"] is True
    assert seen[-1] == ("compact", entry["id"]) and result["tokensBefore"] == 123


async def test_summary_failure_reports_auto_compaction_failed(server: ScriptedModelServer, tmp_path: Path) -> None:
    from picontext.testing import http_error

    session, events = make(server, tmp_path, compaction={"keepRecentTokens": 50, "fallbackSummary": False})
    await history(session, server, n=2)
    events.clear()
    server.expect(reply(text("a"), usage=tokens(195_000, 10)), http_error(400, {"error": {"message": "bad summary"}}),
                  http_error(400, {"error": {"message": "bad summary"}}))
    await session.prompt("x")
    end = next(e for e in events if e["type"] == "compaction_end")
    assert end["reason"] == "threshold" and end["aborted"] is False
    assert end["errorMessage"].startswith("Auto-compaction failed: ") and "bad summary" in end["errorMessage"]
    assert "compaction" not in kinds(file_entries(session))


async def test_operations_never_race(server: ScriptedModelServer, tmp_path: Path) -> None:
    release = threading.Event()
    session, _ = make(server, tmp_path, compaction={"keepRecentTokens": 50})
    await history(session, server, n=2)
    server.expect(text("SLOW SUMMARY words here").hold_after(1, release))
    started = asyncio.Event()
    session.subscribe(lambda e: started.set() if e["type"] == "compaction_start" else None)
    task = asyncio.ensure_future(session.compact())
    await started.wait()
    try:
        assert session.is_compacting
        with pytest.raises(SessionBusyError, match="compaction is in progress"):
            await session.prompt("now?")
        with pytest.raises(SessionBusyError, match="already in progress"):
            await session.compact()
        with pytest.raises(SessionBusyError, match="compaction or tree navigation"):
            await session.navigate_tree(session.manager.get_entries()[0]["id"])
    finally:
        release.set()
    await task
    assert not session.is_compacting and session.is_idle


async def test_ctrl_c_during_compaction_leaves_a_valid_file(server: ScriptedModelServer, tmp_path: Path) -> None:
    release = threading.Event()
    session, events = make(server, tmp_path, compaction={"keepRecentTokens": 50})
    await history(session, server, n=2)
    before = file_entries(session)
    server.expect(reply(text("a"), usage=tokens(195_000, 10)), text("NEVER FINISHED summary").hold_after(1, release))
    run = asyncio.ensure_future(session.prompt("x"))
    try:
        await wait_for_requests(server, 4)  # the summary request is streaming (held by the server)
        assert session.is_compacting
        await session.abort()  # what Ctrl+C does
    finally:
        release.set()
    await run
    end = next(e for e in events if e["type"] == "compaction_end")
    assert end["aborted"] is True and "errorMessage" not in end
    after = SessionManager.open(session.manager.get_session_file() or "")
    assert [e["type"] for e in after.get_entries()] == [e["type"] for e in before[1:]] + ["message", "message"]
    assert session.is_idle
    # the context is still over the threshold: the next prompt compacts first, then answers
    server.expect(text("SUMMARY"), text("works"))
    await session.prompt("still alive?")
    assert session.messages[-1]["content"][0]["text"] == "works"
    assert kinds(file_entries(session))[-3:] == ["compaction", "user", "assistant"]


async def test_prompt_aborted_during_its_pre_prompt_compaction_is_given_back(
    server: ScriptedModelServer, tmp_path: Path
) -> None:
    """Ctrl+C while the compaction before a prompt runs: nothing of the prompt is saved, and a
    `prompt_cancelled` event carries it so a UI can put the text back (the reference loses it)."""
    session, events = make(server, tmp_path, compaction={"keepRecentTokens": 50})
    await history(session, server, n=2)
    server.expect(reply(text("a"), usage=tokens(195_000, 10)))  # over the threshold, checked before the next prompt
    release = threading.Event()
    # first prompt: its reply leaves the context over the threshold; the after-run compaction is aborted
    server.expect(text("NEVER FINISHED summary").hold_after(1, release))
    run = asyncio.ensure_future(session.prompt("x"))
    try:
        await wait_for_requests(server, 4)
        await session.abort()
    finally:
        release.set()
    await run
    before = file_entries(session)
    # second prompt: the pre-prompt compaction is aborted too -> the prompt comes back
    release2 = threading.Event()
    server.expect(text("ALSO NEVER FINISHED").hold_after(1, release2))
    run = asyncio.ensure_future(session.prompt("please keep this text"))
    try:
        await wait_for_requests(server, 5)
        assert session.is_compacting
        await session.abort()
    finally:
        release2.set()
    await run
    cancelled = [e for e in events if e["type"] == "prompt_cancelled"]
    assert len(cancelled) == 1
    assert cancelled[0]["messages"][0]["content"] == [{"type": "text", "text": "please keep this text"}]
    assert file_entries(session) == before  # nothing of the cancelled prompt was written
    assert session.is_idle


async def test_anti_thrash_skips_a_compaction_that_cannot_help(server: ScriptedModelServer, tmp_path: Path) -> None:
    """The newest user message alone is above the threshold (nothing a cut or a shortened tool
    result could free): no summary is paid for, one line says why."""
    session, events = make(server, tmp_path, window=3000, compaction={"reserveTokens": 500, "keepRecentTokens": 2000})
    await history(session, server, n=1, size=200)
    events.clear()
    server.expect(reply(text("done"), usage=tokens(0, 0)))  # no usage: the estimate decides
    await session.prompt("paste " + "p" * 12_000)
    skipped = [e for e in events if e["type"] == "compaction_skipped"]
    assert len(skipped) == 1 and "above the compaction threshold" in skipped[0]["message"]
    assert "compaction_start" not in types(events)
    assert "\n" not in skipped[0]["message"]


async def test_a_newest_tool_result_above_the_threshold_is_shortened_and_the_run_goes_on(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    """Ours: no cut can leave the tool result out (it is the newest message), so the compaction
    shortens it to its beginning with a context edit, and the next request fits."""
    session, events = make(server, tmp_path, window=3000, compaction={"reserveTokens": 500, "keepRecentTokens": 2000})
    await history(session, server, n=1, size=200)
    events.clear()
    summary = "hand-off notes"  # the summarizer's system prompt; the turn is split: history and prefix
    server.expect(reply(tool_call("big", {"size": 12_000}), usage=tokens(300, 10)),
                  *[text("## Goal\nread").when_body_contains(summary) for _ in range(2)],
                  text("done").when(lambda r: summary not in json.dumps(r.body)))
    await session.prompt("read it")
    assert not [e for e in events if e["type"] == "compaction_skipped"]
    assert [e["type"] for e in events if e["type"] in ("compaction_start", "compaction_end")] == [
        "compaction_start", "compaction_end"]
    edits = [e for e in file_entries(session) if e["type"] == "context_edit"]
    assert len(edits) == 1
    assert edits[0]["replacement"]["content"][0]["text"].startswith(
        '[tool result shortened by picontext: big(size=12000) returned 12000 characters')
    last = json.dumps(server.requests[-1].body)
    assert "tool result shortened by picontext" in last and len(last) < 3000 * 4


async def test_a_manual_compaction_shortens_a_kept_tool_result_no_cut_can_leave_out(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    """Ours: /compact on a session whose newest tool output alone is over the threshold (the
    session stopped right after it) frees the window."""
    session, _ = make(server, tmp_path, window=3000,
                      compaction={"enabled": False, "reserveTokens": 500, "keepRecentTokens": 2000})
    await history(session, server, n=2, size=200)
    manager = session.manager
    manager.append_message({"role": "user", "content": "read it", "timestamp": 1})
    call = {"type": "toolCall", "id": "c1", "name": "big", "arguments": {"size": 12_000}}
    manager.append_message({"role": "assistant", "content": [call], "api": "openai-completions",
                            "provider": "openai-compatible", "model": "scripted-model", "stopReason": "toolUse",
                            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                            "timestamp": 1})
    result_id = manager.append_message({"role": "toolResult", "toolCallId": "c1", "toolName": "big",
                                        "content": [{"type": "text", "text": "x" * 12_000}], "isError": False,
                                        "timestamp": 1})
    server.expect(text("## Goal\nread"), text("## Goal\nread"))  # a split turn: history and prefix
    result = await session.compact()
    edits = [e for e in file_entries(session) if e["type"] == "context_edit"]
    assert [e["targetId"] for e in edits] == [result_id]
    shortened = edits[0]["replacement"]["content"][0]["text"]
    assert shortened.startswith("[tool result shortened by picontext: big(size=12000)")
    assert result["estimatedTokensAfter"] < 2500


async def test_s8_manual_compaction_during_a_response(server: ScriptedModelServer, tmp_path: Path) -> None:
    release = threading.Event()
    session, events = make(server, tmp_path, compaction={"keepRecentTokens": 50})
    await history(session, server, n=2)
    events.clear()
    server.expect(reply(text("streaming a long answer"), usage=tokens(195_000, 5)).hold_after(2, release),
                  text("MANUAL SUMMARY"))
    streaming = asyncio.Event()
    session.subscribe(
        lambda e: streaming.set() if e["type"] == "message_start" and e["message"]["role"] == "assistant" else None
    )
    run = asyncio.ensure_future(session.prompt("long"))
    await streaming.wait()
    try:
        result = await session.compact()
    finally:
        release.set()
    await run
    seq = [t for t in compact_types(events) if t not in ("message_start", "message_end", "turn_start")]
    assert seq[-5:] == ["turn_end", "agent_end", "agent_settled", "compaction_start", "compaction_end"]
    assert [e["reason"] for e in events if e["type"] == "compaction_start"] == ["manual"]
    aborted = next(e for e in events if e["type"] == "message_end" and e["message"]["role"] == "assistant")
    assert aborted["message"]["stopReason"] == "aborted"
    assert result["summary"].startswith("MANUAL SUMMARY")


async def test_prompt_from_a_manual_compaction_end_listener(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path, compaction={"keepRecentTokens": 50})
    await history(session, server, n=2)
    server.expect(text("SUMMARY"), text("answer after compaction"))

    async def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "compaction_end" and event.get("result"):
            assert not session.is_compacting
            await session.prompt("what next?")

    session.subscribe(on_event)
    await session.compact()
    assert session.messages[-1]["content"][0]["text"] == "answer after compaction"
    assert session.is_idle

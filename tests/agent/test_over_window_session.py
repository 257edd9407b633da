"""A session already far over the window (Pi #8196: one huge tool output at the end of a long
session) compacts below the threshold in one operation, and no summary request exceeds the
summarizer's window (issue 18 §2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime_helpers import file_entries, make

from picontext.compaction.compact import estimated_tokens
from picontext.compaction.mask import KEPT_EXCERPT_CHARS
from picontext.testing import ScriptedModelServer, text
from picontext.testing.model_server import RecordedRequest

WINDOW = 16_000
SETTINGS = {"reserveTokens": 4000, "keepRecentTokens": 2000}  # threshold 12000
SUMMARY_MARK = "hand-off notes"


def is_summary(req: RecordedRequest) -> bool:
    return SUMMARY_MARK in json.dumps(req.body)


def request_tokens(req: RecordedRequest) -> int:
    """What a request asks of the window by the summarizer's own count: chars/4 of its messages
    plus the output it may write."""
    body = req.body
    chars = sum(len(json.dumps(m.get("content"))) for m in body["messages"])
    return chars // 4 + int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)


def usage() -> dict[str, Any]:
    return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def seed(manager: Any, turns: int, huge_chars: int) -> str:
    """`turns` ordinary exchanges, then a read whose output is `huge_chars` long; the id of that result."""
    for i in range(turns):
        manager.append_message({"role": "user", "content": f"step {i}: " + "please look at this " * 60,
                                "timestamp": 1})
        manager.append_message({"role": "assistant", "content": [{"type": "text", "text": f"done {i} " * 40}],
                                "api": "openai-completions", "provider": "openai-compatible",
                                "model": "scripted-model", "usage": usage(), "stopReason": "stop", "timestamp": 1})
    manager.append_message({"role": "user", "content": "read the build log", "timestamp": 1})
    manager.append_message({"role": "assistant", "api": "openai-completions", "provider": "openai-compatible",
                            "model": "scripted-model", "usage": usage(), "stopReason": "toolUse", "timestamp": 1,
                            "content": [{"type": "toolCall", "id": "call_log", "name": "read",
                                         "arguments": {"path": "build.log"}}]})
    log = "".join(f"{i:07d} compiling module {i % 97:02d} ok\n" for i in range(huge_chars // 30 + 1))[:huge_chars]
    return manager.append_message({"role": "toolResult", "toolCallId": "call_log", "toolName": "read",
                                   "content": [{"type": "text", "text": log}], "isError": False, "timestamp": 1})


async def test_a_session_far_over_the_window_compacts_below_the_threshold_in_one_operation(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, window=WINDOW, max_tokens=2000, compaction=SETTINGS)
    result_id = seed(session.manager, 120, 400_000)  # ~52k tokens of turns and ~100k of log
    before = estimated_tokens(session.manager)
    assert before > 8 * WINDOW
    server.expect(*[text(f"## Goal\nnote {k}").when(is_summary) for k in range(40)],
                  text("carrying on").when(lambda r: not is_summary(r)))
    await session.prompt("go on")
    summaries = [r for r in server.requests if is_summary(r)]
    conversation = [r for r in server.requests if not is_summary(r)]
    assert len(conversation) == 1
    assert len(summaries) > 4  # the span was summarized in chunks, then merged
    assert max(request_tokens(r) for r in summaries) <= WINDOW
    ends = [e for e in events if e["type"] == "compaction_end"]
    assert len(ends) == 1 and ends[0]["result"] is not None  # one operation
    assert ends[0]["tokensAfter"] < WINDOW - SETTINGS["reserveTokens"]
    assert estimated_tokens(session.manager) < WINDOW - SETTINGS["reserveTokens"]
    assert request_tokens(conversation[0]) < WINDOW
    entries = file_entries(session)
    edits = [e for e in entries if e["type"] == "context_edit"]
    assert [e["targetId"] for e in edits] == [result_id]  # the huge output, kept, is shortened
    shortened = edits[0]["replacement"]["content"][0]["text"]
    assert shortened.startswith("[tool result shortened by picontext: read(path=\"build.log\") returned 400000")
    assert len(shortened) < KEPT_EXCERPT_CHARS + 400
    assert any(e["type"] == "compaction" for e in entries)
    progress = [e for e in events if e["type"] == "compaction_progress"]
    assert progress and progress[-1]["stage"] == "merge"
    assert "0000000 compiling module 00 ok" in json.dumps(conversation[0].body)  # its beginning is still shown
    server.reset()  # the notes never asked for

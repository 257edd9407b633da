"""Triggers that agree with reality: the #9476 case, compaction loops, the calibrated trigger,
and the summarizer model of its own (compaction.model) inside a live session."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from runtime_helpers import file_entries, make

from picontext.cli.modes.reply_view import ReplyView
from picontext.compaction.compact import estimated_tokens
from picontext.compaction.completion import ScriptedCompletion
from picontext.testing import ScriptedModelServer, reply, text, tokens, tool_call


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


async def ask(session: Any, server: ScriptedModelServer, i: int, factor: float = 1.0) -> None:
    """One exchange; the reply reports `factor` x what chars/4 says the request held."""
    reported = round((estimated_tokens(session.manager) + 410) * factor)
    server.expect(reply(text(f"answer {i}"), usage=tokens(reported - 5, 5)))
    await session.prompt(f"question {i} " + "q" * 1600)


@pytest.mark.parametrize("calibrate", [False, True])
async def test_issue_9476_huge_tool_output_reported_small_never_compacts_twice(
        server: ScriptedModelServer, tmp_path: Path, calibrate: bool) -> None:
    summarizer = ScriptedCompletion(default="## Goal\nsummary")
    session, events = make(server, tmp_path, compaction={"calibrateTokens": calibrate}, summarizer=summarizer)
    for i in range(3):
        await ask(session, server, i)
    # 6.6 MB of tool output: ~1.65M tokens by chars/4; the provider reports 17k for the request holding it
    server.expect(reply(tool_call("big", {"size": 6_600_000}), usage=tokens(17_000, 10)),
                  reply(text("read it"), usage=tokens(17_100, 10)))
    await session.prompt("read the log")
    for i in range(3, 6):
        server.expect(reply(text(f"answer {i}"), usage=tokens(17_200 + 500 * i, 5)))
        await session.prompt(f"question {i}")
    starts = of(events, "compaction_start")
    assert len(starts) <= 1
    compactions = [e for e in file_entries(session) if e["type"] == "compaction"]
    assert len(compactions) <= 1 and len(summarizer.requests) <= 2 * len(compactions)  # a split turn asks two
    skipped = of(events, "compaction_skipped")
    assert len(skipped) <= 1 and all("above the compaction threshold" in e["message"] for e in skipped)


BLOATED = "## Goal\n" + "bloated summary " * 385


async def test_a_compaction_loop_is_detected_and_stopped_with_one_message(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    # The summarizer writes summaries as large as they may be (just under twice their 800-token
    # budget, smaller than what they replace) and a large tail is kept: every compaction frees nothing.
    summarizer = ScriptedCompletion(default=BLOATED)
    session, events = make(server, tmp_path, window=4000, summarizer=summarizer,
                           compaction={"reserveTokens": 1000, "keepRecentTokens": 1000})
    for i in range(14):
        await ask(session, server, i)
    stopped = [e for e in of(events, "compaction_skipped") if "Auto-compaction stopped" in e["message"]]
    assert len(stopped) == 1
    assert "3 compactions within 6 turns" in stopped[0]["message"] and "larger context window" in stopped[0]["message"]
    at = events.index(stopped[0])
    assert not of(events[at:], "compaction_start")  # none after the stop
    assert len(of(events, "compaction_end")) == 3 == len(summarizer.requests)


async def test_loop_guard_off_keeps_compacting(server: ScriptedModelServer, tmp_path: Path) -> None:
    summarizer = ScriptedCompletion(default=BLOATED)
    session, events = make(server, tmp_path, window=4000, summarizer=summarizer,
                           compaction={"reserveTokens": 1000, "keepRecentTokens": 1000, "loopGuard": False})
    for i in range(14):
        await ask(session, server, i)
    assert not [e for e in of(events, "compaction_skipped") if "Auto-compaction stopped" in e["message"]]
    assert len(of(events, "compaction_end")) > 3


@pytest.mark.parametrize("calibrate", [False, True])
async def test_calibrated_trigger_compacts_before_the_request_that_would_not_fit(
        server: ScriptedModelServer, tmp_path: Path, calibrate: bool) -> None:
    summarizer = ScriptedCompletion(default="## Goal\nsummary")
    session, events = make(server, tmp_path, window=10_000, summarizer=summarizer,
                           compaction={"reserveTokens": 1000, "keepRecentTokens": 1000, "calibrateTokens": calibrate})
    for i in range(4):
        await ask(session, server, i, factor=2.0)  # this provider counts twice what chars/4 says
    usage = round((estimated_tokens(session.manager) + 10) * 2)
    server.expect(reply(tool_call("big", {"size": 14_000}), usage=tokens(usage - 10, 10)),
                  reply(text("done"), usage=tokens(1000, 10)))
    await session.prompt("go")
    # chars/4: ~4100 reported + 3500 estimated = 7600 < 9000; calibrated: 4100 + 7000 > 9000
    between_turns = [e for e in of(events, "compaction_start") if e["reason"] == "threshold"]
    assert len(between_turns) == (1 if calibrate else 0)
    if calibrate:
        request = json.dumps(server.requests[-1].body)
        assert "summary" in request and "question 0" not in request


async def test_compaction_model_writes_the_summary_and_is_recorded(server: ScriptedModelServer,
                                                                   tmp_path: Path) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    (home / "models.json").write_text(json.dumps({"providers": {"cheap": {
        "baseUrl": server.url + "/v1", "api": "openai-completions", "apiKey": "k2",
        "models": [{"id": "small", "contextWindow": 100000, "maxTokens": 4096,
                    "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0}}]}}}))
    session, _ = make(server, tmp_path, compaction={"keepRecentTokens": 100, "model": "cheap/small"})
    for i in range(3):
        await ask(session, server, i)
    server.expect(text("## Goal\nwritten by the small model"))
    result = await session.compact()
    assert server.requests[-1].body["model"] == "small"
    assert server.requests[-1].headers.get("authorization") == "Bearer k2"
    compaction = [e for e in file_entries(session) if e["type"] == "compaction"][-1]
    assert compaction["details"]["summaryModel"] == "cheap/small"
    assert compaction["usage"]["cost"]["total"] > 0
    assert result["details"]["summaryModel"] == "cheap/small"


def test_chat_shows_background_compaction_lines() -> None:
    out = io.StringIO()
    view = ReplyView(Console(file=out, force_terminal=False, width=200))
    view({"type": "compaction_background_start", "tokens": 1800, "firstKeptEntryId": "e1"})
    view({"type": "compaction_background_discarded", "reason": "the conversation moved to another branch",
          "discarded": 1})
    view({"type": "compaction_end", "reason": "threshold", "aborted": False, "willRetry": False, "background": True,
          "waited": False, "tokensBefore": 3000, "tokensAfter": 900, "result": {"summary": "s"}})
    lines = out.getvalue().splitlines()
    assert lines[0] == "compacting in background…"
    assert "background summary discarded (the conversation moved to another branch)" in lines[1]
    assert lines[2].startswith("✓ Context compacted (threshold): 3,000 → 900 tokens")

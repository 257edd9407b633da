"""Overflow recovery over real HTTP: omit the failed attempt, compact, retry exactly once (spec 03 §3-§4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import compact_types, file_entries, kinds, make, types

from picontext.agent.compaction_runtime import OVERFLOW_RECOVERY_FAILED, TRUNCATED_RECOVERY_FAILED
from picontext.agent.hooks import Hooks
from picontext.scripted import ScriptedModelServer, http_error, overflow, reply, text, tokens, tool_call

SMALL_KEEP = {"keepRecentTokens": 50}
DIALECTS = ["openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai"]
LENGTH_STOP = {"openai-completions": "length", "openai-responses": "max_output_tokens",
               "anthropic-messages": "max_tokens", "google-generative-ai": "MAX_TOKENS"}


async def two_exchanges(session: Any, server: ScriptedModelServer) -> None:
    for i in range(2):
        server.expect(reply(text(f"answer {i}"), usage=tokens(300 * (i + 1), 5)))
        await session.prompt(f"question {i} " + "q" * 800)


def summary_hook(summary: str) -> Hooks:
    """An extension that writes the summary (no summary request reaches the server)."""
    hooks = Hooks()
    hooks.on("session_before_compact", lambda e: {"compaction": {
        "summary": summary, "firstKeptEntryId": e["preparation"].first_kept_entry_id,
        "tokensBefore": e["preparation"].tokens_before}})
    return hooks


def roles_and_texts(body: dict[str, Any]) -> str:
    import json

    return json.dumps(body)


@pytest.mark.parametrize("api", DIALECTS)
async def test_each_providers_overflow_is_omitted_compacted_and_retried_once(
    server: ScriptedModelServer, tmp_path: Path, api: str
) -> None:
    session, events = make(server, tmp_path, api=api, compaction=SMALL_KEEP)
    await two_exchanges(session, server)
    events.clear()
    server.expect(overflow(), text("SUMMARY of questions"), text("recovered answer"))
    await session.prompt("one more")
    seq = compact_types(events)
    i = seq.index("agent_end")
    assert seq[i:i + 5] == ["agent_end", "entry_appended", "compaction_start", "compaction_end", "agent_start"]
    assert events[[e["type"] for e in events].index("agent_end")]["willRetry"] is False
    start = next(e for e in events if e["type"] == "compaction_start")
    end = next(e for e in events if e["type"] == "compaction_end")
    assert start["reason"] == "overflow" and end["reason"] == "overflow" and end["willRetry"] is True
    entries = file_entries(session)
    assert kinds(entries)[-5:] == ["user", "assistant", "context_edit", "compaction", "assistant"]
    failed, edit = entries[-4], entries[-3]
    assert failed["message"]["stopReason"] == "error" and edit["targetId"] == failed["id"]
    assert edit["replacement"] is None
    appended = next(e for e in events if e["type"] == "entry_appended")
    assert appended["entry"]["id"] == edit["id"]
    retry_body = roles_and_texts(server.requests[-1].body)
    assert "SUMMARY of questions" in retry_body and "one more" in retry_body
    assert failed["message"]["errorMessage"][:20] not in retry_body
    assert session.messages[-1]["content"][0]["text"] == "recovered answer"
    assert session.compaction.fuse is False  # cleared by the good reply
    assert len(server.requests) == 2 + 3


async def test_second_overflow_ends_with_a_clear_error_and_no_second_retry(
    server: ScriptedModelServer, tmp_path: Path
) -> None:
    failed_hooks: list[dict[str, Any]] = []
    hooks = Hooks()
    hooks.on("session_compact_failed", failed_hooks.append)
    session, events = make(server, tmp_path, compaction=SMALL_KEEP, hooks=hooks)
    await two_exchanges(session, server)
    events.clear()
    server.expect(overflow(), text("SUMMARY"), overflow())
    await session.prompt("one more")
    ends = [e for e in events if e["type"] == "compaction_end"]
    assert [e.get("willRetry") for e in ends] == [True, False]
    assert ends[-1]["errorMessage"] == OVERFLOW_RECOVERY_FAILED and "larger-context model" in OVERFLOW_RECOVERY_FAILED
    assert types(events, "compaction_start") == ["compaction_start"]
    assert types(events).count("agent_start") == 2
    assert failed_hooks[-1]["reason"] == "overflow" and failed_hooks[-1]["aborted"] is False
    assert session.messages[-1]["stopReason"] == "error"  # the second failure stays visible
    assert len(server.requests) == 2 + 3
    # new user messages reset the fuse: the next overflow recovers again
    await two_exchanges(session, server)
    server.expect(overflow(), text("SUMMARY 2"), text("fine now"))
    await session.prompt("try again")
    assert session.messages[-1]["content"][0]["text"] == "fine now"


async def test_silent_overflow_compacts_without_retry(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, window=5000, compaction={"reserveTokens": 0, "keepRecentTokens": 50})
    await two_exchanges(session, server)
    events.clear()
    server.expect(reply(text("a normal answer"), usage=tokens(6000, 10)), text("SUMMARY"))
    await session.prompt("more")
    assert compact_types(events)[-4:] == ["agent_end", "compaction_start", "compaction_end", "agent_settled"]
    end = next(e for e in events if e["type"] == "compaction_end")
    assert end["reason"] == "overflow" and end["willRetry"] is False and end["aborted"] is False
    assert session.messages[-1]["content"][0]["text"] == "a normal answer"  # the answer stays
    assert "context_edit" not in kinds(file_entries(session))


@pytest.mark.parametrize("api", DIALECTS)
async def test_length_stop_below_the_output_limit_recovers(
    server: ScriptedModelServer, tmp_path: Path, api: str
) -> None:
    session, events = make(server, tmp_path, api=api, max_tokens=100, compaction=SMALL_KEEP)
    await two_exchanges(session, server)
    events.clear()
    server.expect(reply(text("cut sho"), usage=tokens(900, 7), stop=LENGTH_STOP[api]), text("SUMMARY"),
                  text("complete answer"))
    await session.prompt("write")
    end = next(e for e in events if e["type"] == "compaction_end")
    assert end["reason"] == "overflow" and end["willRetry"] is True
    assert session.messages[-1]["content"][0]["text"] == "complete answer"
    assert kinds(file_entries(session))[-4:] == ["assistant", "context_edit", "compaction", "assistant"]


async def test_length_stop_at_the_output_limit_is_left_alone(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, max_tokens=100, compaction=SMALL_KEEP)
    server.expect(reply(text("long"), usage=tokens(900, 100), stop="length"))
    await session.prompt("write")
    assert "compaction_start" not in types(events) and len(server.requests) == 1


async def test_two_short_length_stops_truncated_wording(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, max_tokens=100, compaction=SMALL_KEEP)
    await two_exchanges(session, server)
    events.clear()
    server.expect(reply(text("a"), usage=tokens(900, 7), stop="length"), text("SUMMARY"),
                  reply(text("b"), usage=tokens(500, 7), stop="length"))
    await session.prompt("write")
    ends = [e for e in events if e["type"] == "compaction_end"]
    assert ends[-1]["errorMessage"] == TRUNCATED_RECOVERY_FAILED
    assert types(events, "compaction_start") == ["compaction_start"]


async def test_overflow_from_another_model_does_not_recover(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, compaction=SMALL_KEEP)
    await two_exchanges(session, server)
    session.set_auto_compaction(False)
    server.expect(overflow())
    await session.prompt("big")
    assert "compaction_start" not in types(events)
    session.set_auto_compaction(True)
    events.clear()
    session.set_model(server.model("openai-completions", id="bigger-model"))
    server.expect(text("hello from the bigger model"))
    await session.prompt("retry on the bigger model")  # the pre-prompt check sees another model's overflow
    assert "compaction_start" not in types(events) and "compaction_end" not in types(events)
    assert session.messages[-1]["content"][0]["text"] == "hello from the bigger model"
    assert kinds(file_entries(session))[-4:] == ["assistant", "model_change", "user", "assistant"]


async def test_recovery_with_nothing_to_compact_still_ends_with_an_event(
    server: ScriptedModelServer, tmp_path: Path
) -> None:
    session, events = make(server, tmp_path, compaction=SMALL_KEEP)
    server.expect(overflow())
    await session.prompt("tiny")
    ends = [e for e in events if e["type"] == "compaction_end"]
    assert types(events, "compaction_start") == ["compaction_start"]
    assert ends[-1]["reason"] == "overflow" and ends[-1]["willRetry"] is False
    assert ends[-1]["errorMessage"].startswith("Context overflow recovery failed: Nothing to compact")
    assert len(server.requests) == 1


async def test_throttle_is_retried_not_compacted(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, compaction=SMALL_KEEP)
    server.expect(http_error(429, {"error": {"message": "429 rate_limit_exceeded: too many tokens per minute"}}),
                  text("ok"))
    await session.prompt("x")
    assert "compaction_start" not in types(events)
    assert types(events, "auto_retry_start", "auto_retry_end") == ["auto_retry_start", "auto_retry_end"]


async def test_s3_overflow_after_tool_turns_recovers_within_the_run(
    server: ScriptedModelServer, tmp_path: Path
) -> None:
    """S3: request 3 of a tool run overflows; the retry carries the summary and the tail, not the failure."""
    session, events = make(server, tmp_path, compaction={"keepRecentTokens": 300}, hooks=summary_hook("SUMMARY S3"))
    await two_exchanges(session, server)
    events.clear()
    server.expect(
        reply(tool_call("big", {"size": 400}), usage=tokens(1000, 10)),
        reply(tool_call("big", {"size": 800}), usage=tokens(1200, 10)),
        overflow(),
        text("A4"),
    )
    await session.prompt("do the work")
    entries = file_entries(session)
    assert kinds(entries)[-9:] == ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant",
                                   "context_edit", "compaction", "assistant"]
    assert types(events).count("agent_start") == 2 and types(events)[-1] == "agent_settled"
    retry = str(server.requests[-1].body)
    assert "SUMMARY S3" in retry and "lorem ipsum" in retry
    assert session.compaction.fuse is False


async def test_fuse_reset_by_a_good_reply_allows_a_later_recovery_in_the_same_run(
    server: ScriptedModelServer, tmp_path: Path
) -> None:
    session, events = make(server, tmp_path, compaction=SMALL_KEEP, hooks=summary_hook("SUMMARY"))
    await two_exchanges(session, server)
    server.expect(
        overflow(),
        reply(tool_call("big", {"size": 2000}), usage=tokens(1000, 10)),
        overflow(),
        text("done"),
    )
    await session.prompt("long task")
    ends = [e for e in events if e["type"] == "compaction_end"]
    assert [(e["reason"], e["willRetry"]) for e in ends] == [("overflow", True), ("overflow", True)]
    assert session.messages[-1]["content"][0]["text"] == "done"


def register(hooks: Hooks) -> None:
    hooks.on("session_before_compact", lambda e: {"compaction": {
        "summary": "PLUGIN SUMMARY", "firstKeptEntryId": e["preparation"].first_kept_entry_id,
        "tokensBefore": e["preparation"].tokens_before}})


async def test_hooks_from_entry_points(server: ScriptedModelServer, tmp_path: Path, monkeypatch: Any) -> None:
    import importlib.metadata

    from picontext.agent.hooks import load_entry_point_hooks

    good = importlib.metadata.EntryPoint("plugin", f"{__name__}:register", "picontext.hooks")
    bad = importlib.metadata.EntryPoint("broken", "no_such_module_xyz:register", "picontext.hooks")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [good, bad] if group == "picontext.hooks"
                        else [])
    hooks = Hooks()
    errors = load_entry_point_hooks(hooks)
    assert len(errors) == 1 and "no_such_module_xyz" in errors[0].error
    session, _ = make(server, tmp_path, compaction=SMALL_KEEP, hooks=hooks)
    await two_exchanges(session, server)
    server.expect(overflow(), text("after plugin compaction"))
    await session.prompt("x")
    compaction = next(e for e in file_entries(session) if e["type"] == "compaction")
    assert compaction["summary"] == "PLUGIN SUMMARY" and compaction["fromHook"] is True


async def test_length_stop_without_any_usage_is_not_context_pressure(
    server: ScriptedModelServer, tmp_path: Path
) -> None:
    # llama.cpp sends no usage in streams: output 0 < maxTokens is no evidence of truncation.
    session, events = make(server, tmp_path, max_tokens=100, compaction=SMALL_KEEP)
    await two_exchanges(session, server)
    events.clear()
    server.expect(reply(text("long"), usage=tokens(0, 0), stop="length"))
    await session.prompt("write")
    assert "compaction_start" not in types(events) and len(server.requests) == 3

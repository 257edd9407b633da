"""The context tools: context_usage, request_compaction (with a limit) and recall."""

from __future__ import annotations

from pathlib import Path

from runtime_helpers import file_entries, kinds, make, types
from tool_helpers import call, text_of

from picontext.agent.tools.context import ContextUsageTool, RecallTool, RequestCompactionTool
from picontext.scripted import ScriptedModelServer, reply, text, tokens, tool_call
from picontext.session.dropped import dropped_entries


async def long_history(session, server: ScriptedModelServer) -> None:  # type: ignore[no-untyped-def]
    for i in range(2):
        server.expect(reply(text(f"answer {i}"), usage=tokens(300 * (i + 1), 5)))
        await session.prompt(f"question {i} SECRET-{i} " + "q" * 800)


async def test_recall_reads_back_what_a_compaction_removed(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path, compaction={"keepRecentTokens": 50}, context_tools=True)
    await long_history(session, server)
    server.expect(text("SUMMARY"))
    await session.compact()
    dropped = dropped_entries(session.manager)
    assert [(d.role, d.why) for d in dropped] == [("user", "compacted"), ("assistant", "compacted")]
    recall = next(t for t in session.tools if t.name == "recall")
    listing = text_of(await call(recall))
    assert dropped[0].entry_id in listing and "compacted" in listing
    assert "SECRET-0" in text_of(await call(recall, **{"query": "secret-0"}))
    assert "nothing matching" in text_of(await call(recall, **{"query": "SECRET-1"})).lower()
    full = text_of(await call(recall, **{"entryId": dropped[0].entry_id}))
    assert full.startswith("question 0 SECRET-0") and len(full) > 800
    part = text_of(await call(recall, **{"entryId": dropped[0].entry_id, "offset": 5, "limit": 10}))
    assert part.startswith("ion 0 SECR") and "more characters" in part
    result = await call(recall, **{"entryId": "missing"})
    assert result.is_error


async def test_agent_requests_a_compaction_with_a_limit(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, compaction={"keepRecentTokens": 200}, context_tools=True)
    await long_history(session, server)
    events.clear()
    server.expect(
        reply(tool_call("context_usage", {}), tool_call("request_compaction", {"instructions": "keep SECRET-1"})),
        text("SUMMARY keeps SECRET-1"),
        reply(tool_call("request_compaction", {})),
        text("continuing"),
    )
    await session.prompt("tidy up your context")
    starts = [e for e in events if e["type"] == "compaction_start"]
    assert [e["reason"] for e in starts] == ["manual"]
    assert "keep SECRET-1" in str(server.requests[3].body)
    results = [e for e in file_entries(session) if e["type"] == "message" and e["message"]["role"] == "toolResult"]
    assert "Context: ~" in results[0]["message"]["content"][0]["text"]
    assert "Compaction scheduled" in results[1]["message"]["content"][0]["text"]
    assert results[-1]["message"]["isError"] and "limit 1" in results[-1]["message"]["content"][0]["text"]
    assert kinds(file_entries(session)).count("compaction") == 1
    assert types(events).count("agent_start") == 1


async def test_context_usage_tool_reports_unknown_after_compaction(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path, compaction={"keepRecentTokens": 50})
    await long_history(session, server)
    usage = text_of(await call(ContextUsageTool(session)))
    assert "of 200000 tokens" in usage and "183616" in usage
    server.expect(text("SUMMARY"))
    await session.compact()
    assert "estimated" in text_of(await call(ContextUsageTool(session)))
    refused = await call(RequestCompactionTool(session))
    assert refused.is_error and "Already compacted" in text_of(refused)
    leaf = session.manager.get_leaf_id()
    assert "still in your context" in text_of(await call(RecallTool(session), entryId=leaf))

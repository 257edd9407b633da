"""Branch summaries over the edited projection of the abandoned branch (spec 02 §8, cases 62-71)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from compaction_fixtures import assistant, tool_result, user

from picontext.compaction import prompts
from picontext.compaction.branch_summary import (
    collect_entries_for_branch_summary,
    generate_branch_summary,
    navigate_with_summary,
    prepare_branch_entries,
)
from picontext.compaction.completion import ScriptedCompletion, assistant_reply
from picontext.errors import SummaryAborted, SummaryToolCall, SummaryTruncated
from picontext.session.manager import SessionManager


def _tree() -> tuple[SessionManager, dict[str, str]]:
    m = SessionManager.in_memory("/tmp")
    ids = {"root": m.append_message(user("root")), "common": m.append_message(assistant("common"))}
    ids["a1"] = m.append_message(user("abandoned one"))
    ids["a2"] = m.append_message(assistant("abandoned two"))
    m.branch(ids["common"])
    ids["s1"] = m.append_message(user("sibling"))
    m.branch(ids["a2"])
    return m, ids


def test_collect_entries() -> None:
    m, ids = _tree()
    assert collect_entries_for_branch_summary(m, None, ids["s1"]) == ([], None)
    entries, ancestor = collect_entries_for_branch_summary(m, ids["a2"], ids["s1"])
    assert [e["id"] for e in entries] == [ids["a1"], ids["a2"]] and ancestor == ids["common"]
    assert collect_entries_for_branch_summary(m, ids["common"], ids["a2"])[0] == []  # to a descendant
    assert [e["id"] for e in collect_entries_for_branch_summary(m, ids["a2"], ids["root"])[0]] == [
        ids["common"], ids["a1"], ids["a2"]]


def _bs(summary: str) -> dict:
    return {"type": "branch_summary", "id": "bs", "parentId": None, "timestamp": "t", "fromId": "x",
            "summary": summary}


def _msg(i: str, message: dict) -> dict:
    return {"type": "message", "id": i, "parentId": None, "timestamp": "t", "message": message}


def test_budget_and_forced_summaries() -> None:
    entries = [_bs("s" * 2000), _msg("u", user("u" * 400)), _msg("a", assistant("a" * 800))]
    assert [m["role"] for m in prepare_branch_entries(entries, None, 300).messages] == ["user", "assistant"]
    forced = prepare_branch_entries(entries, None, 700)
    assert [m["role"] for m in forced.messages] == ["branchSummary", "user", "assistant"]
    assert forced.total_tokens > 700
    assert len(prepare_branch_entries(entries, None, 0).messages) == 3


def test_tool_results_skipped_but_file_ops_count() -> None:
    call = assistant("", [("edit", {"path": "x.py"})])
    prep = prepare_branch_entries([_msg("c", call), _msg("r", tool_result("done"))])
    assert [m["role"] for m in prep.messages] == ["assistant"] and prep.file_ops.edited == {"x.py"}


async def test_no_messages_no_call() -> None:
    model = ScriptedCompletion([])
    result = await generate_branch_summary([_msg("r", tool_result("x"))], model)
    assert result.summary == "No content to summarize" and model.requests == []


async def test_summary_shape_budget_and_failures() -> None:
    entries = [_msg("u", user("try approach B")), _msg("a", assistant("", [("write", {"path": "b.py"})]))]
    model = ScriptedCompletion(["## Goal\nB"], max_output_tokens=1024)
    result = await generate_branch_summary(entries, model)
    assert result.summary.startswith(prompts.BRANCH_SUMMARY_PREAMBLE + "## Goal\nB")
    assert result.summary.endswith("<modified-files>\nb.py\n</modified-files>")
    assert model.requests[0].max_tokens == 1024 and model.requests[0].options.reasoning is None
    model = ScriptedCompletion(["x"], max_output_tokens=8192)
    await generate_branch_summary(entries, model, instructions="ONLY THIS", replace_instructions=True)
    text = model.requests[0].messages[0]["content"][0]["text"]
    assert text.endswith("ONLY THIS") and prompts.BRANCH_PROMPT not in text and model.requests[0].max_tokens == 4096
    for reply, error in [(assistant_reply("x", tool_call=("read", {})), SummaryToolCall),
                         (assistant_reply("x", stop_reason="length"), SummaryTruncated),
                         (assistant_reply("", stop_reason="aborted"), SummaryAborted)]:
        with pytest.raises(error, match="Branch summarization"):
            await generate_branch_summary(entries, ScriptedCompletion([reply]))


async def test_navigate_summarizes_the_edited_projection() -> None:
    m, ids = _tree()
    secret = m.append_message(user("my password is hunter2"))
    m.append_context_edit(secret, None)  # omitted on this branch: must not reach the summarizer
    replaced = m.append_message(tool_result("huge output"))
    m.append_context_edit(replaced, {"content": "short"})
    old_leaf = m.get_leaf_id()
    model = ScriptedCompletion(["## Goal\nexplored"])
    new_id = await navigate_with_summary(m, ids["s1"], model)
    sent = model.requests[0].messages[0]["content"][0]["text"]
    assert "hunter2" not in sent and "abandoned one" in sent
    entry = m.get_entry(new_id)
    assert entry["type"] == "branch_summary" and entry["fromId"] == old_leaf
    assert entry["parentId"] == ids["common"]  # target is a user message: the leaf goes to its parent
    assert m.get_leaf_id() == new_id


async def test_failed_branch_summary_keeps_the_leaf() -> None:
    m, ids = _tree()
    leaf = m.get_leaf_id()
    count = len(m.get_entries())
    with pytest.raises(SummaryTruncated):
        await navigate_with_summary(m, ids["s1"], ScriptedCompletion([assistant_reply("x", stop_reason="length")]))
    assert m.get_leaf_id() == leaf and len(m.get_entries()) == count

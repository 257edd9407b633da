"""Resumable spans at the library level: pending detection, re-planning, invalidation, end markers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from compaction_fixtures import tool_session

from picontext.compaction.compact import compact_session
from picontext.compaction.completion import ScriptedCompletion
from picontext.compaction.prepare import prepare_compaction
from picontext.compaction.resumable import (
    SPAN_END_TYPE,
    SPAN_TYPE,
    end_span,
    find_pending_span,
    record_span,
    resume_preparation,
)
from picontext.compaction.settings import CompactionSettings
from picontext.session.manager import SessionManager

RESUMABLE = CompactionSettings(reserve_tokens=2000, keep_recent_tokens=1500, resumable=True)


def crashed_after_span(tmp_path: Path) -> tuple[SessionManager, str, str]:
    manager = tool_session(tmp_path)
    prep = prepare_compaction(manager.get_branch(), RESUMABLE)
    assert prep is not None
    span_id = record_span(manager, prep, RESUMABLE, reason="manual", instructions="keep the file list")
    return SessionManager.open(manager.get_session_file() or ""), span_id, prep.first_kept_entry_id


async def test_pending_span_is_resumed_with_its_own_instructions(tmp_path: Path) -> None:
    manager, span_id, first_kept = crashed_after_span(tmp_path)
    manager.append_message({"role": "user", "content": "written after the crash", "timestamp": 1})
    pending = find_pending_span(manager.get_branch())
    assert pending is not None and pending.entry_id == span_id and pending.instructions == "keep the file list"
    prep = resume_preparation(manager.get_branch(), pending)
    assert prep is not None and prep.first_kept_entry_id == first_kept
    model = ScriptedCompletion(default="## Goal\nresumed")
    outcome = await compact_session(manager, completion=model, settings=RESUMABLE)
    entry = manager.get_entry(outcome.appended[0])
    assert entry["details"]["spanId"] == span_id and entry["firstKeptEntryId"] == first_kept
    assert any("keep the file list" in str(r.messages) for r in model.requests)  # the span's instructions
    assert find_pending_span(manager.get_branch()) is None  # the compaction closed it
    assert not [e for e in manager.get_branch() if e.get("customType") == SPAN_TYPE and e["id"] != span_id]


async def test_a_span_whose_summarized_entry_was_edited_is_closed_and_planned_afresh(tmp_path: Path) -> None:
    manager, span_id, _ = crashed_after_span(tmp_path)
    summarized = next(e for e in manager.get_branch() if e["type"] == "message" and e["message"]["role"] == "user")
    manager.append_context_edit(summarized["id"], {"content": "redacted"})
    pending = find_pending_span(manager.get_branch())
    assert pending is not None and resume_preparation(manager.get_branch(), pending) is None
    outcome = await compact_session(manager, completion=ScriptedCompletion(default="## Goal\nfresh"),
                                    settings=RESUMABLE)
    branch = manager.get_branch()
    ends = [e for e in branch if e.get("customType") == SPAN_END_TYPE]
    assert [e["data"] for e in ends] == [{"spanId": span_id, "outcome": "invalid"}]
    spans = [e for e in branch if e.get("customType") == SPAN_TYPE]
    assert len(spans) == 2 and manager.get_entry(outcome.appended[0])["details"]["spanId"] == spans[1]["id"]


def test_ended_spans_and_spans_before_a_compaction_are_not_pending(tmp_path: Path) -> None:
    manager, span_id, _ = crashed_after_span(tmp_path)
    end_span(manager, span_id, "aborted")
    assert find_pending_span(manager.get_branch()) is None
    manager2, _, first_kept = crashed_after_span(tmp_path / "b")
    manager2.append_compaction("written by someone else", first_kept, 100)
    assert find_pending_span(manager2.get_branch()) is None

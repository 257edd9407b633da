"""Masking old tool results with context edits (issue 3 §5b)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from compaction_fixtures import tool_session

from picontext.compaction.compact import compact_session, context_tokens
from picontext.compaction.mask import MASK_PREFIX, apply_masks, mask_placeholder, plan_masks
from picontext.compaction.settings import CompactionSettings
from picontext.errors import NothingToCompact
from picontext.session.manager import SessionManager


def test_placeholder_is_one_line_with_tool_args_size_and_entry() -> None:
    text = mask_placeholder("bash", {"command": "ls\n-la"}, 12345, "abcd1234")
    assert "\n" not in text
    assert text == (f'{MASK_PREFIX}bash(command="ls\\n-la") returned 12345 characters; the original is entry abcd1234]')
    assert len(mask_placeholder("x", {"a": "y" * 1000}, 1, "e")) < 260


def test_plan_masks_only_outside_the_keep_window(tmp_path: Path) -> None:
    manager = tool_session(tmp_path, turns=8)
    edits = plan_masks(manager.build_session_projection(), keep_recent_tokens=2500)
    # each turn is ~1020 tokens: the window reaches back into turn 5's result, so f0-f4 are masked
    assert len(edits) == 5
    assert [f"src/f{i}.py" in e.placeholder for i, e in enumerate(edits)] == [True] * 5
    branch = {e["id"]: e for e in manager.get_branch()}
    for edit in edits:
        assert branch[edit.target_id]["message"]["role"] == "toolResult"
        assert "read(path=" in edit.placeholder and f"entry {edit.target_id}" in edit.placeholder
        assert edit.original_chars > 4000 and edit.tokens_saved > 900


def test_masking_is_append_only_branch_relative_and_idempotent(tmp_path: Path) -> None:
    manager = tool_session(tmp_path, turns=6)
    file = manager.get_session_file()
    before_bytes = Path(file).read_bytes()
    leaf_before = manager.get_leaf_id()
    before = context_tokens(manager)
    ids = apply_masks(manager, plan_masks(manager.build_session_projection(), 1000))
    assert ids and Path(file).read_bytes().startswith(before_bytes)
    assert context_tokens(manager) < before / 3
    assert plan_masks(manager.build_session_projection(), 1000) == []  # nothing left to mask
    reopened = SessionManager.open(file)
    assert sum(MASK_PREFIX in str(m.get("content")) for m in reopened.build_session_projection().messages) == len(ids)
    reopened.branch(leaf_before)  # branching from before the edits undoes them
    assert context_tokens(reopened) == before


async def test_mask_strategy_needs_no_model(tmp_path: Path) -> None:
    manager = tool_session(tmp_path, turns=6)
    outcome = await compact_session(manager, strategy="mask", settings=CompactionSettings(keep_recent_tokens=1000))
    assert outcome.masked == len(outcome.appended) > 0
    assert outcome.tokens_after < outcome.tokens_before
    with pytest.raises(NothingToCompact):
        await compact_session(manager, strategy="mask", settings=CompactionSettings(keep_recent_tokens=1000))


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sessions" / "refactor-session.jsonl"


async def test_mask_on_the_example_session() -> None:
    manager = SessionManager.in_memory(entries=[json.loads(line) for line in EXAMPLE.read_text().splitlines()])
    outcome = await compact_session(manager, strategy="mask", settings=CompactionSettings(keep_recent_tokens=2000))
    assert outcome.masked > 0 and outcome.tokens_after < outcome.tokens_before

"""The manager's incremental projection equals the pure pipeline after every operation."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from picontext._clock import FrozenClock, SequentialIds
from picontext.session.manager import SessionManager
from picontext.session.projection import build_session_path, build_session_projection, field_of, message_role

OPS = ["user", "assistant", "tool", "system", "custom_message", "compaction", "edit", "branch", "reset",
       "branch_summary", "label", "thinking", "model", "info", "release"]


def _assistant(i: int) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": f"a{i}"}], "api": "x", "provider": "p",
            "model": f"m{i % 3}", "usage": {"input": i, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                                            "totalTokens": i + 1, "cost": {"input": 0, "output": 0,
                                                                           "cacheRead": 0, "cacheWrite": 0,
                                                                           "total": 0}},
            "stopReason": "stop", "timestamp": i}


def _apply(sm: SessionManager, op: str, pick: int, i: int) -> None:
    entries = sm.get_entries()
    branch = sm.get_branch()
    if op == "user":
        sm.append_message({"role": "user", "content": f"u{i}", "timestamp": i})
    elif op == "assistant":
        sm.append_message(_assistant(i))
    elif op == "tool":
        sm.append_message({"role": "toolResult", "toolCallId": f"c{i}", "toolName": "read",
                           "content": [{"type": "text", "text": f"r{i}"}], "isError": False, "timestamp": i})
    elif op == "system":
        sm.append_message({"role": "system", "content": "", "sections": {f"s{pick % 3}": f"v{i}"},
                           "toolsAdded": [{"name": f"t{pick % 4}", "description": "d", "parameters": {}}],
                           "timestamp": i})
    elif op == "custom_message":
        sm.append_custom_message_entry("ext", f"c{i}", pick % 2 == 0)
    elif op == "compaction":
        first = None if not branch or pick % 4 == 0 else field_of(branch[pick % len(branch)], "id")
        sm.append_compaction(f"summary {i}", first, 100 + i)
    elif op == "edit":
        editable = [e for e in branch if e["type"] == "custom_message"
                    or message_role(e) in ("user", "assistant", "toolResult")]
        if editable:
            target = editable[pick % len(editable)]["id"]
            replacement = [None, {"content": f"edited {i}"}, {"content": [{"type": "text", "text": "x"}]}][pick % 3]
            sm.append_context_edit(target, replacement)
    elif op == "branch" and entries:
        sm.branch(entries[pick % len(entries)]["id"])
    elif op == "reset":
        sm.reset_leaf()
    elif op == "branch_summary":
        target = None if not entries or pick % 5 == 0 else entries[pick % len(entries)]["id"]
        sm.branch_with_summary(target, f"bs{i}" if pick % 3 else "")
    elif op == "label" and entries:
        sm.append_label_change(entries[pick % len(entries)]["id"], f"l{i}" if pick % 2 else None)
    elif op == "thinking":
        sm.append_thinking_level_change(["low", "high", "off"][pick % 3])
    elif op == "model":
        sm.append_model_change("prov", f"model-{pick % 2}")
    elif op == "info":
        sm.append_session_info(f"name {i}")
    elif op == "release" and branch:  # what a compaction with kept masks does before its summaries
        sm.release_contents([branch[pick % len(branch)]["id"]])


def _dump(value: object) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=list)  # views are written as lists


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 10_000)), min_size=1, max_size=120))
def test_incremental_projection_equals_pure_pipeline(ops: list[tuple[str, int]]) -> None:
    sm = SessionManager.in_memory("/w", clock=FrozenClock(step_ms=1), ids=SequentialIds())
    for i, (op, pick) in enumerate(ops):
        _apply(sm, op, pick, i)
        live = sm.build_session_projection()
        pure = build_session_projection(sm.get_entries(), sm.get_leaf_id(), None)
        assert _dump(live.context()) == _dump(pure.context()), f"after op {i} ({op})"
        assert [p.source_entry for p in live.entries] == [p.source_entry for p in pure.entries]
        leaf = sm.get_leaf_id()
        expected_branch = build_session_path(sm.get_entries(), leaf) if leaf else []
        assert sm.get_branch() == expected_branch


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 10_000)), min_size=1, max_size=80))
def test_a_context_handed_out_never_changes_afterwards(ops: list[tuple[str, int]]) -> None:
    """The context is handed out as views, not copies: appends, edits, compactions and leaf
    moves after it must leave every context handed out before exactly as it was."""
    sm = SessionManager.in_memory("/w", clock=FrozenClock(step_ms=1), ids=SequentialIds())
    handed_out: list[tuple[Any, Any, bytes, list[tuple[int, bytes]]]] = []
    for i, (op, pick) in enumerate(ops):
        _apply(sm, op, pick, i)
        projection = sm.build_session_projection()
        handed_out.append((projection.messages, projection.entries, _dump(projection.messages),
                           [(id(p.source_entry), _dump(p.messages)) for p in projection.entries]))
        for messages, entries, dumped, sources in handed_out:
            assert _dump(messages) == dumped, f"after op {i} ({op})"
            assert [(id(p.source_entry), _dump(p.messages)) for p in entries] == sources, f"after op {i} ({op})"


def test_long_session_with_compactions_and_edits_stays_equal() -> None:
    sm = SessionManager.in_memory("/w", clock=FrozenClock(step_ms=1), ids=SequentialIds())
    pattern = ["user", "assistant", "tool", "assistant", "edit", "user", "assistant", "compaction",
               "tool", "system", "custom_message", "label", "thinking"]
    for i in range(2_000):
        _apply(sm, pattern[i % len(pattern)], i * 7919, i)
        if i % 97 == 0:
            pure = build_session_projection(sm.get_entries(), sm.get_leaf_id(), None)
            assert _dump(sm.build_session_context()) == _dump(pure.context())
    pure = build_session_projection(sm.get_entries(), sm.get_leaf_id(), None)
    assert _dump(sm.build_session_context()) == _dump(pure.context())
    assert len(pure.messages) > 0

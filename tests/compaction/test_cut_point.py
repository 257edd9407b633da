"""Cut points: spec 02 §10 cases 26-41 (raw and projected), the §5.5 table, properties."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from planning_builders import Branch

from picontext.compaction.cut_point import (
    CutPointResult,
    find_cut_point,
    find_projected_cut_point,
    find_turn_start_index,
)
from picontext.compaction.prepare import prepare_compaction
from picontext.compaction.settings import CompactionSettings
from picontext.compaction.tokens import estimate_tokens
from picontext.session.projection import build_session_projection


def raw(b: Branch, keep: int) -> CutPointResult:
    return find_cut_point(b.entries, 0, len(b.entries), keep)


def test_case_26_custom_message_as_turn_start() -> None:
    b = Branch()
    b.u("hi"), b.a("hello"), b.custom(4000), b.a("ok")
    assert raw(b, 1) == CutPointResult(3, 2, True)
    assert raw(b, 2) == CutPointResult(2, -1, False)


def test_case_27_28_keep_everything() -> None:
    b = Branch()
    b.a("a")
    assert raw(b, 1000) == CutPointResult(0, -1, False)
    meta = Branch()
    meta.model_change(), meta.tr(100)
    assert find_cut_point(meta.entries, 1, 2, 10) == CutPointResult(1, -1, False)  # no cut point: start
    c = Branch()
    c.u(), c.a(), c.u(), c.a()
    assert raw(c, 50_000).first_kept_entry_index == 0


def twelve() -> Branch:
    """The 12-message session of spec 02 §5.5."""
    b = Branch()
    b.u(400), b.call("read", {"path": "src/auth.ts"}), b.tr(8000), b.a(800)
    b.u(200), b.call("edit", {"path": "src/auth.ts", "oldText": "abc", "newText": "d"}), b.tr(1200)
    b.a(400), b.u(120), b.call("bash", {"command": "npm test"}), b.tr(2000), b.a(600)
    return b


def test_twelve_message_sizes() -> None:
    sizes = [sum(estimate_tokens(m["message"]) for m in [e]) for e in twelve().entries]
    assert sizes == [100, 7, 2000, 200, 50, 14, 300, 100, 30, 7, 500, 150]


@pytest.mark.parametrize(("keep", "expected"), [
    (1000, CutPointResult(7, 4, True)),  # case 30
    (1150, CutPointResult(4, -1, False)),  # case 31
    (600, CutPointResult(11, 8, True)),  # case 32: kept tail 150 < keep
    (3000, CutPointResult(3, 0, True)),  # case 33
    (5000, CutPointResult(0, -1, False)),  # never reached
])
def test_cases_30_to_33_twelve_message_table(keep: int, expected: CutPointResult) -> None:
    b = twelve()
    assert raw(b, keep) == expected
    projected = find_projected_cut_point(build_session_projection(b.entries).entries, 0, 12, keep)
    assert projected.to_json() == expected.to_json()
    assert projected.exceeded_budget == (keep != 5000)


def test_case_34_metadata_before_user_is_a_split_turn_quirk() -> None:
    b = Branch()
    b.u(40), b.a(40), b.model_change(), b.u(4000), b.a(4)
    assert raw(b, 500) == CutPointResult(2, 0, True)
    entries = build_session_projection(b.entries).entries
    assert find_projected_cut_point(entries, 0, 5, 500).to_json() == {"firstKeptEntryIndex": 2, "turnStartIndex": 0,
                                                                     "isSplitTurn": True}
    exact = find_projected_cut_point(entries, 0, 5, 500, exact_split_turns=True)
    assert exact.to_json() == {"firstKeptEntryIndex": 2, "turnStartIndex": -1, "isSplitTurn": False}


def test_case_35_absorption_stops_at_a_compaction() -> None:
    b = Branch()
    b.u(), b.compaction("S", "e1"), b.a(40)
    assert raw(b, 1).first_kept_entry_index == 2


def test_case_41_keep_zero() -> None:
    b = Branch()
    b.u(40), b.a(40), b.u(40), b.a("")
    assert raw(b, 0) == CutPointResult(2, -1, False)


def test_tool_result_crossing_snaps_to_last_cut_point() -> None:
    b = Branch()
    b.u(40), b.call("read", {"path": "a"}), b.tr(4000), b.tr(4000)
    assert raw(b, 10) == CutPointResult(1, 0, True)  # no cut point after the crossing: the last one


def test_find_turn_start_index() -> None:
    b = twelve()
    assert find_turn_start_index(b.entries, 7, 0) == 4
    assert find_turn_start_index(b.entries, 3, 1) == -1


# --- properties ------------------------------------------------------------------------------

STEP = st.one_of(
    st.tuples(st.just("u"), st.integers(0, 3000)),
    st.tuples(st.just("a"), st.integers(0, 3000)),
    st.tuples(st.just("call"), st.integers(1, 3)),
    st.tuples(st.just("custom"), st.integers(0, 800)),
    st.tuples(st.just("meta"), st.just(0)),
    st.tuples(st.just("omit"), st.integers(0, 10_000)),
    st.tuples(st.just("system"), st.integers(0, 400)),
    st.tuples(st.just("compact"), st.integers(0, 10_000)),
)


def build(steps: list[tuple[str, int]]) -> Branch:
    b = Branch()
    for kind, n in steps:
        if kind == "u":
            b.u(n)
        elif kind == "a":
            b.a(n, usage=n * 3 if n % 3 == 0 else 0)
        elif kind == "call":
            b.call("edit" if n == 2 else "read", {"path": f"f{n}.py"})
            for _ in range(n):
                b.tr(n * 700)
        elif kind == "custom":
            b.custom(n)
        elif kind == "meta":
            b.model_change()
        elif kind == "system":
            b.system("s" * n)
        elif b.entries:
            target = b.entries[n % len(b.entries)]["id"]
            if kind == "omit":
                b.edit(target, None)
            elif b.entries[-1]["type"] != "compaction":
                b.compaction(f"summary {n}", target if n % 4 else None)
    return b


def conversation(items: list) -> list:
    return [m for p in items if p.source_entry["type"] != "compaction" for m in p.messages if m["role"] != "system"]


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=30), st.integers(0, 6000), st.booleans())
def test_cut_properties(steps: list[tuple[str, int]], keep: int, exact: bool) -> None:
    b = build(steps)
    projection = build_session_projection(b.entries)
    entries = projection.entries
    start = 1 if entries and entries[0].source_entry["type"] == "compaction" and entries[0].messages else 0
    cut = find_projected_cut_point(entries, start, len(entries), keep, exact_split_turns=exact)
    if start >= len(entries):
        return
    first = entries[cut.first_kept_entry_index]
    cut_roles = {"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"}
    if not any(m["role"] in cut_roles for p in entries[start:] for m in p.messages):
        assert cut == CutPointResult(start, -1, False)  # nothing to cut at: keep everything
        assert prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=keep)) is None
        return
    # never a tool result
    assert all(m["role"] != "toolResult" for m in first.messages)
    if cut.is_split_turn:
        assert start <= cut.turn_start_index < cut.first_kept_entry_index
    # budget: cutting at any later cut point would keep less than keep_recent_tokens
    visible = next((i for i in range(cut.first_kept_entry_index, len(entries)) if entries[i].messages), None)
    if visible is not None and cut.exceeded_budget:
        later = [j for j in range(visible + 1, len(entries))
                 if any(m["role"] not in ("toolResult", "system") for m in entries[j].messages)]
        for j in later:
            assert sum(estimate_tokens(m) for p in entries[j:] for m in p.messages) < max(keep, 1)
    # prepare: summarized span + prefix + kept tail cover the branch's conversation exactly once
    prep = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=keep, exact_split_turns=exact))
    if prep is None:
        return
    assert prep.first_kept_entry_id == first.source_entry["id"]
    kept = conversation(entries[cut.first_kept_entry_index :])
    whole = conversation(entries[start:])
    assert prep.messages_to_summarize + prep.turn_prefix_messages + kept == whole
    spans = prep.messages_to_summarize + prep.turn_prefix_messages
    assert all(m["role"] not in ("system", "compactionSummary") for m in spans)

"""Token accounting: spec 02 §10 cases 1-14 and 25, plus JavaScript length/JSON parity."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from planning_builders import Branch, assistant_msg, usage, user_msg

from picontext.compaction.settings import CompactionSettings
from picontext.compaction.tokens import (
    calculate_context_tokens,
    estimate_context_tokens,
    estimate_messages_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
    get_last_assistant_usage,
    js_length,
    js_number,
    json_length,
    should_compact,
)
from picontext.session.projection import build_session_projection

TOOL_76 = {"name": "read", "description": "d" * 42}  # JSON text of [TOOL_76] is 76 chars


def test_case_1_2_calculate_context_tokens() -> None:
    assert calculate_context_tokens(usage(1800, input=1000, output=500, cache_read=200, cache_write=100)) == 1800
    assert calculate_context_tokens(usage(0, input=10, output=5, cache_read=3, cache_write=2)) == 20
    assert calculate_context_tokens(usage(0)) == 0


def _entries(*messages: dict) -> list[dict]:
    return [{"type": "message", "id": f"m{i}", "message": m} for i, m in enumerate(messages)]


def test_case_3_4_5_last_assistant_usage() -> None:
    first, second = usage(0, input=100, output=50), usage(0, input=200, output=100)
    base = [user_msg("a"), assistant_msg([], usage_total=first), user_msg("b")]
    assert get_last_assistant_usage(_entries(*base, assistant_msg([], usage_total=second)))["input"] == 200
    for stop in ("aborted", "error"):
        assert get_last_assistant_usage(_entries(*base, assistant_msg([], usage_total=second, stop=stop))) is first
    assert get_last_assistant_usage(_entries(*base, assistant_msg([], usage_total=usage(0)))) is first
    assert get_last_assistant_usage(_entries(user_msg("Hello"))) is None


def test_case_6_7_estimate_context_tokens() -> None:
    messages = [user_msg("Hello"), assistant_msg([], usage_total=150), user_msg("continue"),
                assistant_msg([{"type": "text", "text": "Partial thinking"}], usage_total=0)]
    assert estimate_context_tokens(messages) == {"tokens": 156, "usageTokens": 150, "trailingTokens": 6,
                                                 "lastUsageIndex": 1}
    assert estimate_context_tokens([user_msg(40)]) == {"tokens": 10, "usageTokens": 0, "trailingTokens": 10,
                                                       "lastUsageIndex": None}


def test_spec_2_4_skipped_assistants_count_in_trailing() -> None:
    t = [{"type": "text", "text": "abcd"}]
    messages = [user_msg(40), assistant_msg(t, usage_total=300), user_msg(8),
                assistant_msg(t, usage_total=900, stop="aborted"), assistant_msg(t, usage_total=900, stop="error"),
                assistant_msg(t, usage_total=0)]
    assert estimate_context_tokens(messages) == {"tokens": 305, "usageTokens": 300, "trailingTokens": 5,
                                                 "lastUsageIndex": 1}


def test_case_8_9_per_message_estimates() -> None:
    assert estimate_tokens(user_msg("Hello")) == 2
    assert estimate_tokens(user_msg([{"type": "text", "text": "abc"}, {"type": "image", "data": "", "mimeType": ""}])) \
        == 1201
    assert estimate_tokens(user_msg("\U0001f600" * 3)) == 2  # six UTF-16 code units
    blocks = [{"type": "thinking", "thinking": "thinking"},
              {"type": "toolCall", "id": "1", "name": "read", "arguments": {"path": "file.ts"}}]
    assert estimate_tokens(assistant_msg(blocks)) == 8


def test_case_10_11_system_and_other_roles() -> None:
    system = {"role": "system", "content": "s" * 400, "sections": {"env": "e" * 40}, "toolsAdded": [TOOL_76]}
    assert json_length([TOOL_76]) == 76
    assert estimate_tokens(system) == 129
    bash = {"role": "bashExecution", "command": "ls", "output": "a\nb", "excludeFromContext": True}
    assert estimate_tokens(bash) == 2
    assert estimate_tokens({"role": "compactionSummary", "summary": "compact"}) == 2
    assert estimate_tokens({"role": "branchSummary", "summary": "branch"}) == 2
    assert estimate_tokens({"role": "futureRole", "content": "x" * 100}) == 0


def test_missing_tool_arguments_count_as_undefined() -> None:
    # The reference crashes here; we follow its harness: "undefined" (9 chars) + name (4).
    assert estimate_tokens(assistant_msg([{"type": "toolCall", "id": "1", "name": "read"}])) == 4


def test_malformed_content_counts_zero_instead_of_crashing() -> None:
    assert estimate_tokens({"role": "user"}) == 0
    assert estimate_tokens({"role": "user", "content": [None, {"type": "text"}]}) == 0
    assert estimate_tokens({"role": "assistant", "content": "a string"}) == 0


def _section_2_5_branch() -> Branch:
    b = Branch()
    b.system("s" * 400, {"env": "e" * 40}, [TOOL_76])
    b.u(400)
    b.a(400, usage=5000)
    b.system("t" * 40, {"env": "f" * 80})
    b.u(40)
    return b


def test_case_12_13_projected_estimate() -> None:
    b = _section_2_5_branch()
    projection = build_session_projection(b.entries)
    fresh = estimate_projected_context_tokens(projection, b.entries)
    assert fresh == {"tokens": 5040, "usageTokens": 5000, "trailingTokens": 40, "lastUsageIndex": 2}
    b.edit("e2", {"content": "short"})
    projection = build_session_projection(b.entries)
    stale = estimate_projected_context_tokens(projection, b.entries)
    assert stale == {"tokens": 262, "usageTokens": 0, "trailingTokens": 262, "lastUsageIndex": None}
    # the plain estimate still trusts the anchor and counts each system message separately
    assert estimate_context_tokens(projection.messages)["lastUsageIndex"] == 2


def test_case_14_compaction_makes_the_kept_usage_stale() -> None:
    b = Branch()
    b.u(400)
    kept = b.a(400, usage=5000)
    b.compaction("S", kept)
    projection = build_session_projection(b.entries)
    result = estimate_projected_context_tokens(projection, b.entries)
    assert result["lastUsageIndex"] is None
    assert result["tokens"] == 1 + 100  # the summary and the kept assistant, estimated


def test_estimate_messages_tokens_is_the_sum_of_ceilings() -> None:
    assert estimate_messages_tokens([user_msg(1), user_msg(1), user_msg(1)]) == 3


def test_case_25_should_compact() -> None:
    s = CompactionSettings(reserve_tokens=10_000)
    assert should_compact(95_000, 100_000, s) and should_compact(90_001, 100_000, s)
    assert not should_compact(90_000, 100_000, s) and not should_compact(89_000, 100_000, s)
    assert not should_compact(95_000, 100_000, CompactionSettings(enabled=False, reserve_tokens=10_000))


@pytest.mark.parametrize(("value", "js"), [(0.1, "0.1"), (1e16, "10000000000000000"), (1e21, "1e+21"),
                                           (1e-7, "1e-7"), (-0.0, "0"), (2.0, "2"), (1e-6, "0.000001"),
                                           (2**60, "1152921504606847000"), (5e-324, "5e-324")])
def test_js_number_formatting(value: float, js: str) -> None:
    assert js_number(value) == js


def test_json_length_matches_json_stringify_rules() -> None:
    assert json_length({"p": "é\u2028\u0007", "n": 1e21, "f": 0.1, "k": {"2": 1, "a": 2, "1": 3}}) == 58
    assert json_length("\ud83d") == 8  # a lone surrogate is escaped as \ud83d
    assert json_length(["\n", '"', None, True, False]) == len('["\\n","\\"",null,true,false]')


@given(st.text())
def test_js_length_counts_utf16_units(s: str) -> None:
    assert js_length(s) == len(s.encode("utf-16-le", "surrogatepass")) // 2


@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
                    max_leaves=12))
def test_json_length_fast_and_slow_paths_agree(value: object) -> None:
    from picontext.compaction.tokens import _slow_json_length

    assert json_length(value) == _slow_json_length(value)

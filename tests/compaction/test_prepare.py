"""prepare_compaction: spec 02 §10 cases 29, 36-49, the §5.5 file lists and tokensBefore, the report."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from planning_builders import Branch
from test_cut_point import twelve

from picontext.compaction.file_ops import FileOperations, compute_file_lists, format_file_operations
from picontext.compaction.prepare import CompactionPreparation, preparation_report, prepare_compaction
from picontext.compaction.settings import CompactionSettings
from picontext.compaction.tokens import estimate_projected_context_tokens
from picontext.session.projection import build_session_projection


def prep(b: Branch, keep: int = 20000, **kw: bool) -> CompactionPreparation | None:
    result = prepare_compaction(b.entries, CompactionSettings(keep_recent_tokens=keep, **kw))
    if result is not None:  # case 45
        expected = estimate_projected_context_tokens(build_session_projection(b.entries), b.entries)["tokens"]
        assert result.tokens_before == expected
    return result


def roles(messages: list) -> list[str]:
    return [m["role"] for m in messages]


def test_case_29_tool_result_after_metadata() -> None:
    b = Branch()
    b.u(), b.a(), b.u()
    call = b.call("finish_work", {})
    b.add("custom", customType="x", data={})
    b.tr("completed result")
    p = prep(b, 1)
    assert p is not None and p.first_kept_entry_id == call and p.is_split_turn
    assert roles(p.messages_to_summarize) == ["user", "assistant"] and roles(p.turn_prefix_messages) == ["user"]


def test_twelve_message_file_lists_and_tokens_before() -> None:
    b = twelve()
    p = prep(b, 1000)
    assert p is not None and p.first_kept_entry_id == "e8"
    assert len(p.messages_to_summarize) == 4 and len(p.turn_prefix_messages) == 3
    assert compute_file_lists(p.file_ops) == ([], ["src/auth.ts"])
    assert p.tokens_before == 3458
    assert prep(b, 5000) is None
    b.entries[11]["message"]["usage"]["totalTokens"] = 3650
    assert prep(b, 1000).tokens_before == 3650
    b.entries[11]["message"]["stopReason"] = "aborted"
    b.entries[9]["message"]["usage"]["totalTokens"] = 3400
    assert prep(b, 1000).tokens_before == 4050


def recovery() -> tuple[Branch, str, str]:
    b = Branch()
    b.u(400), b.a(400, usage=500)
    big = b.u(8000)
    failed = b.a("", stop="error")
    b.edit(failed, None)
    return b, big, failed


def test_case_36_recovery_omission_advances_the_cut() -> None:
    b, _, failed = recovery()
    p = prep(b, 1000)
    assert p.first_kept_entry_id == failed and p.is_split_turn
    assert roles(p.turn_prefix_messages) == ["user"] and roles(p.messages_to_summarize) == ["user", "assistant"]
    assert p.tokens_before == 2200  # the usage is stale after the edit


def test_case_37_new_custom_message_blocks_the_advance() -> None:
    b, big, _ = recovery()
    b.custom("note")
    p = prep(b, 1000)
    assert p.first_kept_entry_id == big and not p.is_split_turn


def test_case_38_external_replacement_blocks_the_advance() -> None:
    b, big, _ = recovery()
    b.edit(big, {"content": "y" * 8000})
    assert prep(b, 1000).first_kept_entry_id == big


def test_case_39_metadata_suffix_keeps_the_fresh_anchor() -> None:
    b = Branch()
    b.u(400), b.a(400, usage=500)
    big = b.u(8000)
    b.model_change(), b.add("custom", customType="x")
    p = prep(b, 1000)
    assert p.first_kept_entry_id == big and p.tokens_before == 2500


def test_case_40_omitted_notice_is_absorbed_and_reported_split() -> None:
    b = Branch()
    b.u("old task"), b.a("old result")
    notice = b.custom("notice")
    b.edit(notice, None)
    b.u(2500), b.custom("new notice")
    p = prep(b, 100)
    assert p.first_kept_entry_id == notice and p.is_split_turn
    assert roles(p.turn_prefix_messages) == ["user", "assistant"] and p.messages_to_summarize == []
    exact = prep(b, 100, exact_split_turns=True)  # the opt-in: a clean boundary, summarized as history
    assert exact.first_kept_entry_id == notice and not exact.is_split_turn
    assert roles(exact.messages_to_summarize) == ["user", "assistant"] and exact.turn_prefix_messages == []


def test_case_42_nothing_to_prepare() -> None:
    assert prepare_compaction([], CompactionSettings()) is None
    b = Branch()
    b.u(4000), b.a(4000)
    b.compaction("S", "e2")
    assert prep(b, 1) is None  # "Already compacted"


def compacted(repeat: int = 1) -> Branch:
    b = Branch()
    b.u("u1 first request " * repeat), b.a("a1 " * repeat)
    u2 = b.u("u2 second request " * repeat)
    b.a("a2 " * repeat), b.u("u3 third request " * repeat), b.a("a3 " * repeat, usage=6000)
    b.compaction("First summary", u2)
    b.u("u4 fourth " * repeat), b.a("a4 " * repeat, usage=10000)
    return b


def test_case_43_everything_still_fits() -> None:
    assert prep(compacted()) is None


def test_case_44_kept_messages_are_summarized_again() -> None:
    p = prep(compacted(12), 60)
    assert p is not None and p.previous_summary == "First summary"
    texts = " ".join(m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
                     for m in p.messages_to_summarize + p.turn_prefix_messages)
    assert "u2 second request" in texts and "First summary" not in texts
    assert "u1 first request" not in texts and "u3 third request" not in texts  # u1 was summarized, u3 is kept
    assert p.first_kept_entry_id == "e5" and not p.is_split_turn


def test_case_46_retain_none() -> None:
    b = Branch()
    b.u(4000), b.a(4000)
    b.compaction("S1")
    b.u(400), b.a(400), b.u(400), b.a(400)
    p = prep(b, 150)
    assert p.first_kept_entry_id == "e6" and not p.is_split_turn and len(p.messages_to_summarize) == 2
    assert p.tokens_before == 401


def test_case_47_dangling_first_kept_id() -> None:
    b = Branch()
    b.u(4000), b.a(4000)
    b.compaction("S", "no-such-entry")
    b.u(400), b.a(400), b.u(400), b.a(400)
    assert roles(build_session_projection(b.entries).messages)[0] == "compactionSummary"
    p = prep(b, 150)
    assert len(p.messages_to_summarize) == 2 and all(len(m["content"]) <= 400 for m in p.messages_to_summarize)


def test_case_48_system_messages_are_never_summarized() -> None:
    b = Branch()
    b.system("prompt"), b.u(400), b.system("update"), b.call("read", {"path": "a"}), b.system("more")
    b.tr(400), b.a(400), b.u(4000)
    p = prep(b, 900)
    assert "system" not in roles(p.messages_to_summarize + p.turn_prefix_messages)
    assert roles(p.messages_to_summarize) == ["user", "assistant", "toolResult", "assistant"]


def test_case_49_file_lists_are_cumulative() -> None:
    def branch(from_hook: bool) -> Branch:
        b = Branch()
        b.u(40)
        b.compaction("S", None, details={"readFiles": ["old-read.ts"], "modifiedFiles": ["old-edit.ts"]},
                     fromHook=from_hook)
        b.u(40), b.call("write", {"path": "written.ts", "content": "x"}), b.tr(40), b.a(4000)
        return b

    p = prep(branch(False), 1000)
    assert p.is_split_turn
    assert p.file_ops == FileOperations({"old-read.ts"}, {"written.ts"}, {"old-edit.ts"})
    assert prep(branch(True), 1000).file_ops == FileOperations(set(), {"written.ts"}, set())


def test_file_lists_sort_by_utf16_and_format() -> None:
    ops = FileOperations({"b.ts", "a.ts", "c.ts"}, {"c.ts"}, {"d.ts"})
    assert format_file_operations(*compute_file_lists(ops)) == (
        "\n\n<read-files>\na.ts\nb.ts\n</read-files>\n\n<modified-files>\nc.ts\nd.ts\n</modified-files>")
    assert format_file_operations([], []) == ""
    assert compute_file_lists(FileOperations({"\uff01", "\U0001f600"}))[0] == ["\U0001f600", "\uff01"]


def test_preparation_report_is_the_dry_run_contract() -> None:
    report = preparation_report(prep(twelve(), 1000))
    assert report == {"firstKeptEntryId": "e8", "tokensBefore": 3458, "isSplitTurn": True, "messagesToSummarize": 4,
                      "turnPrefixMessages": 3, "previousSummary": None, "readFiles": [],
                      "modifiedFiles": ["src/auth.ts"]}
    assert list(report) == ["firstKeptEntryId", "tokensBefore", "isSplitTurn", "messagesToSummarize",
                            "turnPrefixMessages", "previousSummary", "readFiles", "modifiedFiles"]
    assert preparation_report(None) is None

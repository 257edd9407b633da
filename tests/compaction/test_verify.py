"""The verified-summary ledger (issue 3 §5a)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from compaction_fixtures import Prep, assistant, tool_result, user

from picontext.compaction.completion import ScriptedCompletion
from picontext.compaction.file_ops import FileOperations
from picontext.compaction.summarize import summarize_preparation
from picontext.compaction.verify import (
    VerifiedFacts,
    extract_facts,
    format_ledger,
    parse_ledger,
    strip_machine_blocks,
    verify_summary,
)


def test_extract_facts_last_user_request_and_errors() -> None:
    msgs = [user("first"), assistant("ok"), user("make `parse()` accept\n  tabs"),
            tool_result("Traceback...\nValueError: bad tab at 3", is_error=True),
            tool_result("all good"), tool_result("permission denied", is_error=True)]
    facts = extract_facts(msgs)
    assert facts.last_user_request == "make `parse()` accept\n  tabs"
    assert facts.errors == ["ValueError: bad tab at 3", "permission denied"]


def test_custom_wrappers_are_not_user_requests() -> None:
    msgs = [user("real"), {"role": "compactionSummary", "summary": "S", "tokensBefore": 1, "timestamp": 1}]
    assert extract_facts(msgs).last_user_request == "real"


def test_only_missing_facts_go_into_the_ledger() -> None:
    facts = VerifiedFacts("fix the login bug", ["src/a.py", "src/b.py"], ["KeyError: 'user'"])
    text, missing = verify_summary("We will fix the login bug in src/a.py.", facts)
    assert missing.last_user_request is None and missing.modified_files == ["src/b.py"]
    assert missing.errors == ["KeyError: 'user'"]
    assert text.startswith("We will fix the login bug in src/a.py.\n\n<verified-facts>\n")
    assert verify_summary("fix the login bug src/a.py src/b.py KeyError: 'user'", facts)[0].endswith("'user'")


def test_ledger_round_trip() -> None:
    facts = VerifiedFacts("line one\n> quoted\n", ["a b.py"], ["TypeError: x", "FAILED t"])
    block = format_ledger(facts)
    parsed = parse_ledger("notes" + block)
    assert parsed.last_user_request == facts.last_user_request
    assert parsed.modified_files == facts.modified_files and parsed.errors == facts.errors
    assert strip_machine_blocks("notes" + block) == "notes"
    assert format_ledger(VerifiedFacts()) == ""


def _poor(req) -> str:
    return "## Goal\nKeep working.\n\n## Next Steps\n1. Continue."


async def test_planted_facts_survive_ten_poor_compactions() -> None:
    """Each round summarizes fresh filler with the previous summary; the poor model drops everything."""
    planted_request = "Rename `load_cfg` to `load_config` everywhere and keep the old name as an alias"
    planted_error = "ImportError: cannot import name 'load_cfg' from 'app.settings'"
    model = ScriptedCompletion(default=_poor)
    first = [user(planted_request), assistant("", [("edit", {"path": "app/settings.py"})]),
             tool_result(planted_error, is_error=True)]
    previous, facts, ops = None, None, FileOperations()
    for round_ in range(10):
        span = first if round_ == 0 else [assistant(f"filler {round_}", [("read", {"path": f"f{round_}.py"})]),
                                          tool_result("ok " * 50)]
        for m in span:
            if m["role"] == "assistant":
                for b in m["content"]:
                    if b["type"] == "toolCall":
                        getattr(ops, {"read": "read", "edit": "edited"}[b["name"]]).add(b["arguments"]["path"])
        prep = Prep(span, previous_summary=previous, file_ops=ops)
        result = await summarize_preparation(prep, model, reserve_tokens=1000, previous_facts=facts)
        previous, facts = result.summary, VerifiedFacts.from_json(result.details["verifiedFacts"])
    assert f"> {planted_request}" in previous
    assert planted_error in previous
    assert parse_ledger(previous).modified_files == ["app/settings.py"]  # in the ledger, not only the file list
    assert previous.count("<verified-facts>") == 1


async def test_a_pasted_request_is_quoted_only_up_to_the_summary_budget() -> None:
    """A paste that overflowed the window must not come back whole inside the summary."""
    paste = "Checksums:\n" + " ".join(f"{n:08d}" for n in range(1000, 1400))  # 3,610 characters
    result = await summarize_preparation(Prep([user(paste)]), ScriptedCompletion(default=_poor), reserve_tokens=256)
    budget = 204  # one character per token of the history summary's 0.8 x 256 tokens
    assert f"Last user request (verbatim, its first {budget} of 3,610 characters):" in result.summary
    quoted = "> " + paste[:budget].replace("\n", "\n> ")
    assert f"{quoted}\n</verified-facts>" in result.summary and paste[budget - 10:budget + 1] not in result.summary
    assert result.details["verifiedFacts"]["lastUserRequest"] == paste  # the whole text is kept in details
    assert parse_ledger(result.summary).last_user_request == paste[:budget]
    short = await summarize_preparation(Prep([user("fix the bug")]), ScriptedCompletion(default=_poor),
                                        reserve_tokens=256)
    assert "Last user request (verbatim):\n> fix the bug\n" in short.summary

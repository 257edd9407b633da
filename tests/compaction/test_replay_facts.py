"""The replay's facts (compaction/replay_facts.py): computed from the transcript alone, by rules
that share no code with the verified-facts ledger, and found (or not) in a context."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from picontext.compaction.replay_facts import context_text, fact_kept, key_terms, next_call, transcript_facts

SRC = Path(__file__).resolve().parents[2] / "src" / "picontext" / "compaction" / "replay_facts.py"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 0}


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}],
            "timestamp": 0}


def result(call_id: str, text: str, error: bool = False) -> dict[str, Any]:
    return {"role": "toolResult", "toolCallId": call_id, "toolName": "x", "content": [{"type": "text", "text": text}],
            "isError": error, "timestamp": 0}


def facts_by_kind(before: list[dict[str, Any]], after: list[dict[str, Any]] | None = None,
                  cwd: str = "/repo") -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for fact in transcript_facts(before, after or [], cwd):
        out.setdefault(fact.kind, []).append(fact)
    return out


def test_the_facts_share_no_code_with_the_ledger() -> None:
    """Measuring the ledger with the ledger's own extraction would make it perfect by construction."""
    tree = ast.parse(SRC.read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    # nothing of the compaction layer (verify.py, file_ops.py, summarize.py): only the plain content reader
    assert {m for m in imported if m.startswith("picontext")} == {"picontext.session.convert"}, imported


def test_files_of_every_agents_tools_and_only_calls_that_worked() -> None:
    facts = facts_by_kind([
        user("Rename load_cfg to load_config across the settings package"),
        call("read", "1", path="src/app.py"), result("1", "print(1)"),
        call("Read", "2", file_path="/repo/src/settings.py"), result("2", "x = 1"),
        call("Edit", "3", file_path="/repo/src/settings.py", old_string="a", new_string="b"), result("3", "ok"),
        call("str_replace_editor", "4", command="create", path="/repo/docs/NOTES.md"), result("4", "File created"),
        call("write", "5", path="src/broken.py"), result("5", "Permission denied", error=True),
        call("bash", "6", command="cat README.md"), result("6", "# readme"),
    ])
    assert [f.value for f in facts["read"]] == ["src/app.py", "README.md"]
    assert [f.value for f in facts["modified"]] == ["/repo/src/settings.py", "/repo/docs/NOTES.md"]
    # the path, relative to the cwd, or its last two parts find it
    assert fact_kept(facts["modified"][0], "we changed src/settings.py")
    assert not fact_kept(facts["modified"][0], "we changed settings")


def test_swe_agent_edits_go_to_the_open_file() -> None:
    facts = facts_by_kind([
        user("Fix the rounding of TimeDelta serialization in marshmallow"),
        call("bash", "1", command="open src/marshmallow/fields.py 1474"),
        result("1", "[File: /repo/src/marshmallow/fields.py (1997 lines total)]\n1474: return int(x)"),
        call("bash", "2", command="edit 1474:1474\n        return int(round(x))\nend_of_edit"),
        result("2", "[File: /repo/src/marshmallow/fields.py (1997 lines total)]\n1474: return int(round(x))"),
    ], [call("bash", "3", command="edit 1475:1475\npass\nend_of_edit")])
    assert [f.value for f in facts["modified"]] == ["/repo/src/marshmallow/fields.py"]
    assert facts["next"][0].value == "/repo/src/marshmallow/fields.py" and facts["next"][0].detail["tool"] == "bash"


def test_latest_error_and_whether_it_was_resolved() -> None:
    before = [
        user("Make the test suite pass after the parser refactor"),
        call("bash", "1", command="pytest tests/test_parser.py"),
        result("1", "Traceback (most recent call last):\n  File \"p.py\", line 3\n"
                    "ModuleNotFoundError: No module named 'tomllib_compat'"),
    ]
    unresolved = facts_by_kind(before)["error"][0]
    assert unresolved.value == "ModuleNotFoundError: No module named 'tomllib_compat'"
    assert unresolved.detail["resolved"] is False
    later = [call("edit", "2", path="p.py"), result("2", "ok"),
             call("bash", "3", command="pytest tests/test_parser.py"), result("3", "3 passed")]
    assert facts_by_kind(before + later)["error"][0].detail["resolved"] is True
    # code that mentions an error class is not an error
    listing = facts_by_kind([user("Read the error handling of the parser module"), call("read", "4", path="e.py"),
                             result("4", "    raise ValueError('bad')\n12: class ParseError(Exception):")])
    assert "error" not in listing


def test_task_request_and_claude_code_wrappers() -> None:
    facts = facts_by_kind([
        user("Implement spotter-gqc: transcript annotations with message references"),
        user("<command-name>/mcp</command-name>"),
        user("<task-notification>\n<task-id>b0be39e</task-id>\n<status>completed</status>\n</task-notification>"),
        user("yes"),
        user("Now persist the annotation_message_refs in SessionLive"),
        user("ok go on"),
    ])
    assert facts["task"][0].value.startswith("Implement spotter-gqc")
    assert facts["task"][0].terms[0] == "spotter-gqc"  # a hyphenated name is an identifier
    assert facts_by_kind([user("Implement spotter-gqc")])["task"][0].terms == ("spotter-gqc", "implement")
    assert facts["request"][0].value == "Now persist the annotation_message_refs in SessionLive"
    assert "annotation_message_refs" in facts["request"][0].terms


def test_key_terms_and_coverage() -> None:
    terms = key_terms("Rename load_cfg to load_config in app/settings.py, see https://example.com/x/y and port 8437")
    assert terms[:4] == ("load_cfg", "load_config", "app/settings.py", "8437")
    assert not any("example.com" in t for t in terms)
    assert key_terms("yes, go on") == ()
    facts = facts_by_kind([user("Rename load_cfg to load_config in app/settings.py")])
    task = facts["task"][0]
    assert fact_kept(task, "renamed load_cfg -> load_config (app/settings.py)")
    assert not fact_kept(task, "renamed a function")


def test_next_call_skips_bookkeeping_and_reads_the_context_text() -> None:
    after = [call("TodoWrite", "1", todos=[]), call("Grep", "2", pattern="def build_index", path="src/")]
    assert next_call(after) == ("Grep", "src/")
    text = context_text([
        {"role": "system", "content": "SYSTEM PROMPT words"},
        user("hello"),
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "secret plan"},
                                          {"type": "text", "text": "visible"},
                                          {"type": "toolCall", "id": "c", "name": "Read",
                                           "arguments": {"file_path": "/a/b.py"}}]},
        {"role": "compactionSummary", "summary": "Goal: FIX", "tokensBefore": 1},
    ])
    assert "system prompt" not in text and "secret plan" not in text
    assert all(w in text for w in ("hello", "visible", "read /a/b.py", "goal: fix"))

"""`picontext import`: real Claude Code transcripts and SWE-agent trajectories (tests/fixtures/replay,
SOURCES.md) become Pi sessions every other command reads; bad input writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from inprocess import run_main

from picontext.session.projection import LAST, build_session_context
from picontext.session.store import load_file_entries

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay"
CLAUDE = FIXTURES / "claude-code"
SWE = FIXTURES / "swe-agent"
COMPACTED = CLAUDE / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def picontext(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "picontext", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def import_json(*args: str) -> list[dict[str, Any]]:
    out = picontext("import", "--json", *args)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def entries_of(path: str | Path) -> list[dict[str, Any]]:
    return load_file_entries(str(path))


def context_of(path: str | Path) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = build_session_context(entries_of(path)[1:], LAST)["messages"]
    return messages


# -- Claude Code -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("claude-import")
    sessions = import_json(str(COMPACTED), str(CLAUDE / "tool_heavy.jsonl"), str(CLAUDE / "short.jsonl"),
                           "-o", str(out))
    return {Path(s["source"]).name: s for s in sessions}


def test_one_session_per_transcript_and_one_per_subagent(claude: dict[str, dict[str, Any]]) -> None:
    assert set(claude) == {COMPACTED.name, "tool_heavy.jsonl", "short.jsonl", "agent-a881341.jsonl",
                           "agent-acompact-fffbd0.jsonl"}
    main = claude[COMPACTED.name]
    assert main["sessionId"] == "258c7280-ae70-4798-800f-63464d01a85d"
    for row in claude.values():  # docs/import.md: what `--json` prints per written session
        assert set(row) == {"source", "format", "path", "sessionId", "entries", "parentSession"}
        assert row["format"] == "claude-code" and row["entries"] == len(entries_of(row["path"])) - 1
    for agent in ("agent-a881341.jsonl", "agent-acompact-fffbd0.jsonl"):
        side = claude[agent]
        assert side["parentSession"] == main["path"]
        header = entries_of(side["path"])[0]
        assert header["parentSession"] == main["path"] and header["id"].startswith(main["sessionId"] + "-agent-")
    summarizer = context_of(claude["agent-acompact-fffbd0.jsonl"]["path"])
    source_lines = lines_of(COMPACTED.parent / COMPACTED.stem / "subagents" / "agent-acompact-fffbd0.jsonl")
    assert len(summarizer) == len(source_lines)  # lines whose parents are in the main file follow each other
    explore = entries_of(claude["agent-a881341.jsonl"]["path"])[1]
    # the parent's Task tool call that started the subagent, from the parent's progress lines
    assert explore["customType"] == "picontext.import" and explore["data"]["parentToolCallId"].startswith("toolu_")
    assert explore["data"]["agentId"] == "a881341"


def test_lines_of_one_api_message_become_one_assistant_message(claude: dict[str, dict[str, Any]]) -> None:
    source = lines_of(CLAUDE / "tool_heavy.jsonl")
    ids = [line["message"]["id"] for line in source if line["type"] == "assistant"]
    assert len(ids) > len(set(ids))  # the source splits messages into several lines
    assistants = [m for m in context_of(claude["tool_heavy.jsonl"]["path"]) if m["role"] == "assistant"]
    assert [m["responseId"] for m in assistants] == list(dict.fromkeys(ids))
    blocks = Counter(b["type"] for m in assistants for b in m["content"])
    source_blocks = Counter(b["type"] for line in source if line["type"] == "assistant"
                            for b in line["message"]["content"])
    assert blocks["toolCall"] == source_blocks["tool_use"] and blocks["thinking"] == source_blocks["thinking"]


def test_every_tool_call_is_answered_before_the_next_message(claude: dict[str, dict[str, Any]]) -> None:
    """Results that Claude Code wrote between the lines of one message, or hung on different
    lines, all follow their assistant message on the branch the model sees."""
    for name in ("tool_heavy.jsonl", COMPACTED.name):
        open_calls: set[str] = set()
        for message in context_of(claude[name]["path"]):
            if message["role"] == "assistant":
                assert not open_calls, (name, open_calls)
                open_calls = {b["id"] for b in message["content"] if b["type"] == "toolCall"}
            elif message["role"] == "toolResult":
                assert message["toolCallId"] in open_calls
                open_calls.discard(message["toolCallId"])


def test_tool_results_keep_is_error_and_their_structured_result(claude: dict[str, dict[str, Any]]) -> None:
    source = lines_of(CLAUDE / "short.jsonl")
    errors = {b["tool_use_id"] for line in source if line["type"] == "user" and isinstance(
        line["message"]["content"], list) for b in line["message"]["content"] if b.get("is_error")}
    assert errors
    results = [m for m in context_of(claude["short.jsonl"]["path"]) if m["role"] == "toolResult"]
    assert {m["toolCallId"] for m in results if m["isError"]} == errors
    assert {m["toolName"] for m in results} == {"Bash", "Glob"}
    heavy = [m for m in context_of(claude["tool_heavy.jsonl"]["path"]) if m["role"] == "toolResult"]
    assert any(isinstance(m.get("details"), dict) and "filenames" in m["details"] for m in heavy)


def test_usage_cache_reads_and_writes_cwd_and_times_are_kept(claude: dict[str, dict[str, Any]]) -> None:
    source = lines_of(CLAUDE / "tool_heavy.jsonl")
    last_usage = {line["message"]["id"]: line["message"]["usage"] for line in source if line["type"] == "assistant"}
    entries = entries_of(claude["tool_heavy.jsonl"]["path"])
    assistants = [e["message"] for e in entries if e["type"] == "message" and e["message"]["role"] == "assistant"]
    for message in assistants:
        raw = last_usage[message["responseId"]]
        usage = message["usage"]
        assert (usage["input"], usage["output"], usage["cacheRead"], usage["cacheWrite"]) == (
            raw["input_tokens"], raw["output_tokens"], raw["cache_read_input_tokens"],
            raw["cache_creation_input_tokens"])
        assert usage["totalTokens"] == usage["input"] + usage["output"] + usage["cacheRead"] + usage["cacheWrite"]
    assert sum(m["usage"]["cacheRead"] for m in assistants) > 0
    first = next(line for line in source if line["type"] == "user")
    assert entries[0]["cwd"] == first["cwd"] == "/home/marco/projects/spotter"
    times = {line["uuid"]: line["timestamp"] for line in source if "uuid" in line}
    for entry in entries[1:]:
        if entry["id"] in times:
            assert entry["timestamp"] == times[entry["id"]]


def test_claude_codes_compaction_becomes_a_compaction_entry(claude: dict[str, dict[str, Any]]) -> None:
    source = lines_of(COMPACTED)
    boundary = next(line for line in source if line.get("subtype") == "compact_boundary")
    summary = next(line for line in source if line.get("isCompactSummary"))
    entries = entries_of(claude[COMPACTED.name]["path"])
    compaction = next(e for e in entries if e["type"] == "compaction")
    assert compaction["id"] == compaction["firstKeptEntryId"] == boundary["uuid"]  # keeps nothing, as Claude Code
    assert compaction["tokensBefore"] == 167094 == boundary["compactMetadata"]["preTokens"]
    assert compaction["summary"] == summary["message"]["content"]
    by_id = {e["id"]: e for e in entries[1:]}
    assert by_id[compaction["parentId"]]["type"] == "message"  # hangs after the last message before it
    context = context_of(claude[COMPACTED.name]["path"])
    assert context[0]["role"] == "compactionSummary" and context[0]["tokensBefore"] == 167094
    assert not any(m.get("role") == "user" and "This session is being continued" in str(m.get("content"))
                   for m in context)


def test_meta_system_and_skipped_lines(claude: dict[str, dict[str, Any]]) -> None:
    entries = entries_of(claude["tool_heavy.jsonl"]["path"])
    meta = [e for e in entries if e["type"] == "custom_message"]
    assert len(meta) == 1 and meta[0]["customType"] == "claude-code.meta" and meta[0]["display"] is False
    assert "Caveat" in meta[0]["content"]
    system = [e for e in entries if e["type"] == "custom" and e["customType"] == "claude-code.system"]
    assert [e["data"]["subtype"] for e in system] == ["local_command", "local_command"]
    source_types = Counter(line["type"] for line in lines_of(CLAUDE / "tool_heavy.jsonl"))
    assert source_types["progress"] and source_types["file-history-snapshot"] and source_types["queue-operation"]
    kept = {e.get("data", {}).get("type") for e in entries if e["type"] == "custom"}
    assert not kept & {"progress", "file-history-snapshot", "queue-operation"}


def test_every_command_reads_the_imported_sessions(claude: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    main = claude[COMPACTED.name]["path"]
    shown = run_main("show", main)
    assert shown.returncode == 0 and "compaction" in shown.stdout, shown.stderr
    tree = run_main("tree", main, "--json")
    assert tree.returncode == 0, tree.stderr
    tokens = json.loads(run_main("tokens", main, "--json").stdout)
    assert tokens["estimate"]["tokens"] > 10_000
    plan = run_main("compact", main, "--dry-run", "--json", "--keep-recent-tokens", "2000")
    assert plan.returncode == 0 and json.loads(plan.stdout)["previousSummary"].startswith("This session is being")
    dropped = json.loads(run_main("dropped", main, "--json").stdout)
    assert len(dropped) > 100 and {d["why"] for d in dropped} == {"compacted"}
    page = tmp_path / "page.html"
    exported = run_main("export", main, "-o", str(page))
    assert exported.returncode == 0 and page.stat().st_size > 100_000, exported.stderr
    masked = picontext("compact", main, "--strategy", "mask", "--keep-recent-tokens", "2000", "--json")
    assert masked.returncode == 0 and json.loads(masked.stdout)["masked"] > 0, masked.stderr


def test_titles_environment_changes_and_inline_sidechains(tmp_path: Path) -> None:
    """Shapes the published transcripts do not show: a 1.x file with an inline sidechain, a
    custom title, a later working directory."""
    base = {"userType": "external", "sessionId": "11111111-2222-4333-8444-555555555555", "version": "1.0.44"}
    lines = [
        {**base, "type": "user", "uuid": "u1", "parentUuid": None, "isSidechain": False, "cwd": "/w",
         "timestamp": "2025-07-01T10:00:00.000Z", "message": {"role": "user", "content": "start"}},
        {**base, "type": "user", "uuid": "s1", "parentUuid": None, "isSidechain": True, "cwd": "/w",
         "timestamp": "2025-07-01T10:00:01.000Z", "message": {"role": "user", "content": "side task"}},
        {**base, "type": "assistant", "uuid": "s2", "parentUuid": "s1", "isSidechain": True, "cwd": "/w",
         "timestamp": "2025-07-01T10:00:02.000Z", "costUSD": 0.0125, "message": {
             "id": "msg_s", "role": "assistant", "model": "claude-sonnet-4-5", "content": [
                 {"type": "text", "text": "side answer"}], "stop_reason": "end_turn",
             "usage": {"input_tokens": 1, "output_tokens": 2}}},
        {**base, "type": "assistant", "uuid": "a1", "parentUuid": "u1", "isSidechain": False, "cwd": "/w/sub",
         "timestamp": "2025-07-01T10:00:03.000Z", "message": {
             "id": "msg_a", "role": "assistant", "model": "claude-sonnet-4-5", "content": [
                 {"type": "text", "text": "main answer"}], "stop_reason": "end_turn",
             "usage": {"input_tokens": 1000000, "output_tokens": 0}}},
        {"type": "custom-title", "customTitle": "my\nrenamed session", "sessionId": base["sessionId"]},
    ]
    source = tmp_path / "s.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    sessions = import_json(str(source), "-o", str(tmp_path / "out"))
    assert len(sessions) == 2
    main, side = sessions
    assert side["parentSession"] == main["path"]
    assert [m["content"] for m in context_of(side["path"]) if m["role"] == "user"] == ["side task"]
    side_reply = next(m for m in context_of(side["path"]) if m["role"] == "assistant")
    assert side_reply["usage"]["cost"]["total"] == 0.0125  # what 1.x recorded it cost
    main_context = context_of(main["path"])
    assert [m["role"] for m in main_context] == ["user", "assistant"]
    assert main_context[1]["usage"]["cost"]["input"] == 3.0  # the catalog's price for claude-sonnet-4-5
    entries = entries_of(main["path"])
    assert entries[-1]["type"] == "session_info" and entries[-1]["name"] == "my renamed session"
    moved = [e for e in entries if e.get("customType") == "claude-code.environment"]
    assert [e["data"]["cwd"] for e in moved] == ["/w/sub"]
    listed = run_main("sessions", "--all", "--dir", str(tmp_path / "out"), "--json")
    assert "my renamed session" in listed.stdout


def test_rewinds_api_errors_redacted_thinking_and_titles(tmp_path: Path) -> None:
    base = {"userType": "external", "sessionId": "22222222-2222-4333-8444-555555555555", "version": "2.0.61",
            "cwd": "/w", "isSidechain": False}

    def assistant(uid: str, parent: str, mid: str, *blocks: dict[str, Any], **extra: Any) -> dict[str, Any]:
        model = extra.pop("model", "claude-opus-4-5")
        return {**base, "type": "assistant", "uuid": uid, "parentUuid": parent, **extra,
                "timestamp": "2025-11-01T10:00:01.000Z", "message": {
                    "id": mid, "role": "assistant", "model": model, "content": list(blocks),
                    "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 1}}}

    def user(uid: str, parent: str | None, text: str) -> dict[str, Any]:
        return {**base, "type": "user", "uuid": uid, "parentUuid": parent, "timestamp": "2025-11-01T10:00:00.000Z",
                "message": {"role": "user", "content": text}}

    lines = [
        {"type": "ai-title", "aiTitle": "First guess", "sessionId": base["sessionId"]},
        user("u1", None, "first question"),
        assistant("a1", "u1", "msg_1", {"type": "redacted_thinking", "data": "opaque"},
                  {"type": "text", "text": "first answer"}),
        assistant("e1", "a1", "msg_e", {"type": "text", "text": "API Error: 529 overloaded"},
                  model="<synthetic>", isApiErrorMessage=True),
        user("u2", "u1", "the question asked again, differently"),  # a rewind to after u1
        assistant("a2", "u2", "msg_2", {"type": "text", "text": "second answer"}),
        {"type": "custom-title", "customTitle": "Renamed", "sessionId": base["sessionId"]},
        {"type": "ai-title", "aiTitle": "Later guess", "sessionId": base["sessionId"]},
        {"type": "summary", "summary": "Some other session", "leafUuid": "elsewhere"},
    ]
    source = tmp_path / "s.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (session,) = import_json(str(source), "-o", str(tmp_path / "out"))
    entries = entries_of(session["path"])
    by_id = {e["id"]: e for e in entries[1:]}
    assert by_id["u2"]["parentId"] == "u1" and by_id["a1"]["parentId"] == "u1"  # the rewind is a branch
    assert [m.get("content") for m in context_of(session["path"]) if m["role"] == "user"] == [
        "first question", "the question asked again, differently"]
    first = by_id["a1"]["message"]
    assert first["content"][0] == {"type": "thinking", "thinking": "", "thinkingSignature": "opaque", "redacted": True}
    error = by_id["e1"]["message"]
    assert error["stopReason"] == "error" and error["errorMessage"] == "API Error: 529 overloaded"
    assert error["model"] == "claude-opus-4-5"  # not "<synthetic>": the session's model stays a real one
    names = [e["name"] for e in entries if e["type"] == "session_info"]
    assert names == ["First guess", "Renamed"]  # an ai title never outranks the user's own
    kept = [e["customType"] for e in entries if e["type"] == "custom"]
    assert kept == ["picontext.import", "claude-code.ai-title", "claude-code.summary"]
    (again,) = import_json(str(source), "-o", str(tmp_path / "again"))
    assert Path(again["path"]).read_bytes() == Path(session["path"]).read_bytes()  # reproducible, ids included


def test_default_directory_is_the_sessions_working_directory(tmp_path: Path) -> None:
    out = picontext("import", str(CLAUDE / "short.jsonl"))
    assert out.returncode == 0, out.stderr
    listed = json.loads(run_main("sessions", "--all", "--json").stdout)
    assert [s["cwd"] for s in listed] == ["/home/marco/projects/spotter"]
    again = picontext("import", str(CLAUDE / "short.jsonl"))
    assert again.returncode == 2 and "exists" in again.stderr and "--force" in again.stderr
    assert picontext("import", "--force", str(CLAUDE / "short.jsonl")).returncode == 0


# -- SWE-agent -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def swe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("swe-import")
    sessions = import_json(*sorted(str(p) for p in SWE.glob("*.traj")), "-o", str(out))
    return {Path(s["source"]).name: s for s in sessions}


def test_classic_trajectory_one_message_per_step(swe: dict[str, dict[str, Any]]) -> None:
    data = json.loads((SWE / "pydicom__pydicom-1458.traj").read_text())
    steps = data["trajectory"]
    context = context_of(swe["pydicom__pydicom-1458.traj"]["path"])
    assert [m["role"] for m in context[:2]] == ["system", "user"]
    assert "Pixel Representation attribute should be optional" in context[1]["content"]
    assistants = [m for m in context if m["role"] == "assistant"]
    assert len(assistants) == len(steps) == 12
    for message, step in zip(assistants, steps, strict=True):
        text, call = message["content"][0], message["content"][-1]
        assert text["text"] == step["thought"]
        assert call["name"] == "bash" and call["arguments"]["command"] == step["action"].rstrip("\n")
    results = [m for m in context if m["role"] == "toolResult"]
    assert len(results) == 12 and results[-1]["content"][0]["text"] == steps[-1]["observation"]  # submit's diff
    assert results[0]["details"]["state"] == steps[0]["state"]
    assert results[1]["details"]["response"] == steps[1]["response"] != steps[1]["thought"]
    # the demonstration in the history is not part of the conversation
    demo = next(m for m in data["history"] if m.get("is_demo"))
    assert not any(demo["content"][:200] in json.dumps(m) for m in context)
    entries = entries_of(swe["pydicom__pydicom-1458.traj"]["path"])
    assert [e["customType"] for e in entries if e["type"] == "custom"] == [
        "picontext.import", "swe-agent.demonstration", "swe-agent.info"]
    assert entries[0]["cwd"] == "/pydicom__pydicom"


def test_a_trajectory_keeps_its_session_id(swe: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    again = import_json(str(SWE / "pydicom__pydicom-1458.traj"), "-o", str(tmp_path))
    assert again[0]["sessionId"] == swe["pydicom__pydicom-1458.traj"]["sessionId"]


def test_shapes_the_published_trajectories_do_not_show(tmp_path: Path) -> None:
    """Another agent's message, tool arguments that are not JSON, a trajectory without history."""
    mixed = {"history": [
        {"role": "system", "content": "be careful", "agent": "main"},
        {"role": "user", "content": "Fix issue 7 in parser_core.py", "agent": "main"},
        {"role": "assistant", "content": "look", "thought": "look", "agent": "main", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "ls -la"}}]},
        {"role": "tool", "content": "parser_core.py", "tool_call_ids": ["c1"], "agent": "main"},
        {"role": "assistant", "content": "looks fine", "thought": "looks fine", "agent": "reviewer",
         "action": "submit"},
    ], "trajectory": [], "info": {"exit_status": "submitted"}}
    steps_only = {"trajectory": [{"thought": "run it", "action": "python t.py\n", "observation": "ok",
                                  "response": "run it\n```\npython t.py\n```", "state": {"working_dir": "/r"}}]}
    (tmp_path / "mixed.traj").write_text(json.dumps(mixed))
    (tmp_path / "steps.traj").write_text(json.dumps(steps_only))
    mixed_session, steps_session = import_json(str(tmp_path / "mixed.traj"), str(tmp_path / "steps.traj"),
                                               "-o", str(tmp_path / "out"))
    context = context_of(mixed_session["path"])
    call = next(b for m in context if m["role"] == "assistant" for b in m["content"] if b["type"] == "toolCall")
    assert call["arguments"] == {"arguments": "ls -la"}  # kept as the model wrote it
    reviewer = [m for m in context if m["role"] == "assistant"][-1]
    assert reviewer["content"][0] == {"type": "text", "text": "[agent reviewer]"}
    steps = context_of(steps_session["path"])
    assert [m["role"] for m in steps] == ["assistant", "toolResult"]
    assert steps[0]["content"][-1]["arguments"] == {"command": "python t.py"} and steps[1]["content"][0]["text"] == "ok"
    assert entries_of(steps_session["path"])[0]["cwd"] == "/r"


def test_function_calling_trajectory_keeps_its_tool_calls(swe: dict[str, dict[str, Any]]) -> None:
    data = json.loads((SWE / "marshmallow-code__marshmallow-1867.traj").read_text())
    calls = [c for m in data["history"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    context = context_of(swe["marshmallow-code__marshmallow-1867.traj"]["path"])
    ours = [b for m in context if m["role"] == "assistant" for b in m["content"] if b["type"] == "toolCall"]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [(c["id"], c["name"]) for c in ours]
    assert ours[0]["arguments"] == {"filename": "reproduce.py"}
    results = {m["toolCallId"]: m for m in context if m["role"] == "toolResult"}
    assert set(results) == {c["id"] for c in calls}
    assert results[ours[0]["id"]]["toolName"] == "create"


def test_swe_sessions_read_by_every_command(swe: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    path = swe["pydicom__pydicom-1458.traj"]["path"]
    for args in (("show", path), ("tree", path), ("tokens", path), ("dropped", path),
                 ("compact", path, "--dry-run", "--json", "--keep-recent-tokens", "1000"),
                 ("export", path, "-o", str(tmp_path / "p.html"))):
        out = run_main(*args)
        assert out.returncode == 0, (args, out.stderr)
    plan = json.loads(run_main("compact", path, "--dry-run", "--json", "--keep-recent-tokens", "1000").stdout)
    # one task, then steps: the whole run is one turn, so the cut splits it
    assert plan["isSplitTurn"] is True and plan["turnPrefixMessages"] > 5


# -- bad input ------------------------------------------------------------------------------------------


def _bad(tmp_path: Path, name: str, content: bytes | str, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    source = tmp_path / name
    source.write_bytes(content if isinstance(content, bytes) else content.encode())
    out_dir = tmp_path / "out"
    result = picontext("import", *extra, str(source), "-o", str(out_dir))
    return result, out_dir


_CUT = (CLAUDE / "short.jsonl").read_bytes()[:4000]
_CUT_LINE = _CUT.count(b"\n") + 1


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("trunc.jsonl", _CUT, f"trunc.jsonl:{_CUT_LINE}: truncated line"),
    ("badline.jsonl", b'{"type":"user","sessionId":"x","uuid":"a","cwd":"/w","timestamp":"2025-01-01T00:00:00Z",'
                      b'"message":{"role":"user","content":"hi"}}\n{not json\n', "badline.jsonl:2: not valid JSON"),
    ("future.jsonl", json.dumps({"type": "user", "sessionId": "x", "version": "3.0.1", "uuid": "a"}) + "\n",
     "future.jsonl:1: Claude Code version 3.0.1 is not supported"),
    ("pi.jsonl", (FIXTURES / "pi" / "real-large-session.jsonl").read_bytes()[:20000].rsplit(b"\n", 1)[0] + b"\n",
     "pi.jsonl:1: is a Pi session already"),
    ("other.jsonl", b'{"hello": "world"}\n', "other.jsonl:1: not a Claude Code transcript or a SWE-agent trajectory"),
    ("cut.traj", (SWE / "pydicom__pydicom-1458.traj").read_bytes()[:50000], "cut.traj:"),
    ("list.traj", b"[1, 2, 3]\n", "list.traj:1: not a SWE-agent trajectory"),
    ("future.traj", json.dumps({"history": [], "info": {"swe_agent_version": "2.0.0"}}),
     "SWE-agent version 2.0.0 is not supported"),
    ("empty.jsonl", b"", "empty.jsonl: empty file"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, name: str, content: bytes | str,
                                                  needle: str) -> None:
    result, out_dir = _bad(tmp_path, name, content)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and needle in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not out_dir.exists() or list(out_dir.iterdir()) == []


def test_a_bad_file_after_good_ones_leaves_nothing_behind(tmp_path: Path) -> None:
    bad = tmp_path / "zz-trunc.jsonl"
    bad.write_bytes((CLAUDE / "tool_heavy.jsonl").read_bytes()[:-40])
    out_dir = tmp_path / "out"
    result = picontext("import", str(COMPACTED), str(SWE / "pydicom__pydicom-1458.traj"), str(bad),
                       "-o", str(out_dir))
    assert result.returncode == 2 and "zz-trunc.jsonl:39: truncated line" in result.stderr, result.stderr
    assert list(out_dir.iterdir()) == []  # neither the sessions before it nor their temporary files


def test_wrong_format_named_by_from(tmp_path: Path) -> None:
    result = picontext("import", "--from", "swe-agent", str(CLAUDE / "short.jsonl"), "-o", str(tmp_path))
    assert result.returncode == 2 and "short.jsonl:" in result.stderr and result.stderr.count("\n") == 1
    result = picontext("import", "--from", "claude-code", str(SWE / "pydicom__pydicom-1458.traj"), "-o",
                       str(tmp_path))
    assert result.returncode == 2 and "pydicom__pydicom-1458.traj:1: not a Claude Code transcript" in result.stderr
    assert picontext("import", str(tmp_path / "missing.jsonl")).stderr.endswith("missing.jsonl: no such file\n")
    assert list(tmp_path.iterdir()) == []
    assert os.listdir(tmp_path) == []


# -- streaming ------------------------------------------------------------------------------------------


# The import runs in a fresh interpreter that reports its own high-water mark (VmHWM, reset by
# exec); wait4's ru_maxrss would also count the RSS this test process had when it forked.
_MEASURED = ("import sys\nfrom picontext.cli.main import main\ncode = main(sys.argv[1:])\n"
             "print(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')), file=sys.stderr)\n"
             "sys.exit(code)")


def _peak_rss(*args: str) -> int:
    proc = subprocess.run([sys.executable, "-c", _MEASURED, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stderr.splitlines() if line.startswith("VmHWM"))
    return int(line.split()[1]) * 1024


@pytest.mark.slow
def test_a_large_transcript_is_streamed(tmp_path: Path) -> None:
    """Peak memory does not grow with the transcript: 4 times the input costs (almost) nothing more
    (bench/bench_import.py measures 100 MB; docs/import.md)."""
    from picontext.testing.transcripts import write_claude_code_transcript

    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    write_claude_code_transcript(small, 4_000_000, seed=3, compact_every_bytes=2_000_000)
    write_claude_code_transcript(large, 16_000_000, seed=4, compact_every_bytes=2_000_000)
    peak_small = _peak_rss("import", str(small), "-o", str(tmp_path / "a"))
    peak_large = _peak_rss("import", str(large), "-o", str(tmp_path / "b"))
    grown = large.stat().st_size - small.stat().st_size
    assert peak_large - peak_small < grown / 4, (peak_small, peak_large, grown)
    written = next((tmp_path / "b").iterdir())
    assert sum(1 for e in load_file_entries(str(written)) if e.get("type") == "compaction") >= 5

"""`python -m picontext context|show|tree|stats|sessions` as real subprocesses."""

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

from picontext._clock import FrozenClock
from picontext.session.manager import SessionManager

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "sessions" / "v1" / "real-before-compaction.jsonl"
T0 = 1_772_359_200_000
USAGE = {
    "input": 10,
    "output": 2,
    "cacheRead": 1,
    "cacheWrite": 0,
    "totalTokens": 13,
    "cost": {"input": 0.5, "output": 0.25, "cacheRead": 0, "cacheWrite": 0, "total": 0.75},
}


def run(*args: str, cwd: str | Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_main(*args, cwd=cwd)


def run_process(*args: str) -> subprocess.CompletedProcess[str]:
    """The real entry point, `python -m picontext`, for the test that covers it."""
    env = dict(os.environ)
    env.setdefault("COLUMNS", "200")
    return subprocess.run(
        [sys.executable, "-m", "picontext", *args], capture_output=True, text=True, env=env, timeout=120
    )


def U(text: str, ts: int = 1) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": ts}


def A(text: str, ts: int = 2) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "x",
        "provider": "acme",
        "model": "m1",
        "usage": dict(USAGE),
        "stopReason": "stop",
        "timestamp": ts,
    }


def small_file(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """u1 -> a1 -> {u2 -> a2, b (branch summary) -> u3}, with a label and a thinking change."""
    path = tmp_path / "small.jsonl"
    sm = SessionManager.open(str(path), cwd_override="/proj", clock=FrozenClock(T0, 1000), warn=lambda m: None)
    ids: dict[str, str] = {}
    ids["t"] = sm.append_thinking_level_change("high")
    ids["u1"] = sm.append_message(U("plan it"))
    ids["a1"] = sm.append_message(A("two options"))
    ids["u2"] = sm.append_message(U("try A"))
    ids["a2"] = sm.append_message(A("A failed"))
    ids["b"] = sm.branch_with_summary(ids["a1"], "A was tried and failed")
    ids["u3"] = sm.append_message(U("try B"))
    ids["l"] = sm.append_label_change(ids["u1"], "start")
    sm.append_session_info("Small one")
    assert path.exists()
    return path, ids


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result
    assert result.stdout == ""
    err_lines = result.stderr.splitlines()
    assert len(err_lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert err_lines[0].startswith("picontext: ")
    for needle in needles:
        assert needle in err_lines[0]


# ---------------------------------------------------------------------------- context


def test_context_json_on_legacy_fixture() -> None:
    before = FIXTURE.read_bytes()
    result = run_process("context", "--json", str(FIXTURE))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == {"messages", "thinkingLevel", "model"}
    assert len(data["messages"]) == 446
    assert Counter(m["role"] for m in data["messages"]) == {
        "compactionSummary": 1,
        "user": 31,
        "assistant": 219,
        "toolResult": 192,
        "bashExecution": 3,
    }
    assert data["thinkingLevel"] == "off"
    assert data["model"] == {"provider": "anthropic", "modelId": "claude-opus-4-5"}
    assert FIXTURE.read_bytes() == before
    assert result.stderr == ""


def test_context_json_leaf_selects_branch(tmp_path: Path) -> None:
    path, ids = small_file(tmp_path)
    default = json.loads(run("context", "--json", str(path)).stdout)
    # last line is the session_info, whose path ends u1, a1, b, u3, label
    assert [m["role"] for m in default["messages"]] == ["user", "assistant", "branchSummary", "user"]
    assert default["thinkingLevel"] == "high"
    assert default["model"] == {"provider": "acme", "modelId": "m1"}
    other = run("context", "--json", "--leaf", ids["a2"], str(path))
    assert other.returncode == 0, other.stderr
    msgs = json.loads(other.stdout)["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[-1]["content"] == [{"type": "text", "text": "A failed"}]
    early = json.loads(run("context", "--json", "--leaf", ids["t"], str(path)).stdout)
    assert early == {"messages": [], "thinkingLevel": "high", "model": None}


def test_context_text_output(tmp_path: Path) -> None:
    path, ids = small_file(tmp_path)
    result = run("context", str(path))
    assert result.returncode == 0, result.stderr
    assert "4 messages" in result.stdout
    assert ids["u3"] in result.stdout and "try B" in result.stdout
    assert ids["a2"] not in result.stdout


def test_context_unknown_leaf(tmp_path: Path) -> None:
    path, _ = small_file(tmp_path)
    before = path.read_bytes()
    for cmd in ("context", "show"):
        assert_one_line_error(run(cmd, "--leaf", "nope", str(path)), "nope")
    assert path.read_bytes() == before


# ---------------------------------------------------------------------------- show / tree / stats


def test_show_marks_compacted_entries() -> None:
    result = run("show", str(FIXTURE))
    assert result.returncode == 0, result.stderr
    assert "[compacted]" in result.stdout
    assert "ffae836b-9420-4060-ac13-7745215f90ff" in result.stdout.splitlines()[0]


def test_show_leaf_and_edits(tmp_path: Path) -> None:
    path, ids = small_file(tmp_path)
    sm = SessionManager.open(str(path), warn=lambda m: None)
    sm.branch(ids["a2"])
    edit = sm.append_context_edit(ids["u2"], None)
    result = run("show", "--leaf", edit, str(path))
    assert result.returncode == 0, result.stderr
    assert "Small one" in result.stdout
    assert f"omitted by {edit}" in result.stdout
    assert "A failed" in result.stdout
    assert "try B" not in result.stdout


def test_tree_shows_branches_leaf_and_labels(tmp_path: Path) -> None:
    path, ids = small_file(tmp_path)
    result = run("tree", str(path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for eid in ids.values():
        assert eid in out
    assert "[start]" in out
    leaf_lines = [line for line in out.splitlines() if "<- leaf" in line]
    assert len(leaf_lines) == 1
    assert "├─" in out and "└─" in out  # a1 has two children


def test_tree_on_fixture() -> None:
    result = run("tree", str(FIXTURE))
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 1002
    assert sum("<- leaf" in line for line in result.stdout.splitlines()) == 1


def test_stats_json(tmp_path: Path) -> None:
    path, _ = small_file(tmp_path)
    result = run("stats", "--json", str(path))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["entries"] == 9
    assert data["byType"] == {
        "thinking_level_change": 1,
        "message": 5,
        "branch_summary": 1,
        "label": 1,
        "session_info": 1,
    }
    assert data["messagesByRole"] == {"user": 3, "assistant": 2}
    assert data["usage"]["assistant"]["input"] == 20
    assert data["total"]["cost"] == pytest.approx(1.5)
    fx = json.loads(run("stats", "--json", str(FIXTURE)).stdout)
    assert fx["entries"] == 1002
    assert fx["byType"] == {"message": 990, "thinking_level_change": 5, "compaction": 2, "model_change": 5}
    text = run("stats", str(path))
    assert text.returncode == 0 and "TOTAL" in text.stdout


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize("cmd", ["context", "show", "tree", "stats"])
def test_missing_file_invalid_file_and_directory(tmp_path: Path, cmd: str) -> None:
    assert_one_line_error(run(cmd, str(tmp_path / "missing.jsonl")), "missing.jsonl")
    assert_one_line_error(run(cmd, str(tmp_path)), str(tmp_path))
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("hello\nworld\n")
    assert_one_line_error(run(cmd, str(garbage)), "garbage.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert_one_line_error(run(cmd, str(empty)), "empty.jsonl")
    assert empty.read_bytes() == b""  # inspection never writes, not even a header
    not_first = tmp_path / "late-header.jsonl"
    not_first.write_text('{"type":"message","id":"x"}\n{"type":"session","id":"s","cwd":"/"}\n')
    assert_one_line_error(run(cmd, str(not_first)), "late-header.jsonl")


def test_inspection_warns_but_does_not_write(tmp_path: Path) -> None:
    path, _ = small_file(tmp_path)
    data = path.read_bytes() + b'{"type":"mess'
    path.write_bytes(data)
    result = run("context", "--json", str(path))
    assert result.returncode == 0
    assert len(json.loads(result.stdout)["messages"]) == 4
    warnings = result.stderr.splitlines()
    assert len(warnings) == 1 and f"{path}:11:" in warnings[0]
    assert path.read_bytes() == data


# ---------------------------------------------------------------------------- sessions


def _make_session(cwd: str, first: str, ts: int, session_dir: str | None = None) -> SessionManager:
    sm = SessionManager.create(cwd, session_dir, clock=FrozenClock(ts, 1000))
    sm.append_message(U(first, ts))
    sm.append_message(A("ok", ts + 1))
    return sm


def test_sessions_lists_current_project(tmp_path: Path) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    proj = Path(os.path.realpath(tmp_path / "proj"))
    proj.mkdir()
    other = Path(os.path.realpath(tmp_path / "other"))
    other.mkdir()
    s1 = _make_session(str(proj), "older", T0)
    s2 = _make_session(str(proj), "newer", T0 + 60_000)
    s2.append_session_info("Named")
    s3 = _make_session(str(other), "elsewhere", T0 + 120_000)
    assert str(home) in (s1.get_session_file() or "")
    result = run("sessions", "--json", cwd=proj)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["id"] for r in rows] == [s2.get_session_id(), s1.get_session_id()]
    assert rows[0]["name"] == "Named" and rows[0]["firstMessage"] == "newer"
    assert rows[1]["name"] is None and rows[1]["firstMessage"] == "older"
    assert rows[1]["messages"] == 2 and rows[1]["entries"] == 2
    assert rows[1]["cwd"] == str(proj)
    assert rows[1]["path"] == s1.get_session_file()
    assert set(rows[0]) >= {"path", "id", "cwd", "name", "entries", "messages", "size", "modified", "firstMessage"}
    all_rows = json.loads(run("sessions", "--all", "--json", cwd=proj).stdout)
    assert [r["id"] for r in all_rows] == [s3.get_session_id(), s2.get_session_id(), s1.get_session_id()]
    text = run("sessions", cwd=proj)
    assert text.returncode == 0 and "Named" in text.stdout and "older" in text.stdout
    assert "elsewhere" not in text.stdout


def test_sessions_empty_and_custom_dir(tmp_path: Path) -> None:
    proj = Path(os.path.realpath(tmp_path / "proj"))
    proj.mkdir()
    empty = run("sessions", "--json", cwd=proj)
    assert empty.returncode == 0 and json.loads(empty.stdout) == []
    said = run("sessions", cwd=proj).stdout
    assert f"no sessions for the directory {proj}: only sessions started here are listed" in said
    assert "--all lists every project's" in said  # the filter is named, and the way around it
    flat = tmp_path / "flat"
    mine = _make_session(str(proj), "mine", T0, str(flat))
    theirs = _make_session("/somewhere/else", "theirs", T0 + 1000, str(flat))
    (flat / "junk.jsonl").write_text("not a session\n")
    # --dir lists the directory: every session in it, whatever the directory it was started in
    rows = json.loads(run("sessions", "--json", "--dir", str(flat), cwd=proj).stdout)
    assert [r["id"] for r in rows] == [theirs.get_session_id(), mine.get_session_id()]
    table = run("sessions", "--dir", str(flat), cwd=proj).stdout
    assert "theirs" in table and "mine" in table and "/somewhere/else" in table  # with their cwd
    all_rows = json.loads(run("sessions", "--all", "--json", "--dir", str(flat), cwd=proj).stdout)
    assert all_rows == rows
    (tmp_path / "none").mkdir()
    said = run("sessions", "--dir", str(tmp_path / "none"), cwd=proj)
    assert said.returncode == 0 and f"no sessions in {tmp_path / 'none'}" in said.stdout


def test_sessions_dir_that_does_not_exist_is_one_line_and_exit_2(tmp_path: Path) -> None:
    assert_one_line_error(run("sessions", "--dir", str(tmp_path / "missing")), f"no such directory: {tmp_path}")
    (tmp_path / "file").write_text("")
    assert_one_line_error(run("sessions", "--dir", str(tmp_path / "file"), "--json"), "not a directory")


# ---------------------------------------------------------------------------- sessions by id, options


def test_inspection_takes_an_id_prefix_or_the_latest_session_of_the_directory(tmp_path: Path) -> None:
    proj = Path(os.path.realpath(tmp_path / "proj"))
    proj.mkdir()
    s1 = _make_session(str(proj), "older question", T0)
    s2 = _make_session(str(proj), "newer question", T0 + 60_000)
    latest = run("show", cwd=proj)
    assert latest.returncode == 0, latest.stderr
    assert "newer question" in latest.stdout and "older question" not in latest.stdout
    by_id = run("show", s1.get_session_id()[:13], cwd=proj)
    assert by_id.returncode == 0 and "older question" in by_id.stdout
    for cmd in ("context", "tree", "stats", "tokens", "dropped"):
        result = run(cmd, s1.get_session_id()[:13], cwd=proj)
        assert result.returncode == 0, (cmd, result.stderr)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert "older question" in run("show", s1.get_session_id(), cwd=elsewhere).stdout  # any project's session
    a, b = s1.get_session_id(), s2.get_session_id()
    common = a[: next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)]
    assert_one_line_error(run("show", common, cwd=proj), "ambiguous")
    assert_one_line_error(run("show", "01a22be0-643d", cwd=proj), "no session with id '01a22be0-643d'")
    assert_one_line_error(run("show", cwd=elsewhere), "no sessions for")


def test_show_tail_and_full(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sm = SessionManager.open(str(path), cwd_override="/proj", clock=FrozenClock(T0, 1000), warn=lambda m: None)
    for n in range(5):
        sm.append_message(U(f"question {n}"))
        sm.append_message(A(f"line one of answer {n}\nline two of answer {n}"))
    tail = run("show", str(path), "--tail", "2")
    assert tail.returncode == 0
    assert "… 8 earlier entries" in tail.stdout
    assert "question 4" in tail.stdout and "question 3" not in tail.stdout
    assert "line one of answer 4 line two of answer 4" in tail.stdout  # one line per entry
    full = run("show", str(path), "--tail", "1", "--full")
    assert "line one of answer 4\nline two of answer 4" in full.stdout  # whole message, breaks kept
    context = run("context", str(path), "--tail", "3")
    assert "… 7 earlier messages" in context.stdout and context.stdout.count("\n") == 5
    tree = run("tree", str(path), "--tail", "4")
    assert tree.stdout.count("\n") == 5 and "… 6 earlier lines" in tree.stdout


def test_in_a_pipe_lines_are_up_to_200_columns_whatever_the_terminal_says(tmp_path: Path) -> None:
    """docs/cli.md: "in a pipe, lines are up to 200 columns" (COLUMNS of the terminal does not count)."""
    path = tmp_path / "s.jsonl"
    sm = SessionManager.open(str(path), cwd_override="/proj", clock=FrozenClock(T0, 1000), warn=lambda m: None)
    sm.append_message(U("word " * 200))
    sm.append_message(A("answer"))
    env = {**os.environ, "COLUMNS": "80"}
    for command in ("show", "context"):
        out = subprocess.run([sys.executable, "-m", "picontext", command, str(path)], capture_output=True,
                             text=True, env=env, timeout=120)
        assert out.returncode == 0, out.stderr
        widths = [len(line) for line in out.stdout.splitlines()]
        assert 195 <= max(widths) <= 200, (command, widths)  # the long message is shortened near 200, not at 80


def test_tree_json(tmp_path: Path) -> None:
    path, ids = small_file(tmp_path)
    result = run("tree", str(path), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    [root] = data["tree"]
    assert root["id"] == ids["t"] and root["type"] == "thinking_level_change"
    u1 = root["children"][0]
    assert u1["id"] == ids["u1"] and u1["label"] == "start" and u1["summary"] == "user: plan it"
    a1 = u1["children"][0]
    assert [c["id"] for c in a1["children"]] == [ids["u2"], ids["b"]]
    assert data["leafId"] == sm_leaf(path)


def sm_leaf(path: Path) -> str:
    return json.loads(path.read_text().splitlines()[-1])["id"]


def test_every_subcommand_help_has_a_description_argument_help_and_an_example() -> None:
    import argparse

    from picontext.cli.main import build_parser

    def subparsers(parser: argparse.ArgumentParser, name: str) -> list[tuple[str, argparse.ArgumentParser]]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    found.append((f"{name} {sub_name}", sub))
                    found.extend(subparsers(sub, f"{name} {sub_name}"))
        return found

    found = subparsers(build_parser(), "picontext")
    assert len(found) >= 15
    for name, parser in found:
        assert parser.description, name
        assert "examples:\n  picontext" in (parser.epilog or "") or "| picontext" in (parser.epilog or ""), name
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                assert action.help, (name, action.dest)
    result = run("show", "--help")
    assert "examples:" in result.stdout and "--tail N" in result.stdout and "--full" in result.stdout

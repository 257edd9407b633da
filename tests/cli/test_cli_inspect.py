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
    assert "no sessions" in run("sessions", cwd=proj).stdout
    flat = tmp_path / "flat"
    mine = _make_session(str(proj), "mine", T0, str(flat))
    _make_session("/somewhere/else", "theirs", T0 + 1000, str(flat))
    (flat / "junk.jsonl").write_text("not a session\n")
    rows = json.loads(run("sessions", "--json", "--dir", str(flat), cwd=proj).stdout)
    assert [r["id"] for r in rows] == [mine.get_session_id()]
    all_rows = json.loads(run("sessions", "--all", "--json", "--dir", str(flat), cwd=proj).stdout)
    assert len(all_rows) == 2

"""`picontext dropped FILE [--entry ID] [--json]` as a subprocess on a real session file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from inprocess import run_main

from picontext.session.manager import SessionManager


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_main("dropped", *args)


def make_session(tmp_path: Path) -> tuple[str, dict[str, str]]:
    manager = SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    ids: dict[str, str] = {}

    def user(text: str) -> str:
        return manager.append_message({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1})

    def assistant(text: str, **extra: object) -> str:
        return manager.append_message({
            "role": "assistant", "content": [{"type": "text", "text": text}], "api": "x", "provider": "p",
            "model": "m", "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
            "stopReason": "stop", "timestamp": 2, **extra,
        })

    ids["old_user"] = user("the original long question about FOO")
    ids["old_reply"] = assistant("an answer that mentions BAR")
    ids["kept"] = user("newer question")
    ids["failed"] = assistant("", stopReason="error", errorMessage="prompt is too long")
    manager.append_context_edit(ids["failed"], None)
    manager.append_compaction("summary text", ids["kept"], 1000)
    ids["live"] = assistant("live answer")
    path = manager.get_session_file()
    assert path is not None
    return path, ids


def test_lists_compacted_and_omitted_entries(tmp_path: Path) -> None:
    path, ids = make_session(tmp_path)
    result = run(path, "--json")
    assert result.returncode == 0, result.stderr
    items = json.loads(result.stdout)
    assert [(i["id"], i["why"]) for i in items] == [
        (ids["old_user"], "compacted"), (ids["old_reply"], "compacted"), (ids["failed"], "omitted"),
    ]
    text = run(path)
    assert text.returncode == 0 and ids["old_user"] in text.stdout and "compacted" in text.stdout


def test_entry_prints_the_original_text(tmp_path: Path) -> None:
    path, ids = make_session(tmp_path)
    result = run(path, "--entry", ids["old_user"])
    assert result.returncode == 0 and result.stdout == "the original long question about FOO\n"
    failed = json.loads(run(path, "--entry", ids["failed"], "--json").stdout)
    assert failed["dropped"]["why"] == "omitted" and "[error] prompt is too long" in failed["text"]
    live = run(path, "--entry", ids["live"])
    assert live.stdout == "live answer\n" and "still in the context" in live.stderr


def test_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    path, _ = make_session(tmp_path)
    missing = run(path, "--entry", "nope")
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    nofile = run(str(tmp_path / "none.jsonl"))
    assert nofile.returncode == 2 and "no such file" in nofile.stderr

"""Print mode (`-p`) against a real scripted server: two runs creating the same new session file
at once both keep their prompt and reply; a reply with a lone surrogate is printed and saved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hostile_files import run_cli

from picontext.scripted import ScriptedModelServer, text


@pytest.fixture
def home() -> Path:
    return Path(os.environ["PICONTEXT_DIR"])


def configure(home: Path, base_url: str) -> None:
    provider = {"baseUrl": base_url, "api": "openai-completions", "apiKey": "k", "models": [{"id": "m1"}]}
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))


def _popen(home: Path, cwd: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PICONTEXT_DIR"] = str(home)
    return subprocess.Popen([sys.executable, "-m", "picontext", *args], cwd=cwd, env=env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_two_runs_creating_the_same_new_session_keep_both(server: ScriptedModelServer, home: Path,
                                                           tmp_path: Path) -> None:
    configure(home, server.url + "/v1")
    release = threading.Event()
    server.expect(text("reply one").hold_after(1, release), text("reply two").hold_after(1, release))
    session = tmp_path / "new.jsonl"
    procs = [_popen(home, tmp_path, "-p", prompt, "--model", "scripted/m1", "--session", str(session))
             for prompt in ("prompt one", "prompt two")]
    try:
        server.wait_for_requests(2, timeout=60)  # both opened the session while it did not exist yet
    finally:
        release.set()
    results = [p.communicate(timeout=60) for p in procs]
    for proc, (_out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    entries = [json.loads(line) for line in session.read_text().splitlines()]
    assert [e["type"] for e in entries].count("session") == 1
    texts = {block["text"] for e in entries if e["type"] == "message" and e["message"]["role"] in ("user", "assistant")
             for block in e["message"]["content"] if block.get("type") == "text"}
    assert {"prompt one", "prompt two", "reply one", "reply two"} <= texts
    ids = [e["id"] for e in entries if e["type"] != "session"]
    assert len(ids) == len(set(ids))
    shown = run_cli("context", "--json", str(session))
    assert shown.code == 0, shown.err


def test_a_reply_with_a_lone_surrogate_is_printed_and_saved(server: ScriptedModelServer, home: Path,
                                                             tmp_path: Path) -> None:
    configure(home, server.url + "/v1")
    server.expect(text("half \ud83d an emoji"))
    session = tmp_path / "s.jsonl"
    proc = _popen(home, tmp_path, "-p", "hi", "--model", "scripted/m1", "--session", str(session))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == "half \ufffd an emoji\n"
    lines = session.read_text(encoding="utf-8").splitlines()
    assert any('"hi"' in line for line in lines)
    assert any("half \\ud83d an emoji" in line for line in lines)  # escaped, as JSON.stringify writes it
    for argv in (["show"], ["tree"], ["context"], ["context", "--json"]):
        result = run_cli(*argv, str(session))
        assert result.code == 0, (argv, result.err)
    # and the session goes on: a second prompt in the same file
    server.expect(text("still fine"))
    proc = _popen(home, tmp_path, "-p", "again", "--model", "scripted/m1", "--session", str(session))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == "still fine\n"

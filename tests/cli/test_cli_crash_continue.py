"""kill -9 in the middle of `picontext run`, then `picontext run -c`: the file is valid, nothing is lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from picontext.scripted import ScriptedModelServer, text, tool_call
from picontext.session.manager import SessionManager


def configure(home: Path, base_url: str) -> None:
    provider = {"baseUrl": base_url, "api": "openai-completions", "apiKey": "k", "models": [{"id": "m1"}]}
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))


def test_kill_9_mid_run_then_continue(tmp_path: Path) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    release = threading.Event()
    streaming = threading.Event()
    with ScriptedModelServer() as server:
        configure(home, server.url + "/v1")
        server.expect(
            tool_call("write", {"path": "done.txt", "content": "step one"}),
            text("this reply never finishes because the process dies").hold_after(2, release, streaming),
            text("continued fine"),
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "picontext", "run", "-p", "do the task", "--model", "scripted/m1"],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        try:
            server.wait_for_requests(2, timeout=60)
            assert streaming.wait(30)  # the second reply is streaming
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
        assert (tmp_path / "done.txt").read_text() == "step one"
        [path] = sorted((home / "sessions").rglob("*.jsonl"))
        lines = path.read_text().splitlines()
        assert all(json.loads(line) for line in lines)  # every line is complete JSON
        roles = [json.loads(x)["message"]["role"] for x in lines if json.loads(x)["type"] == "message"]
        assert roles == ["system", "user", "assistant", "toolResult"]  # all finished messages survived
        result = subprocess.run(
            [sys.executable, "-m", "picontext", "run", "-c", "-p", "go on"], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout == "continued fine\n"
        sent = [m["role"] for m in server.requests[2].body["messages"]]
        assert sent == ["system", "user", "assistant", "tool", "user"]
        server.assert_complete()
    reopened = SessionManager.open(str(path))
    assert [e["type"] for e in reopened.get_entries()][-2:] == ["message", "message"]
    assert reopened.build_session_projection().messages[-1]["content"][0]["text"] == "continued fine"

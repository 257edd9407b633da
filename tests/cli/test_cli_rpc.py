"""`picontext rpc` as a real subprocess: JSON-lines commands on stdin against ScriptedModelServer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from picontext.scripted import ScriptedModelServer, reply, text, tokens, tool_call


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server
        server.assert_complete()


@pytest.fixture
def home() -> Path:
    return Path(os.environ["PICONTEXT_DIR"])


def configure(home: Path, base_url: str, *, window: int = 100_000) -> None:
    provider = {"baseUrl": base_url, "api": "openai-completions", "apiKey": "test-key",
                "models": [{"id": "m1", "contextWindow": window}, {"id": "m2", "contextWindow": 50_000}]}
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))
    (home / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 10}}))


class Rpc:
    """One `picontext rpc` process; `send` writes a command, `until` reads lines until one matches."""

    def __init__(self, home: Path, cwd: Path, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env["PICONTEXT_DIR"] = str(home)
        self.proc = subprocess.Popen([sys.executable, "-m", "picontext", "rpc", *args], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: list[dict[str, Any]] = []

    def send(self, **command: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command).encode() + b"\n")
        self.proc.stdin.flush()

    def until(self, predicate: Any, timeout: float = 30) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            raw = self.proc.stdout.readline()
            if not raw:
                break
            line = json.loads(raw)
            self.lines.append(line)
            if predicate(line):
                return line
        stderr = self.proc.stderr.read().decode() if self.proc.poll() is not None and self.proc.stderr else ""
        raise AssertionError(f"no matching line; got {[x.get('type') for x in self.lines]} {stderr}")

    def response(self, command_id: Any) -> dict[str, Any]:
        return self.until(lambda x: x.get("type") == "response" and x.get("id") == command_id)

    def close(self) -> int:
        rest, err = self.proc.communicate(timeout=30)
        self.lines += [json.loads(x) for x in rest.splitlines() if x.strip()]
        self.stderr = err.decode()
        return self.proc.returncode


def test_prompt_streams_events_and_get_state_messages(server: ScriptedModelServer, home: Path,
                                                      tmp_path: Path) -> None:
    configure(home, server.url + "/v1")
    server.expect(reply(tool_call("write", {"path": "a.txt", "content": "hi"}), usage=tokens(500, 20)),
                  reply(text("Done, wrote a.txt"), usage=tokens(40_000, 10)))
    rpc = Rpc(home, tmp_path, "--model", "scripted/m1")
    rpc.send(id=1, type="prompt", message="write a.txt")
    accepted = rpc.response(1)
    assert accepted == {"id": 1, "type": "response", "command": "prompt", "success": True}
    rpc.until(lambda x: x["type"] == "agent_settled")
    types = [x["type"] for x in rpc.lines]
    assert types.index("response") < types.index("agent_start")
    assert "tool_execution_start" in types and "message_update" in types
    update = next(x for x in rpc.lines if x["type"] == "message_update")
    assert set(update) == {"type", "usage", "assistantMessageEvent"}
    assert (tmp_path / "a.txt").read_text() == "hi"

    rpc.send(id=2, type="get_state")
    state = rpc.response(2)["data"]
    assert state["isStreaming"] is False and state["isCompacting"] is False
    assert state["model"] == {"provider": "scripted", "id": "m1", "contextWindow": 100_000}
    assert state["contextUsage"]["percent"] == pytest.approx(40.01)
    assert state["sessionFile"] and Path(state["sessionFile"]).exists()
    rpc.send(id=3, type="get_messages")
    roles = [m["role"] for m in rpc.response(3)["data"]["messages"]]
    assert roles == ["system", "user", "assistant", "toolResult", "assistant"]
    assert rpc.close() == 0


def test_compact_set_model_navigate_and_errors(server: ScriptedModelServer, home: Path, tmp_path: Path) -> None:
    configure(home, server.url + "/v1")
    server.expect(reply(tool_call("read", {"path": "notes.txt"}), usage=tokens(1_000, 20)),
                  reply(text("first answer " * 50), usage=tokens(30_000, 100)),
                  text("## Goal\nThe user asked twice."),
                  reply(text("after compaction"), usage=tokens(2_000, 10)))
    (tmp_path / "notes.txt").write_text("remember the milk\n")
    rpc = Rpc(home, tmp_path, "--model", "scripted/m1")
    rpc.send(id="p1", type="prompt", message="first question")
    rpc.response("p1")
    rpc.until(lambda x: x["type"] == "agent_settled")

    rpc.send(id="c", type="compact", customInstructions="keep it short")
    result = rpc.response("c")
    assert result["success"] is True, result["error"]
    assert "The user asked twice." in result["data"]["summary"]
    start = next(x for x in rpc.lines if x["type"] == "compaction_start")
    end = next(x for x in rpc.lines if x["type"] == "compaction_end")
    assert start["reason"] == "manual" and end["willRetry"] is False and end["result"]["summary"]

    rpc.send(id="s", type="get_state")
    assert rpc.response("s")["data"]["contextUsage"]["percent"] is None  # unknown right after a compaction

    rpc.send(id="p2", type="prompt", message="second")
    rpc.response("p2")
    rpc.until(lambda x: x["type"] == "agent_settled")

    rpc.send(id="e", type="get_entries")
    entries = rpc.response("e")["data"]["entries"]
    assert [e["type"] for e in entries].count("compaction") == 1
    first_user = next(e for e in entries if e["type"] == "message" and e["message"]["role"] == "user")

    rpc.send(id="n", type="navigate_tree", targetId=first_user["id"])
    nav = rpc.response("n")
    assert nav["success"] is True and nav["data"]["editorText"] == "first question"
    rpc.send(id="m", type="set_model", provider="scripted", modelId="m2")
    assert rpc.response("m")["data"]["contextWindow"] == 50_000
    rpc.send(id="bad", type="set_model", model="scripted/nope")
    bad = rpc.response("bad")
    assert bad["success"] is False and "Unknown model 'scripted/nope'" in bad["error"]
    rpc.send(id="u", type="no_such_command")
    assert rpc.response("u")["error"] == "Unknown command: no_such_command"
    rpc.send(id="t", type="get_tree")
    tree = rpc.response("t")["data"]
    assert tree["tree"][0]["entry"]["type"] == "model_change" and tree["leafId"]
    assert rpc.close() == 0
    path = Path(next(x for x in rpc.lines if x.get("id") == "s")["data"]["sessionFile"])
    kinds = [json.loads(line)["type"] for line in path.read_text().splitlines()]
    assert "compaction" in kinds and kinds[-1] == "model_change"


def test_prompt_while_streaming_is_refused_and_abort_stops(server: ScriptedModelServer, home: Path,
                                                           tmp_path: Path) -> None:
    import threading

    configure(home, server.url + "/v1")
    hold = threading.Event()
    server.expect(text("a long reply that will be aborted").hold_after(3, hold))
    rpc = Rpc(home, tmp_path, "--model", "scripted/m1", "--no-session")
    rpc.send(id=1, type="prompt", message="go")
    rpc.until(lambda x: x["type"] == "message_update")
    rpc.send(id=2, type="prompt", message="again")
    busy = rpc.response(2)
    assert busy["success"] is False and "streamingBehavior" in busy["error"]
    rpc.send(id=3, type="abort")
    assert rpc.response(3)["success"] is True
    hold.set()
    end = next(x for x in rpc.lines if x["type"] == "message_end" and x["message"]["role"] == "assistant")
    assert end["message"]["stopReason"] == "aborted"
    assert rpc.close() == 0


def test_invalid_line_and_startup_errors(home: Path, tmp_path: Path) -> None:
    configure(home, "http://127.0.0.1:9/v1")
    rpc = Rpc(home, tmp_path, "--model", "scripted/m1", "--no-session")
    rpc.proc.stdin.write(b"not json\n")  # type: ignore[union-attr]
    rpc.proc.stdin.flush()  # type: ignore[union-attr]
    line = rpc.until(lambda x: x["type"] == "response")
    assert line["success"] is False and line["error"].startswith("Invalid command")
    assert line["command"] == "parse"  # docs/cli.md: a line that is not a command answers as `parse`
    assert rpc.close() == 0

    bad = Rpc(home, tmp_path, "--model", "scripted/nope", "--no-session")
    assert bad.close() == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Unknown model" in bad.stderr
    nokey = Rpc(home, tmp_path, "--model", "openai/gpt-4o", "--no-session")
    assert nokey.close() == 2 and "No API key for provider 'openai'" in nokey.stderr


def test_set_auto_compaction_is_for_this_session_only(home: Path, tmp_path: Path) -> None:
    """docs/cli.md: `set_auto_compaction` changes this session only; settings files are not changed."""
    configure(home, "http://127.0.0.1:9/v1")
    project = tmp_path / "project"
    (project / ".picontext").mkdir(parents=True)
    (project / ".picontext" / "settings.json").write_text('{"compaction": {"reserveTokens": 1000}}')
    before = {p: p.read_bytes() for p in (home / "settings.json", project / ".picontext" / "settings.json")}
    rpc = Rpc(home, project, "--model", "scripted/m1", "--no-session")
    rpc.send(id=1, type="set_auto_compaction", enabled=False)
    assert rpc.response(1)["success"] is True
    rpc.send(id=2, type="get_state")
    assert rpc.response(2)["data"]["autoCompactionEnabled"] is False
    assert rpc.close() == 0
    assert {p: p.read_bytes() for p in before} == before
    again = Rpc(home, project, "--model", "scripted/m1", "--no-session")
    again.send(id=1, type="get_state")
    assert again.response(1)["data"]["autoCompactionEnabled"] is True  # the next session: the settings' value
    assert again.close() == 0

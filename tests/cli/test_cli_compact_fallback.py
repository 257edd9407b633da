"""`picontext compact FILE` when the model's summary fails: every failure kind over real HTTP.

The command still compacts (with the mechanical summary) and says so in one line; the file holds
one record per failed attempt, `stats` lists them, and Pi would read the compaction like any other
(tests/differential/test_fallback_vs_pi.py). `--no-fallback` refuses instead (exit 2).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inprocess import run_main

from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, http_error, overflow, reply, text, tool_call
from picontext.testing.model_server import Step

KINDS = ("length", "empty", "toolCall", "error", "garbage", "refusal", "oversize", "timeout", "overflow")


def failing(kind: str, never: threading.Event) -> Step:
    return {
        "length": text("## Goal\nhalf a summ").with_stop("length"),
        "empty": text(""),
        "toolCall": reply(tool_call("read", {"path": "a.py"})),
        "error": http_error(400, {"error": {"message": "malformed summary request"}}),
        "garbage": text("?!?! ... --- !!! ***"),
        "refusal": text("I'm sorry, but I can't help with that request."),
        "oversize": text("## Goal\n" + "words and more words " * 4000),
        "timeout": text("## Goal\nNever finished").hold_after(1, never),
        "overflow": overflow(),
    }[kind]


@pytest.fixture
def never() -> Iterator[threading.Event]:
    """Holds the `timeout` kind's replies until the test is over (the server's thread then ends). A
    minute later the reply is let through anyway: without the summary timeout the test then fails
    on its assertions instead of hanging."""
    event = threading.Event()
    watchdog = threading.Timer(60, event.set)
    watchdog.start()
    yield event
    event.set()
    watchdog.cancel()


def session_file(tmp_path: Path) -> Path:
    manager = SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    manager.append_message({"role": "user", "content": "Rename load_cfg to load_config.", "timestamp": 1})
    for i in range(8):
        manager.append_message({"role": "user", "content": f"Step {i}: " + "go on with the work. " * 40,
                                "timestamp": 2 + i})
        manager.append_message({"role": "assistant", "content": [{"type": "text", "text": f"Did step {i}. " * 60}],
                                "api": "openai-completions", "provider": "scripted", "model": "m1", "usage": {},
                                "stopReason": "stop", "timestamp": 2 + i})
    path = manager.get_session_file()
    assert path is not None
    return Path(path)


def configure(server: ScriptedModelServer, kind: str) -> dict[str, str]:
    home = Path(os.environ["PICONTEXT_DIR"])
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": {
        "baseUrl": server.url + "/v1", "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "m1", "contextWindow": 200000, "maxTokens": 4096}]}}}))
    compaction: dict[str, Any] = {"reserveTokens": 2000}
    if kind == "timeout":
        compaction["summaryTimeoutMs"] = 200
    (home / "settings.json").write_text(json.dumps({"compaction": compaction}))
    return {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("kind", KINDS)
def test_compact_falls_back_for_every_failure_kind(tmp_path: Path, kind: str, never: threading.Event) -> None:
    path = session_file(tmp_path)
    before = len(lines(path))
    with ScriptedModelServer() as server:
        # Enough failing replies for every request of both attempts (an overflow is split and re-sent).
        server.expect(*[failing(kind, never) for _ in range(40)])
        env = configure(server, kind)
        out = run_main("compact", str(path), "--model", "scripted/m1", "--keep-recent-tokens", "300", env=env)
        assert not server.unexpected
    assert out.returncode == 0, out.stderr
    assert "compacted with a mechanical summary up to" in out.stdout
    [notice] = out.stderr.splitlines()
    assert notice.startswith("picontext: the model's summary failed twice")
    added = lines(path)[before:]
    assert [e["type"] for e in added] == ["custom", "custom", "compaction"]
    assert [(e["data"]["kind"], e["data"]["next"]) for e in added[:2]] == [(kind, "retry"), (kind, "fallback")]
    assert added[2]["details"]["fallback"]["reason"] == kind
    stats = run_main("stats", str(path), "--json", env=env)
    assert [f["kind"] for f in json.loads(stats.stdout)["compactionFailures"]] == [kind, kind]
    text_stats = run_main("stats", str(path), env=env).stdout
    assert "failed summary attempts: 2" in text_stats and f"manual attempt 2: {kind} -> fallback" in text_stats


def test_compact_json_reports_the_fallback(tmp_path: Path, never: threading.Event) -> None:
    path = session_file(tmp_path)
    with ScriptedModelServer() as server:
        server.expect(failing("length", never), failing("length", never))
        env = configure(server, "length")
        out = run_main("compact", str(path), "--model", "scripted/m1", "--keep-recent-tokens", "300", "--json",
                       env=env)
        server.assert_complete()
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["summarized"] is True and report["fallback"]["reason"] == "length"
    assert report["tokensAfter"] < report["tokensBefore"]

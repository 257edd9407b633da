"""A continuation of a session far over the summarizer's window: print mode says how far the
summary is (chunk k of n, elapsed time) on stderr; JSON and RPC modes carry `compaction_progress`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, text
from picontext.testing.model_server import RecordedRequest

SUMMARY_MARK = "hand-off notes"  # in the summarizer's system prompt only


def is_summary(req: RecordedRequest) -> bool:
    return SUMMARY_MARK in json.dumps(req.body)


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def home() -> Path:
    return Path(os.environ["PICONTEXT_DIR"])


def over_window_session(home: Path, cwd: Path, base_url: str) -> Path:
    """~15,000 tokens of history for a model with an 8,000-token window (threshold 6,000)."""
    provider = {"baseUrl": base_url, "api": "openai-completions", "apiKey": "test-key",
                "models": [{"id": "m1", "contextWindow": 8000, "maxTokens": 1000}]}
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))
    (home / "settings.json").write_text(json.dumps({"compaction": {"reserveTokens": 2000, "keepRecentTokens": 1000}}))
    manager = SessionManager.create(str(cwd), str(home / "sessions"))
    for i in range(40):
        manager.append_message({"role": "user", "content": f"step {i} " + "word " * 300, "timestamp": 1})
        manager.append_message({"role": "assistant", "content": [{"type": "text", "text": f"done {i}"}],
                                "api": "openai-completions", "provider": "scripted", "model": "m1",
                                "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                                          "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                                                   "total": 0}},
                                "stopReason": "stop", "timestamp": 1})
    path = manager.get_session_file()
    assert path is not None
    return Path(path)


def script(server: ScriptedModelServer) -> None:
    server.expect(*[text(f"## Goal\nnote {k}").when(is_summary) for k in range(12)],
                  text("next answer").when(lambda r: not is_summary(r)))


def picontext(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PICONTEXT_DIR"] = str(home)
    return subprocess.run([sys.executable, "-m", "picontext", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120, stdin=subprocess.DEVNULL)


def test_print_mode_shows_chunk_k_of_n_and_the_elapsed_time(server: ScriptedModelServer, home: Path,
                                                            tmp_path: Path) -> None:
    path = over_window_session(home, tmp_path, server.url + "/v1")
    script(server)
    result = picontext(home, tmp_path, "--session", str(path), "--model", "scripted/m1", "-p", "go on")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "next answer\n"
    lines = result.stderr.splitlines()
    announced = [line for line in lines if "larger than the summarizer's window" in line]
    assert len(announced) == 1, lines
    count = int(announced[0].split("summarizing it in ")[1].split(" chunks")[0])
    assert count >= 3
    assert f"picontext: summarized chunk {count} of {count} (" in result.stderr
    assert any(line.startswith("picontext: merged the notes (") and line.endswith("s)") for line in lines)
    assert any(line.startswith("picontext: compacted") for line in lines)
    summaries = sum(is_summary(r) for r in server.requests)
    assert summaries == count + 1  # one note per chunk, one merge


@pytest.mark.parametrize("mode", ["json", "rpc"])
def test_json_and_rpc_modes_carry_the_progress_events(server: ScriptedModelServer, home: Path, tmp_path: Path,
                                                      mode: str) -> None:
    path = over_window_session(home, tmp_path, server.url + "/v1")
    script(server)
    if mode == "json":
        result = picontext(home, tmp_path, "--session", str(path), "--model", "scripted/m1", "--mode", "json",
                           "-p", "go on")
        stdout = result.stdout
    else:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env["PICONTEXT_DIR"] = str(home)
        command = json.dumps({"id": 1, "type": "prompt", "message": "go on"})
        # stdin closes after the command: the server finishes the prompt, then exits
        result = subprocess.run([sys.executable, "-m", "picontext", "rpc", "--session", str(path), "--model",
                                 "scripted/m1"], input=command + "\n", capture_output=True, text=True, cwd=tmp_path,
                                env=env, timeout=120)
        stdout = result.stdout
    assert result.returncode == 0, result.stderr
    events: list[dict[str, Any]] = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    progress = [e for e in events if e.get("type") == "compaction_progress"]
    chunks = [e for e in progress if e["stage"] == "chunks"]
    assert chunks and [e["done"] for e in chunks] == list(range(chunks[0]["total"] + 1))
    assert all(e["reason"] == "threshold" and e["background"] is False and e["part"] == "history"
               and isinstance(e["elapsedMs"], int) for e in progress)
    assert progress[-1]["stage"] == "merge" and progress[-1]["done"] == progress[-1]["total"] == 1
    kinds = [e["type"] for e in events]
    assert kinds.index("compaction_start") < kinds.index("compaction_progress") < kinds.index("compaction_end")


def _progress(done: int, total: int, *, background: bool = False, stage: str = "chunks") -> dict[str, Any]:
    return {"type": "compaction_progress", "reason": "threshold", "background": background, "part": "history",
            "stage": stage, "done": done, "total": total, "elapsedMs": 12_000}


def test_the_chat_shows_the_progress_in_its_spinner_and_status_line() -> None:
    import io

    from rich.console import Console

    from picontext.cli.modes.reply_view import ReplyView, _Region

    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200, height=20)
    view = ReplyView(console)
    view({"type": "compaction_start", "reason": "threshold"})
    assert view.activity is not None
    began = view.activity[1]
    view(_progress(2, 5))
    assert view.activity == ("Compacting context, history: 2 of 5 chunks summarized", began)  # the clock goes on
    view(_progress(0, 1, stage="merge"))
    assert view.activity[0] == "Compacting context, history: merging the notes (0 of 1)"
    # written in the background: no spinner, a status line under the conversation until it is applied
    view.activity = None
    view(_progress(3, 7, background=True))
    console.print(_Region(view))
    assert "compacting in background, history: 3 of 7 chunks summarized (12s)" in out.getvalue()
    view({"type": "compaction_end", "reason": "threshold", "aborted": False, "willRetry": False, "background": True,
          "waited": False, "tokensBefore": 3000, "tokensAfter": 900, "result": {"summary": "s"}})
    assert view.status is None

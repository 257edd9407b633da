"""`/export` in the interactive chat (a real terminal through tmux) writes the export page."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from picontext.testing import ScriptedModelServer, reply, text, tokens

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"),
                                reason="tmux is not installed (scripts/install/tmux.sh installs it)")


def _screen(name: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-J", "-S", "-200", "-t", name],
                          capture_output=True, text=True, check=True).stdout


def _wait_for(name: str, needle: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = _screen(name)
        if needle in screen:
            return screen
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} not on the screen:\n{_screen(name)}")


def _type(name: str, line: str) -> None:
    subprocess.run(["tmux", "send-keys", "-t", name, "-l", line], check=True)
    subprocess.run(["tmux", "send-keys", "-t", name, "Enter"], check=True)


def test_chat_export_writes_the_page(server: ScriptedModelServer, tmp_path: Path) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    provider = {"baseUrl": server.url + "/v1", "api": "openai-completions", "apiKey": "k",
                "models": [{"id": "m1", "contextWindow": 200_000}]}
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))
    server.expect(reply(text("Hello from the model."), usage=tokens(1_000, 20)))
    env = {"PICONTEXT_DIR": str(home), "TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    name = f"picontext-export-{uuid.uuid4().hex[:8]}"
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    shell = (f"cd {shlex.quote(str(tmp_path))} && env {exports} {shlex.quote(sys.executable)} -m picontext "
             f"--model scripted/m1; echo EXITED-$?; sleep 30")
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "120", "-y", "40", shell], check=True)
    try:
        _wait_for(name, "/help for commands")
        _type(name, "/export")
        _wait_for(name, "Nothing to export yet")
        _type(name, "say hello")
        _wait_for(name, "Hello from the model.")
        _type(name, "/export chat.html")
        _wait_for(name, "Exported to chat.html")
        _type(name, "/quit")
        _wait_for(name, "EXITED-0")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
    page = (tmp_path / "chat.html").read_text(encoding="utf-8")
    meta = json.loads(re.search(r'<script id="pc-meta" type="application/json">(.*?)</script>', page, re.S)
                      .group(1))  # type: ignore[union-attr]
    assert "say hello" in meta["previews"] and "Hello from the model." in meta["previews"]
    assert len(meta["plot"]["requests"]) == 1

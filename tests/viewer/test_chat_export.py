"""`/export` in the interactive chat (a real terminal through tmux) writes the export page."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from picontext.scripted import ScriptedModelServer, reply, text, tokens
from terminal import PICONTEXT, Terminal


@pytest.fixture(autouse=True)
def _tmux_is_required() -> None:
    # Never a skip: a run without tmux would be green without ever testing the export from the chat.
    assert shutil.which("tmux") is not None, "tmux is not installed: run scripts/install/tmux.sh"


def test_chat_export_writes_the_page(server: ScriptedModelServer, tmp_path: Path) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    provider = {"baseUrl": server.url + "/v1", "api": "openai-completions", "apiKey": "k",
                "models": [{"id": "m1", "contextWindow": 200_000}]}
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))
    server.expect(reply(text("Hello from the model."), usage=tokens(1_000, 20)))
    env = {"PICONTEXT_DIR": str(home), "TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    term = Terminal(f"{PICONTEXT} --model scripted/m1", tmp_path, env)
    try:
        term.wait_for("/help for commands")
        term.type("/export")
        term.wait_for("Nothing to export yet")
        term.type("say hello")
        term.wait_for("Hello from the model.")
        term.type("/export chat.html")
        term.wait_for("Exported to chat.html")
        term.type("/quit")
        term.wait_for("EXITED-0")
    finally:
        term.close()
    page = (tmp_path / "chat.html").read_text(encoding="utf-8")
    meta = json.loads(re.search(r'<script id="pc-meta" type="application/json">(.*?)</script>', page, re.S)
                      .group(1))  # type: ignore[union-attr]
    assert "say hello" in meta["previews"] and "Hello from the model." in meta["previews"]
    assert len(meta["plot"]["requests"]) == 1

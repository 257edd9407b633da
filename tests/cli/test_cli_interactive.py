"""The interactive chat driven in a real terminal (tmux): type a prompt, see the streamed reply and
the footer, run /compact and /tree, leave with /quit."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from picontext.testing import ScriptedModelServer, reply, text, tokens, tool_call


@pytest.fixture(autouse=True)
def _tmux_is_required() -> None:
    # Never a skip: a run without tmux would be green without ever testing the real terminal.
    assert shutil.which("tmux") is not None, "tmux is not installed: run scripts/install/tmux.sh"


class Terminal:
    """A tmux session of 120x40 running one command."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str]) -> None:
        self.name = f"picontext-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        shell = f"cd {shlex.quote(str(cwd))} && env {exports} {command}; echo EXITED-$?; sleep 30"
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", "120", "-y", "40", shell], check=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-J", "-S", "-200", "-t", self.name],
                              capture_output=True, text=True, check=True).stdout

    def send(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def type(self, line: str) -> None:
        self.send("-l", line)
        self.send("Enter")

    def wait_for(self, needle: str, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if needle in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{needle!r} not on the screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server
        server.assert_complete()


def test_chat_prompt_footer_compact_tree_quit(server: ScriptedModelServer, tmp_path: Path) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    provider = {"baseUrl": server.url + "/v1", "api": "openai-completions", "apiKey": "k",
                "models": [{"id": "m1", "contextWindow": 200_000}]}
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))
    (home / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 10}}))
    server.expect(
        reply(tool_call("write", {"path": "notes.md", "content": "# Notes\n"}), usage=tokens(1_000, 20)),
        reply(text("I created **notes.md** with a heading.\n\n- first point\n- second point"),
              usage=tokens(74_000, 60)).slow(0.05),
        text("## Goal\nKeep notes in notes.md."),
    )
    env = {"PICONTEXT_DIR": str(home), "TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    term = Terminal(f"{shlex.quote(sys.executable)} -m picontext --model scripted/m1", tmp_path, env)
    try:
        term.wait_for("/help for commands")
        term.type("please write notes.md")
        screen = term.wait_for("── scripted/m1  37.0%/200k (auto)")
        assert "▸ write path=notes.md" in screen
        assert "I created notes.md with a heading." in screen  # Markdown rendered: no ** left
        assert "• first point" in screen
        assert (tmp_path / "notes.md").read_text() == "# Notes\n"

        term.type("/compact")
        screen = term.wait_for("?/200k (auto)")
        assert "Context compacted (manual)" in screen

        term.type("/tree")
        screen = term.wait_for("Go to entry #")
        assert "◀ you are here" in screen and "compaction" in screen
        row = next(line for line in screen.splitlines() if "user: please write notes.md" in line)
        term.type(row.split()[0])
        term.wait_for("Summarize the branch you leave?")
        term.send("Enter")  # the default: no summary
        term.wait_for("Moved to")
        term.wait_for("\n> please write notes.md")  # the user message is back in the editor, to edit and resend

        term.send("C-u")
        term.type("/quit")
        screen = term.wait_for("EXITED-0")
        assert "Session saved:" in screen
    finally:
        term.close()
    [path] = list((home / "sessions").rglob("*.jsonl"))
    kinds = [json.loads(line)["type"] for line in path.read_text().splitlines()]
    assert "compaction" in kinds


def test_chat_needs_a_terminal(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "picontext", "chat", "--no-session"], capture_output=True,
                            text=True, stdin=subprocess.DEVNULL, cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and "needs a terminal" in result.stderr

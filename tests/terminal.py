"""A real terminal for tests: a tmux session driven by keys and read back by screen captures,
and the home directory (models, settings) the chat tests start from."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path


class Terminal:
    """A tmux session of 120x40 running one command, on its own tmux server (socket), so that one
    terminal closing never races another one opening."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str]) -> None:
        self.name = f"picontext-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        shell = f"cd {shlex.quote(str(cwd))} && env {exports} {command}; echo EXITED-$?; sleep 30"
        subprocess.run(["tmux", "-L", self.name, "new-session", "-d", "-s", self.name, "-x", "120", "-y", "40", shell],
                       check=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "-L", self.name, "capture-pane", "-p", "-J", "-S", "-200", "-t", self.name],
                              capture_output=True, text=True, check=True).stdout

    def send(self, *keys: str) -> None:
        subprocess.run(["tmux", "-L", self.name, "send-keys", "-t", self.name, *keys], check=True)

    def type(self, line: str) -> None:
        self.send("-l", line)
        self.send("Enter")

    def wait_for(self, *needles: str, timeout: float = 20) -> str:
        """The screen once every needle is on it and the drawing has settled (see `wait_until`)."""
        try:
            return self.wait_until(lambda screen: all(n in screen for n in needles), timeout)
        except AssertionError:
            raise AssertionError(f"{needles!r} not on the screen:\n{self.screen()}") from None

    def wait_until(self, predicate: Callable[[str], bool], timeout: float = 20) -> str:
        """The first screen meeting `predicate` that two captures 50 ms apart agree on: a screen
        caught halfway through a redraw (a list's header drawn, its rows not yet) would make the
        assertions that follow fail by chance. A spinner may keep it from settling; then the
        latest screen meeting `predicate` is returned after 2 s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if predicate(screen):
                settle_by = time.monotonic() + 2
                while time.monotonic() < settle_by:
                    time.sleep(0.05)
                    again = self.screen()
                    if again == screen:
                        break
                    if not predicate(again):
                        break  # it came and went (a transient line): what was seen still counts
                    screen = again
                return screen
            time.sleep(0.1)
        raise AssertionError(f"condition not met on the screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.name, "kill-server"], capture_output=True)


def chat_home(url: str, settings: dict[str, object] | None = None) -> tuple[Path, dict[str, str]]:
    home = Path(os.environ["PICONTEXT_DIR"])
    provider = {"baseUrl": url + "/v1", "api": "openai-completions", "apiKey": "k",
                "models": [{"id": "m1", "contextWindow": 200_000}, {"id": "m2", "contextWindow": 100_000}]}
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))
    (home / "settings.json").write_text(json.dumps({"defaultProvider": "scripted", "defaultModel": "m1",
                                                    **(settings or {})}))
    env = {"PICONTEXT_DIR": str(home), "TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}
    return home, env


PICONTEXT = f"{shlex.quote(sys.executable)} -m picontext"

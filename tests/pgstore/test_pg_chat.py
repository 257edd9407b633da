"""The chat's session choices with a session database (PICONTEXT_STORE): `-r` lists the
directory's stored sessions in the same arrow-key picker as for files, `-c` continues the most
recent one; in a real terminal (tmux), against ScriptedModelServer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from picontext.scripted import ScriptedModelServer, text
from picontext.session.postgres import PgSessionStore
from picontext.session.postgres.repository import PostgresRepository
from terminal import PICONTEXT, Terminal, chat_home


def _session(url: str, cwd: Path, question: str, answer: str, ts: int) -> str:
    manager = PostgresRepository(url).create(str(cwd))
    manager.append_message({"role": "user", "content": question, "timestamp": ts})
    manager.append_message({"role": "assistant", "content": [{"type": "text", "text": answer}],
                            "api": "openai-completions", "provider": "scripted", "model": "m1", "timestamp": ts + 1})
    return manager.get_session_id()


def _texts(url: str, session_id: str) -> list[str]:
    out = []
    for e in PgSessionStore(url, session_id).load().entries:
        if e.get("type") == "message":
            content = e["message"]["content"]
            out.append(content if isinstance(content, str) else "".join(c.get("text", "") for c in content))
    return out


def test_resume_picker_and_continue_on_the_database(server: ScriptedModelServer, pg_url: str,
                                                    tmp_path: Path) -> None:
    assert shutil.which("tmux") is not None, "tmux is not installed: run scripts/install/tmux.sh"
    home, env = chat_home(server.url)
    env["PICONTEXT_STORE"] = pg_url
    older = _session(pg_url, tmp_path, "rename the module", "Renamed it.", 1_767_225_600_000)
    newer = _session(pg_url, tmp_path, "add a test", "Added test_x.", 1_767_312_000_000)
    server.expect(text("Still renamed."))

    # -r: the picker lists the directory's stored sessions, newest first; the second one is picked
    term = Terminal(f"{PICONTEXT} -r", tmp_path, env)
    try:
        screen = term.wait_for("Resume which session?", f"{newer[:13]}  add a test", f"{older[:13]}  rename the module")
        assert screen.index(f"{newer[:13]}  add a test") < screen.index(f"{older[:13]}  rename the module")
        term.send("Down")
        term.send("Enter")
        screen = term.wait_for("── end of the conversation so far ──")
        assert "Renamed it." in screen and "Added test_x." not in screen
        term.type("is it still renamed?")
        term.wait_for("Still renamed.")
        term.type("/export")  # a database session: the page goes to ID.html in the working directory
        term.wait_for(f"Exported to {older}.html")
        term.type("/new")  # a new session of the database (written with its first reply)
        term.wait_for("New session")
        term.type("/resume")  # the database's sessions of this directory, most recent first
        term.wait_until(lambda screen: screen.count("Resume which session?") == 2)
        picker = term.wait_for("Esc cancel").rsplit("Resume which session?", 1)[1]
        assert picker.index(f"{older[:13]}  rename the module") < picker.index(f"{newer[:13]}  add a test")
        term.send("Down")
        term.send("Enter")
        term.wait_until(lambda screen: "Added test_x." in screen.rsplit("Resume which session?", 1)[1])
        term.type("/exit")
        term.wait_for("EXITED-0")
    finally:
        term.close()
    assert _texts(pg_url, older)[-2:] == ["is it still renamed?", "Still renamed."]
    assert "is it still renamed?" in (tmp_path / f"{older}.html").read_text(encoding="utf-8")
    assert _texts(pg_url, newer) == ["add a test", "Added test_x."]

    # -c: the most recently active stored session of the directory (the one just continued)
    term = Terminal(f"{PICONTEXT} -c", tmp_path, env)
    try:
        screen = term.wait_for("── end of the conversation so far ──")
        assert "Still renamed." in screen
        term.type("/exit")
        term.wait_for("EXITED-0")
    finally:
        term.close()
    assert not (home / "sessions").exists() or not list((home / "sessions").rglob("*.jsonl"))


def test_resume_without_a_terminal_or_without_sessions_is_one_line(pg_url: str, tmp_path: Path) -> None:
    """Print mode takes -r too: the picker's refusals, for the database's sessions."""
    env = {**os.environ, "PICONTEXT_STORE": pg_url}
    empty = subprocess.run([sys.executable, "-m", "picontext", "run", "-r", "-p", "hi"], capture_output=True,
                           text=True, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, timeout=60)
    assert empty.returncode != 0
    assert empty.stderr.strip().splitlines()[-1].endswith(f"No sessions to resume in {tmp_path} "
                                                          "(start one with `picontext`)")
    _session(pg_url, tmp_path, "hello", "hi", 1_767_225_600_000)
    piped = subprocess.run([sys.executable, "-m", "picontext", "run", "-r", "-p", "hi"], capture_output=True,
                           text=True, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, timeout=60)
    assert piped.returncode != 0
    assert "--resume needs a terminal to pick a session" in piped.stderr
    assert json.dumps(piped.stderr).count("\\n") <= 2  # one line (plus perhaps a trailing newline)

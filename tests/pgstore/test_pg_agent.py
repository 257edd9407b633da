"""The agent, compaction, branching and forks on a PostgreSQL session: the same behaviour as on a
file (real processes against ScriptedModelServer; SessionManager with the PostgreSQL store)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pg_corpus import FILES

from picontext.session.manager import SessionManager
from picontext.session.postgres import PgSessionStore, database, store_factory
from picontext.session.postgres.listing import list_sessions
from picontext.session.postgres.transfer import import_file
from picontext.testing import ScriptedModelServer, text, tool_call


def configure(home: Path, base_url: str) -> None:
    provider = {"baseUrl": base_url, "api": "openai-completions", "apiKey": "k", "models": [{"id": "m1"}]}
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))


def picontext(home: Path, cwd: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(PICONTEXT_DIR=str(home), PICONTEXT_STORE=url)
    return subprocess.run([sys.executable, "-m", "picontext", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


@pytest.fixture
def home() -> Path:
    return Path(os.environ["PICONTEXT_DIR"])


def test_print_mode_saves_to_and_continues_from_the_database(
    server: ScriptedModelServer, home: Path, tmp_path: Path, pg_url: str
) -> None:
    configure(home, server.url + "/v1")
    server.expect(tool_call("write", {"path": "hello.txt", "content": "hi there"}), text("Created hello.txt."))
    first = picontext(home, tmp_path, pg_url, "run", "-p", "create hello.txt", "--model", "scripted/m1")
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "hello.txt").read_text() == "hi there"
    assert not (home / "sessions").exists() or not list((home / "sessions").rglob("*.jsonl"))
    [info] = list_sessions(database(pg_url), str(tmp_path))
    roles = [e["message"]["role"] for e in PgSessionStore(pg_url, info.id).load().entries if e["type"] == "message"]
    assert roles == ["system", "user", "assistant", "toolResult", "assistant"]

    server.expect(text("Still here."))
    again = picontext(home, tmp_path, pg_url, "run", "-c", "-p", "and now?", "--model", "scripted/m1")
    assert again.returncode == 0, again.stderr
    sent = [m.get("content") for m in server.requests[-1].json["messages"]]
    assert "create hello.txt" in json.dumps(sent) and "and now?" in json.dumps(sent)
    assert [i.id for i in list_sessions(database(pg_url), str(tmp_path))] == [info.id]  # the same session

    exported = picontext(home, tmp_path, pg_url, "store", "export", info.id[:8])
    path = tmp_path / "exported.jsonl"
    path.write_text(exported.stdout)
    env_free = subprocess.run([sys.executable, "-m", "picontext", "context", "--json", str(path)],
                              capture_output=True, text=True, env={**os.environ, "PICONTEXT_STORE": ""})
    from_db = picontext(home, tmp_path, pg_url, "context", "--json", info.id)
    assert env_free.returncode == 0 and from_db.returncode == 0, from_db.stderr
    assert env_free.stdout == from_db.stdout


def test_session_flag_takes_a_new_id_or_a_prefix(
    server: ScriptedModelServer, home: Path, tmp_path: Path, pg_url: str
) -> None:
    configure(home, server.url + "/v1")
    server.expect(text("First."), text("Second."))
    new = picontext(home, tmp_path, pg_url, "run", "--session", "team-run-42", "-p", "hi", "--model", "scripted/m1")
    assert new.returncode == 0, new.stderr
    assert PgSessionStore(pg_url, "team-run-42").exists()
    again = picontext(home, tmp_path, pg_url, "run", "--session", "team-run", "-p", "more", "--model", "scripted/m1")
    assert again.returncode == 0, again.stderr
    roles = [e["message"]["role"] for e in PgSessionStore(pg_url, "team-run-42").load().entries
             if e["type"] == "message"]
    assert roles.count("user") == 2 and roles.count("assistant") == 2
    assert not (home / "sessions").exists() or not list((home / "sessions").rglob("*.jsonl"))


def test_mask_compaction_on_the_database_matches_the_file(home: Path, tmp_path: Path, pg_url: str) -> None:
    source = next(f for f in FILES if f.name == "real-large-session.jsonl")
    copy = tmp_path / source.name
    copy.write_bytes(source.read_bytes())
    session_id, _ = import_file(database(pg_url), str(source))
    args = ["compact", "--strategy", "mask", "--keep-recent-tokens", "2000"]
    on_file = subprocess.run([sys.executable, "-m", "picontext", *args, str(copy)], capture_output=True, text=True,
                             env={**os.environ, "PICONTEXT_STORE": ""}, timeout=120)
    on_db = picontext(home, tmp_path, pg_url, *args, session_id[:10])
    assert on_file.returncode == 0 and on_db.returncode == 0, on_db.stderr
    assert on_db.stdout.split(":", 1)[1] == on_file.stdout.split(":", 1)[1]  # the same masks and token counts
    tokens_file = subprocess.run([sys.executable, "-m", "picontext", "tokens", "--json", str(copy)],
                                 capture_output=True, text=True, env={**os.environ, "PICONTEXT_STORE": ""})
    tokens_db = picontext(home, tmp_path, pg_url, "tokens", "--json", session_id)
    assert tokens_db.stdout == tokens_file.stdout


def _manager(url: str, ref: str, warnings: list[str]) -> SessionManager:
    return SessionManager.open(ref, store_factory=store_factory(url), warn=warnings.append)


def test_two_managers_on_one_session_never_fork_it_silently(pg_url: str, tmp_path: Path) -> None:
    warnings: list[str] = []
    first = SessionManager.create(str(tmp_path), str(tmp_path), store_factory=store_factory(pg_url),
                                  warn=warnings.append)
    first.append_message({"role": "user", "content": "hi", "timestamp": 1})
    first.append_message({"role": "assistant", "content": [{"type": "text", "text": "hello"}], "timestamp": 2})
    sid = first.get_session_id()
    second = _manager(pg_url, sid, warnings)
    second.append_message({"role": "user", "content": "from the second", "timestamp": 3})
    assert warnings == []
    first.append_message({"role": "user", "content": "from the first", "timestamp": 4})
    # The first manager was stale: it took the other entry in and said so; its own entry stays on its
    # own branch instead of silently continuing from an entry it never saw.
    assert len(warnings) == 1 and "appended to" in warnings[0] and "by another writer" in warnings[0]
    reopened = _manager(pg_url, sid, [])
    assert reopened.entry_count() == 4
    leaf = reopened.get_leaf_entry()
    assert leaf is not None and leaf["message"]["content"] == "from the first"
    parent = reopened.get_entry(leaf["parentId"])
    assert parent is not None and parent["message"]["role"] == "assistant"


def test_branching_labels_and_forks_on_the_database(pg_url: str, tmp_path: Path) -> None:
    manager = SessionManager.create(str(tmp_path), str(tmp_path), store_factory=store_factory(pg_url))
    u1 = manager.append_message({"role": "user", "content": "one", "timestamp": 1})
    manager.append_message({"role": "assistant", "content": [{"type": "text", "text": "a"}], "timestamp": 2})
    manager.append_label_change(u1, "start")
    manager.branch(u1)
    manager.append_message({"role": "assistant", "content": [{"type": "text", "text": "b"}], "timestamp": 3})
    sid = manager.get_session_id()
    reopened = SessionManager.open(sid, store_factory=store_factory(pg_url))
    assert reopened.build_session_context() == manager.build_session_context()
    assert reopened.get_label(u1) == "start"
    new_file = reopened.create_branched_session(reopened.get_leaf_id() or "")
    assert new_file is not None
    forked_id = reopened.get_session_id()
    assert forked_id != sid
    forked = SessionManager.open(forked_id, store_factory=store_factory(pg_url))
    assert [m["content"] for m in forked.build_session_context()["messages"]] == [
        "one", [{"type": "text", "text": "b"}]]
    assert forked.get_label(u1) == "start"


def test_rpc_state_names_no_file_for_a_database_session(
    server: ScriptedModelServer, home: Path, tmp_path: Path, pg_url: str
) -> None:
    """`get_state.sessionFile` is a file that exists, or null: a database session has none; its id
    is `sessionId`."""
    configure(home, server.url + "/v1")
    server.expect(text("Hi."))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(PICONTEXT_DIR=str(home), PICONTEXT_STORE=pg_url)
    commands = [{"id": 1, "type": "prompt", "message": "hello"}, {"id": 2, "type": "get_state"},
                {"id": 3, "type": "get_session_stats"}]
    proc = subprocess.Popen([sys.executable, "-m", "picontext", "rpc", "--model", "scripted/m1"], cwd=tmp_path,
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    answers: dict[int, dict] = {}
    proc.stdin.write(json.dumps(commands[0]) + "\n")
    proc.stdin.flush()
    for raw in proc.stdout:  # the prompt's events, until the agent is done
        if json.loads(raw).get("type") == "agent_settled":
            break
    for command in commands[1:]:
        proc.stdin.write(json.dumps(command) + "\n")
        proc.stdin.flush()
        for raw in proc.stdout:
            line = json.loads(raw)
            if line.get("type") == "response" and line.get("id") == command["id"]:
                answers[command["id"]] = line["data"]
                break
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    [info] = list_sessions(database(pg_url), str(tmp_path))
    assert answers[2]["sessionFile"] is None and answers[2]["sessionId"] == info.id
    assert answers[3]["sessionFile"] is None and answers[3]["sessionId"] == info.id

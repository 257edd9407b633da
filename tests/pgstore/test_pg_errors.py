"""What the CLI says when the session database refuses or cannot be reached: one line on stderr
naming the real reason, exit code 2, nothing written (real processes, a real cluster, a real
standby)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_corpus import FILES
from test_pg_agent import configure

from picontext.errors import SessionWriteError
from picontext.session.manager import SessionManager
from picontext.session.postgres import PgSessionStore, store_factory
from picontext.session.postgres.database import close_all
from picontext.testing import ScriptedModelServer, text

SESSION = next(f for f in FILES if f.name == "real-large-session.jsonl")
HEADER = {"type": "session", "version": 3, "id": "s-err", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}


def picontext(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "picontext", *args], capture_output=True, text=True, env=full,
                          cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused command prints (and its exit code 2)."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("picontext: ")
    return lines[0]


def _sessions(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return int(conn.execute("SELECT count(*) FROM picontext_session").fetchone()[0])


def _short_session(url: str, cwd: Path, server: ScriptedModelServer) -> str:
    """A stored session of one question and its answer (models.json pointed at `server`)."""
    configure(Path(os.environ["PICONTEXT_DIR"]), server.url + "/v1")
    manager = SessionManager.create(str(cwd), str(cwd), store_factory=store_factory(url))
    manager.append_message({"role": "user", "content": "hi", "timestamp": 1})
    manager.append_message({"role": "assistant", "content": [{"type": "text", "text": "hello"}], "timestamp": 2})
    return manager.get_session_id()


def _session_id(path: Path) -> str:
    return json.loads(path.read_bytes().split(b"\n", 1)[0])["id"]


def test_a_read_only_database_is_named_and_nothing_is_written(pg_url: str, pg_cluster: Any, tmp_path: Path,
                                                              server: ScriptedModelServer) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    configure(home, server.url + "/v1")
    PgSessionStore(pg_url, "warm-up").exists()  # the schema is in place before the database turns read-only
    with psycopg.connect(pg_cluster.url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{pg_url.rsplit("/", 1)[1]}" SET default_transaction_read_only = on')
    imported = one_line(picontext("store", "import", str(SESSION), "--store", pg_url))
    assert imported == (f"picontext: {SESSION}: Cannot write session {_session_id(SESSION)} to {pg_url}: cannot "
                        "execute INSERT in a read-only transaction (a read-only database, or a standby server); "
                        "nothing was written")
    server.expect(text("hello"))
    run = one_line(picontext("run", "-p", "hi", "--model", "scripted/m1", env={"PICONTEXT_STORE": pg_url},
                             cwd=tmp_path))
    assert "read-only transaction (a read-only database, or a standby server); nothing was written" in run
    assert _sessions(pg_url) == 0


def test_a_standby_server_is_named_and_reads_still_work(pg_url: str, pg_cluster: Any, tmp_path: Path,
                                                        server: ScriptedModelServer) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    configure(home, server.url + "/v1")
    assert picontext("store", "import", str(SESSION), "--store", pg_url).returncode == 0
    sid = _session_id(SESSION)
    with pg_cluster.standby() as replica_server:
        replica = replica_server.rsplit("/", 1)[0] + "/" + pg_url.rsplit("/", 1)[1]
        context = picontext("context", "--json", sid, "--store", replica)
        assert context.returncode == 0, context.stderr
        # refused at the prompt's write, before the model is asked
        run = one_line(picontext("run", "--session", sid, "-p", "more", "--model", "scripted/m1",
                                 env={"PICONTEXT_STORE": replica}, cwd=tmp_path))
        assert run.startswith(f"picontext: Cannot write session {sid} to {replica}: ")
        assert run.endswith("(a read-only database, or a standby server); nothing was written")
    assert PgSessionStore(pg_url, sid).export_bytes() == SESSION.read_bytes()


def test_a_statement_timeout_is_named_not_unreachable(pg_url: str, pg_cluster: Any) -> None:
    store = PgSessionStore(pg_url, HEADER["id"])
    tail = store.create([HEADER])
    with psycopg.connect(pg_cluster.url, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{pg_url.rsplit("/", 1)[1]}" SET statement_timeout = \'300ms\'')
    held, release = threading.Event(), threading.Event()

    def holder() -> None:  # another writer's section holds the session's lock
        with PgSessionStore(pg_url, HEADER["id"]).writer():
            held.set()
            release.wait(60)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(60)
        fresh = PgSessionStore(pg_url + "?application_name=waiter", HEADER["id"])  # a new connection: the setting
        with pytest.raises(SessionWriteError) as info:
            fresh.append([{"type": "custom", "customType": "x", "id": "c1", "parentId": None, "timestamp": "t"}],
                         expect=tail)
    finally:
        release.set()
        thread.join()
    assert str(info.value) == (f"Cannot write session s-err to {pg_url}?application_name=waiter: canceling "
                               "statement due to statement timeout; nothing was written")
    assert store.tail() == tail


def test_a_malformed_url_is_one_line(tmp_path: Path) -> None:
    line = one_line(picontext("sessions", "--store", "postgresql://a:b:c@[::1:5432/x"))
    assert line.startswith("picontext: invalid session database URL postgresql://a:***@[::1:5432/x: ")
    assert "b:c" not in line


@pytest.mark.parametrize("problem", ["role", "database", "sslmode"])
def test_a_refusal_that_waiting_cannot_cure_is_reported_at_once(pg_cluster: Any, problem: str) -> None:
    """Unknown role, unknown database, a TLS setting the server cannot meet: the server's reason at
    once, not "database unreachable" after PICONTEXT_STORE_TIMEOUT (here far longer than the
    subprocess may take)."""
    base = f"postgresql://picontext@127.0.0.1:{pg_cluster.port}"
    url, reason = {
        "role": (f"postgresql://nobody@127.0.0.1:{pg_cluster.port}/picontext", 'role "nobody" does not exist'),
        "database": (f"{base}/nosuchdb", 'database "nosuchdb" does not exist'),
        "sslmode": (f"{base}/picontext?sslmode=require", "server does not support SSL, but SSL was required"),
    }[problem]
    line = one_line(picontext("sessions", "--store", url, env={"PICONTEXT_STORE_TIMEOUT": "3600"}, timeout=90))
    assert line.startswith(f"picontext: Cannot read from {url}: cannot connect (")
    assert reason in line and "unreachable" not in line


def test_an_unreachable_database_is_one_line(tmp_path: Path) -> None:
    """No psycopg_pool log lines before picontext's own."""
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://x@127.0.0.1:{port}/x"
    line = one_line(picontext("context", "0199", "--store", url, env={"PICONTEXT_STORE_TIMEOUT": "1"}))
    assert line.startswith(f"picontext: Cannot read from {url}: database unreachable (")
    assert "Connection refused" in line


def test_a_database_that_breaks_mid_session_is_one_line(pg_url: str, pg_cluster: Any, tmp_path: Path,
                                                        server: ScriptedModelServer) -> None:
    """The pool's own lines ("discarding closed connection", "couldn't stop thread") stay quiet in the
    CLI when its connections break under it; picontext says it in one line."""
    sid = _short_session(pg_url, tmp_path, server)
    before = PgSessionStore(pg_url, sid).export_bytes()
    close_all()
    name = pg_url.rsplit("/", 1)[1]

    release, held = threading.Event(), threading.Event()
    server.expect(text("hello").hold_after(1, release, held))  # the model answers slowly...
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(PICONTEXT_STORE=pg_url, PICONTEXT_STORE_TIMEOUT="1")
    proc = subprocess.Popen([sys.executable, "-m", "picontext", "run", "--session", sid, "-p", "more", "--model",
                             "scripted/m1"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert held.wait(60)
        with psycopg.connect(pg_cluster.url, autocommit=True) as admin:  # ...while the database goes away
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        release.set()
        out, err = proc.communicate(timeout=120)
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
        with psycopg.connect(pg_cluster.url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    line = one_line(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    assert line.startswith(f"picontext: Cannot write session {sid} to {pg_url}: ")
    after = PgSessionStore(pg_url, sid).export_bytes() or b""
    assert before is not None and after.startswith(before)  # nothing half-written: the prompt, not the reply
    added = [json.loads(x) for x in after[len(before):].splitlines()]
    assert "assistant" not in [e["message"]["role"] for e in added if e["type"] == "message"]


def test_a_stored_head_that_is_not_json_is_read_around(pg_url: str, tmp_path: Path,
                                                       server: ScriptedModelServer) -> None:
    """The heads are a copy of what the lines say, kept for fast resumes: when one is not JSON the
    session is read from its lines (said once on stderr), and the answer is the file's."""
    sid = _short_session(pg_url, tmp_path, server)
    exported = tmp_path / "s.jsonl"
    exported.write_bytes(PgSessionStore(pg_url, sid).export_bytes() or b"")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE picontext_entry SET head = 'not json' WHERE session_id = %s AND seq = 1", (sid,))
    from_db = picontext("context", "--json", sid, "--store", pg_url)
    from_file = picontext("context", "--json", str(exported), env={"PICONTEXT_STORE": ""})
    assert from_db.returncode == 0, from_db.stderr
    assert from_db.stdout == from_file.stdout
    notice = f"picontext: warning: {pg_url}#{sid}: its stored heads are unreadable ("
    assert from_db.stderr.startswith(notice) and from_db.stderr.count("\n") == 1
    server.expect(text("again"))
    run = picontext("run", "--session", sid, "-p", "more", "--model", "scripted/m1",
                    env={"PICONTEXT_STORE": pg_url}, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "again" and run.stderr.startswith(notice)
    context = SessionManager.open(sid, store_factory=store_factory(pg_url)).build_session_context()
    said = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
            for m in context["messages"] if m["role"] in ("user", "assistant")]
    assert said == ["hi", "hello", "more", "again"]

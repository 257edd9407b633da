"""The PostgreSQL store through a real PgBouncer in transaction-pooling mode (docs/storage.md,
"Through PgBouncer"): consecutive statements of one client run on different server connections,
so nothing may rely on a server-side prepared statement or a session-level lock."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg

from picontext.session.manager import SessionManager
from picontext.session.postgres import PgSessionStore, database
from picontext.session.postgres.listing import list_sessions
from picontext.session.postgres.repository import PostgresRepository

WRITER = Path(__file__).with_name("pg_writer.py")
HEADER = {"type": "session", "version": 3, "id": "s-bouncer", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}


def _msg(entry_id: str, parent: str | None, text: str = "hi") -> dict[str, Any]:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1767225601000}}


def _advisory_locks(direct_url: str) -> int:
    with psycopg.connect(direct_url, autocommit=True) as conn:
        return int(conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()[0])


def test_the_pooler_shares_server_connections_per_transaction(pg_bouncer: Any, pgbouncer_url: str) -> None:
    with psycopg.connect(pg_bouncer.admin_url, autocommit=True, prepare_threshold=None) as admin:
        config = {row[0]: row[1] for row in admin.execute("SHOW CONFIG").fetchall()}
    assert config["pool_mode"] == "transaction"
    # More clients than server connections, all working at once: they can only take turns.
    clients = [psycopg.connect(pgbouncer_url, autocommit=True, prepare_threshold=None)
               for _ in range(pg_bouncer.pool_size + 3)]
    try:
        pids = {c.execute("SELECT pg_backend_pid()").fetchone()[0] for c in clients}
        assert len(pids) <= pg_bouncer.pool_size
    finally:
        for c in clients:
            c.close()


def test_a_session_is_written_projected_and_resumed_through_the_pooler(pgbouncer_url: str, pg_url: str,
                                                                        tmp_path: Path) -> None:
    manager = PostgresRepository(pgbouncer_url).create(str(tmp_path))
    for i in range(20):  # more statements than psycopg's auto-prepare threshold, on shared connections
        manager.append_message({"role": "user", "content": f"question {i}", "timestamp": 2 * i})
        manager.append_message({"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}],
                                "timestamp": 2 * i + 1})
    sid = manager.get_session_id()
    store = PgSessionStore(pgbouncer_url, sid)
    with store.writer() as tail:  # a writer section through the pooler
        assert tail == store.tail()
        store.append([{"type": "label", "id": "l1", "parentId": manager.get_leaf_id(), "timestamp": "t",
                       "targetId": manager.get_leaf_id(), "label": "checkpoint"}], expect=tail)
    assert _advisory_locks(pg_url) == 0  # the section's lock ended with it, on whichever server connection
    resumed = PostgresRepository(pgbouncer_url).open(sid, warn=lambda m: None)
    direct = PostgresRepository(pg_url).open(sid, warn=lambda m: None)
    context = resumed.build_session_context()
    assert repr(context) == repr(direct.build_session_context())
    assert len(context["messages"]) == 40
    assert [e.get("id") for e in resumed.get_entries()] == [e.get("id") for e in direct.get_entries()]
    # Listing converts times in SQL with the session's time zone, which PgBouncer restores per client.
    listed = list_sessions(database(pgbouncer_url), str(tmp_path))
    assert [(i.id, i.modified, i.created) for i in listed] == \
        [(i.id, i.modified, i.created) for i in list_sessions(database(pg_url), str(tmp_path))]
    assert [i.id for i in listed] == [sid]


def test_concurrent_writers_through_the_pooler_leave_one_chain(pgbouncer_url: str, pg_url: str) -> None:
    store = PgSessionStore(pgbouncer_url, HEADER["id"])
    store.create([HEADER, _msg("a1", None)])
    procs = [subprocess.Popen([sys.executable, str(WRITER), pgbouncer_url, HEADER["id"], "loop", "30"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [p.communicate(timeout=180) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0 and out.startswith("done"), err[-2000:]
    entries = [e for e in PgSessionStore(pg_url, HEADER["id"]).load().entries if e.get("type") != "session"]
    assert len(entries) == 1 + 4 * 30
    assert len({e["id"] for e in entries}) == len(entries)
    for before, after in itertools.pairwise(entries):
        assert after["parentId"] == before["id"]


def test_stale_managers_catch_up_in_writer_sections_through_the_pooler(pgbouncer_url: str, pg_url: str,
                                                                       tmp_path: Path) -> None:
    """Two managers on one session, each append racing the other's: the stale one takes the other
    entries in inside a writer section; nothing is lost and no lock is left behind."""
    first = PostgresRepository(pgbouncer_url).create(str(tmp_path), warn=lambda m: None)
    first.append_message({"role": "user", "content": "hi", "timestamp": 1})
    first.append_message({"role": "assistant", "content": [{"type": "text", "text": "hello"}], "timestamp": 2})
    sid = first.get_session_id()
    warnings: list[str] = []
    managers = [first, PostgresRepository(pgbouncer_url).open(sid, warn=warnings.append)]
    errors: list[BaseException] = []

    def work(manager: SessionManager, who: int) -> None:
        try:
            for i in range(15):
                manager.append_message({"role": "user", "content": f"{who}-{i}", "timestamp": 10 + i})
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(m, n)) for n, m in enumerate(managers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    reopened = PostgresRepository(pg_url).open(sid, warn=lambda m: None)
    texts = sorted(e["message"]["content"] for e in reopened.get_entries()
                   if e.get("type") == "message" and e["message"]["role"] == "user")
    assert texts == sorted(["hi", *(f"{w}-{i}" for w in range(2) for i in range(15))])
    assert _advisory_locks(pg_url) == 0


def test_a_writer_section_leaves_no_lock_on_a_shared_server_connection(pgbouncer_url: str, pg_url: str) -> None:
    """The section's lock lives and ends with its transaction: another client that takes a server
    connection while the section runs cannot end up owning it (a session-level lock would stay on
    the server connection that took it, and the unlock would run on another one)."""
    store = PgSessionStore(pgbouncer_url, HEADER["id"])
    store.create([HEADER, _msg("a1", None)])
    with psycopg.connect(pgbouncer_url, autocommit=True, prepare_threshold=None) as other:
        with store.writer() as tail:
            other.execute("BEGIN")  # takes a server connection (the most recently used idle one) and keeps it
            other.execute("SELECT 1")
            store.append([_msg("b1", "a1")], expect=tail)
        assert _advisory_locks(pg_url) == 0
        other.execute("COMMIT")
    with PgSessionStore(pgbouncer_url, HEADER["id"], lock_timeout=1).writer() as tail:
        assert tail is not None and tail.offset == 3

"""Promises of docs/storage.md ("PostgreSQL") not covered elsewhere: passwords never shown, the
compaction refusal, the synchronous_commit URL option, a retried append that had committed, and a
manager whose append failed on an unreachable database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_corpus import FILES

from picontext.compaction.compact import compact_session
from picontext.compaction.settings import CompactionSettings
from picontext.errors import SessionChanged, SessionWriteError
from picontext.session.postgres import PgSessionStore, database
from picontext.session.postgres.database import redact
from picontext.session.postgres.repository import PostgresRepository
from picontext.session.postgres.transfer import import_file

HEADER = {"type": "session", "version": 3, "id": "s-b", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}


def _custom(entry_id: str, parent: str | None) -> dict[str, Any]:
    return {"type": "custom", "customType": "x", "id": entry_id, "parentId": parent, "timestamp": "t"}


def test_messages_never_show_the_password() -> None:
    assert redact("postgresql://agent:s3cret@db.example.com:5432/agents?sslmode=require") == \
        "postgresql://agent:***@db.example.com:5432/agents?sslmode=require"
    assert redact("postgresql://agent@db/agents") == "postgresql://agent@db/agents"
    store = PgSessionStore("postgresql://agent:s3cret@127.0.0.1:1/agents", "abc")
    assert "s3cret" not in store.location and "***" in store.location


def test_synchronous_commit_can_be_relaxed_in_the_url(pg_url: str) -> None:
    url = pg_url + "?options=-csynchronous_commit%3Doff"
    store = PgSessionStore(url, HEADER["id"])
    tail = store.create([HEADER])
    store.append([_custom("c1", None)], expect=tail)
    with store.db.connection() as conn:
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)
    assert len(PgSessionStore(pg_url, HEADER["id"]).load().entries) == 2


class _LosesTheAnswer(PgSessionStore):
    """The connection breaks after the first append committed, before its answer arrived."""

    broken = False

    def _call(self, sql: str, params: tuple[Any, ...]) -> Any:
        row = super()._call(sql, params)  # committed
        if not self.broken:
            self.broken = True
            raise SessionWriteError("Cannot write session: database unreachable (connection lost)")
        return row


def test_a_retried_append_that_had_committed_is_not_stored_twice(pg_url: str) -> None:
    PgSessionStore(pg_url, HEADER["id"]).create([HEADER])
    store = _LosesTheAnswer(pg_url, HEADER["id"])
    tail = store.tail()
    new_tail = store.append([_custom("c1", None)], expect=tail)
    assert store.broken
    assert tail is not None and new_tail.offset == tail.offset + 1
    assert [e.get("id") for e in store.load().entries] == ["s-b", "c1"]


async def test_compaction_refuses_when_another_writer_appended(pg_url: str, tmp_path: Path) -> None:
    source = next(f for f in FILES if f.name == "real-large-session.jsonl")
    session_id, _ = import_file(database(pg_url), str(source))
    repo = PostgresRepository(pg_url)
    manager = repo.open(session_id, warn=lambda m: None)
    other = repo.open(session_id, warn=lambda m: None)
    other.append_custom_entry("note", {"by": "other"})  # upgrades the legacy log and appends
    with pytest.raises(SessionChanged, match="changed while the summary was being written"):
        await compact_session(manager, strategy="mask", completion=None,
                              settings=CompactionSettings(keep_recent_tokens=2000))
    stored = PgSessionStore(pg_url, session_id).load().entries
    assert not any(isinstance(e, dict) and e.get("type") == "context_edit" for e in stored)


def test_a_failed_append_is_removed_from_memory(pg_cluster: Any, pg_url: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PICONTEXT_STORE_TIMEOUT", "2")
    manager = PostgresRepository(pg_url).create(str(tmp_path))
    manager.append_message({"role": "user", "content": "hi", "timestamp": 1})
    manager.append_message({"role": "assistant", "content": [{"type": "text", "text": "hello"}], "timestamp": 2})
    before = manager.build_session_context()
    with psycopg.connect(pg_cluster.url, autocommit=True) as admin:  # the database goes away
        admin.execute(f"ALTER DATABASE \"{pg_url.rsplit('/', 1)[1]}\" ALLOW_CONNECTIONS false")
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                      (pg_url.rsplit("/", 1)[1],))
    try:
        with pytest.raises(SessionWriteError, match=r"database unreachable.*nothing was written"):
            manager.append_message({"role": "user", "content": "lost?", "timestamp": 3})
        assert manager.entry_count() == 2 and manager.build_session_context() == before
    finally:
        with psycopg.connect(pg_cluster.url, autocommit=True) as admin:
            admin.execute(f"ALTER DATABASE \"{pg_url.rsplit('/', 1)[1]}\" ALLOW_CONNECTIONS true")
    manager.append_message({"role": "user", "content": "again", "timestamp": 4})
    reopened = PostgresRepository(pg_url).open(manager.get_session_id())
    assert reopened.build_session_context() == manager.build_session_context()


def test_a_killed_writer_loses_nothing_acknowledged_with_asynchronous_commit(pg_url: str) -> None:
    """synchronous_commit=off: a client killed with kill -9 loses no append that had returned."""
    import signal
    import subprocess
    import sys

    url = pg_url + "?options=-csynchronous_commit%3Doff"
    PgSessionStore(url, HEADER["id"]).create([HEADER])
    writer = subprocess.Popen([sys.executable, str(Path(__file__).with_name("pg_writer.py")), url, HEADER["id"],
                               "acks", "100000"], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    acked = []
    for line in writer.stdout:
        acked.append(line.split()[1])
        if len(acked) == 300:
            writer.send_signal(signal.SIGKILL)
            break
    writer.wait()
    acked += [line.split()[1] for line in writer.stdout.read().splitlines() if line.startswith("ack ")]
    stored = [e["id"] for e in PgSessionStore(pg_url, HEADER["id"]).load().entries[1:]]
    assert stored[: len(acked)] == acked  # every acknowledged append, in order
    assert len(stored) - len(acked) <= 1  # at most the one committed while its answer was on the way

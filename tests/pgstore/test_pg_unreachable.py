"""The database going away mid-session: a clear one-line error, nothing half-written, and the
session continues where it was once the database is back (docs/storage.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from picontext.errors import SessionWriteError
from picontext.session.postgres import PgSessionStore, StoreUnavailableError
from picontext.session.postgres.database import close_all, default_timeout
from support.postgres import PostgresCluster, PostgresUnavailable

HEADER = {"type": "session", "version": 3, "id": "s-down", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}


def _msg(entry_id: str, parent: str | None) -> dict[str, Any]:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": "hi", "timestamp": 1767225601000}}


@pytest.fixture
def own_cluster(pg_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[PostgresCluster]:
    """A cluster of its own (this test stops it); `pg_cluster` makes it fail in CI when missing."""
    monkeypatch.setenv("PICONTEXT_STORE_TIMEOUT", "2")
    try:
        cluster = PostgresCluster(durable=False).start()
    except PostgresUnavailable as exc:  # pragma: no cover - pg_cluster already failed or skipped
        pytest.skip(str(exc))
    yield cluster
    close_all()
    cluster.close()


def test_database_unreachable_mid_session(own_cluster: PostgresCluster) -> None:
    store = PgSessionStore(own_cluster.url, HEADER["id"])
    tail = store.create([HEADER, _msg("a1", None)])
    tail = store.append([_msg("a2", "a1")], expect=tail)

    own_cluster.stop_server("immediate")
    with pytest.raises(SessionWriteError) as info:
        store.append([_msg("a3", "a2")], expect=tail)
    message = str(info.value)
    assert "\n" not in message
    assert "database unreachable" in message and "nothing was written" in message
    assert "s-down" in message and f"127.0.0.1:{own_cluster.port}" in message
    with pytest.raises(StoreUnavailableError, match=r"Cannot read session s-down from .*database unreachable"):
        store.load()

    own_cluster.start_server()
    loaded = store.load()
    assert [e["id"] for e in loaded.entries[1:]] == ["a1", "a2"]
    assert loaded.tail == tail
    # The refused entry left nothing behind: the writer continues from the tail it had.
    store.append([_msg("a3", "a2")], expect=tail)
    assert [e["id"] for e in store.load().entries[1:]] == ["a1", "a2", "a3"]


def test_a_dropped_connection_is_replaced_transparently(own_cluster: PostgresCluster) -> None:
    store = PgSessionStore(own_cluster.url, HEADER["id"])
    tail = store.create([HEADER, _msg("a1", None)])
    with psycopg.connect(own_cluster.url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                      " WHERE datname = current_database() AND pid <> pg_backend_pid()")
    store.append([_msg("a2", "a1")], expect=tail)
    assert len(store.load().entries) == 3


def test_the_wait_for_a_connection_defaults_to_10_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/storage.md: `PICONTEXT_STORE_TIMEOUT` (seconds, default 10) bounds the wait for a connection."""
    monkeypatch.delenv("PICONTEXT_STORE_TIMEOUT", raising=False)
    assert default_timeout() == 10
    monkeypatch.setenv("PICONTEXT_STORE_TIMEOUT", "2.5")
    assert default_timeout() == 2.5

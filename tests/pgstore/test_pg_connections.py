"""How the PostgreSQL store uses its connections: a single-entry append is one round trip (one
statement, no BEGIN/COMMIT), and writer sections run on pooled connections that go back to the
pool, committed, when the section ends or fails."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from picontext.errors import SessionLockedError
from picontext.session.postgres import PgSessionStore
from picontext.session.postgres.database import Database

HEADER = {"type": "session", "version": 3, "id": "s-conn", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}


def _custom(entry_id: str, parent: str | None) -> dict[str, Any]:
    return {"type": "custom", "customType": "x", "id": entry_id, "parentId": parent, "timestamp": "t"}


def _messages_sent(trace: str) -> list[str]:
    """The protocol messages the client sent, by name, from a libpq trace."""
    return [fields[2] for line in trace.splitlines() if len(fields := line.split("\t")) > 2 and fields[0] == "F"]


def test_a_single_entry_append_is_one_round_trip(pg_url: str, tmp_path: Path) -> None:
    from psycopg.pq import Trace

    db = Database(pg_url, max_size=1)  # one connection: the one traced
    store = PgSessionStore(db, HEADER["id"])
    tail = store.append([_custom("c1", None)], expect=store.create([HEADER]))
    trace_path = tmp_path / "trace"
    with open(trace_path, "w") as trace:
        with db.connection() as conn:
            conn.pgconn.trace(trace.fileno())
            conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS)
        try:
            store.append([_custom("c2", "c1")], expect=tail)
        finally:
            with db.connection() as conn:
                conn.pgconn.untrace()  # flushes the trace, before the file is closed
    db.close()
    sent = _messages_sent(trace_path.read_text())
    # Parse, Bind, Describe, Execute, Sync: one statement, and one Sync (the only wait for the server).
    assert sent.count("Sync") == 1 and sent.count("Parse") == 1, sent
    assert "Query" not in sent, sent  # no BEGIN / COMMIT
    assert [e.get("id") for e in store.load().entries] == ["s-conn", "c1", "c2"]


def _backend(store: PgSessionStore) -> int:
    row = store._fetch("SELECT pg_backend_pid()", ())
    return int(row[0])


def test_writer_sections_reuse_a_pooled_connection_and_commit(pg_url: str) -> None:
    db = Database(pg_url)
    store = PgSessionStore(db, HEADER["id"])
    store.create([HEADER])
    with store.writer() as tail:
        first = _backend(store)
        store.append([_custom("c1", None)], expect=tail)
    with store.writer():
        assert _backend(store) == first  # the same server connection, not a new one per section
    assert _backend(store) == first  # and back in the pool, idle, for everything else
    assert [e.get("id") for e in PgSessionStore(pg_url, HEADER["id"]).load().entries] == ["s-conn", "c1"]
    db.close()


async def test_async_writer_sections_reuse_a_pooled_connection(pg_url: str) -> None:
    db = Database(pg_url)
    store = PgSessionStore(db, HEADER["id"])
    store.create([HEADER])
    pids = []
    for n in range(3):
        async with store.awriter() as tail:
            pids.append(_backend(store))
            store.append([_custom(f"c{n}", f"c{n - 1}" if n else None)], expect=tail)
    assert len(set(pids)) == 1
    assert len(PgSessionStore(pg_url, HEADER["id"]).load().entries) == 4
    db.close()


def test_a_section_that_cannot_get_the_lock_gives_its_connection_back(pg_url: str) -> None:
    db = Database(pg_url, timeout=5, max_size=3)
    store = PgSessionStore(db, HEADER["id"])
    store.create([HEADER])
    other = PgSessionStore(db, HEADER["id"], lock_timeout=0.01)
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with store.writer():
            held.set()
            release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(30)
        for _ in range(6):  # twice the pool: a connection kept by a failed section would exhaust it
            with pytest.raises(SessionLockedError):
                with other.writer():
                    pass
        for _ in range(6):
            with pytest.raises(SessionLockedError):
                asyncio.run(_enter_async(other))
        assert other.tail() is not None
    finally:
        release.set()
        thread.join()
    with other.writer() as tail:
        assert tail == store.tail()
    db.close()


async def _enter_async(store: PgSessionStore) -> None:
    async with store.awriter():
        pass


async def test_an_async_section_cancelled_while_waiting_for_a_connection_loses_none(pg_url: str) -> None:
    db = Database(pg_url, timeout=5, max_size=1)  # one connection, held by the first section
    first, second = PgSessionStore(db, "s-one"), PgSessionStore(db, "s-two")
    for store in (first, second):
        store.create([{**HEADER, "id": store.session_id}])
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with first.writer():
            held.set()
            release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    await asyncio.to_thread(held.wait, 30)
    waiting = asyncio.create_task(_enter_async(second))  # waits for the pool's only connection
    done, _ = await asyncio.wait([waiting], timeout=0.2)
    assert not done
    waiting.cancel()  # an abort while the section waits
    with pytest.raises(asyncio.CancelledError):
        await waiting
    release.set()
    await asyncio.to_thread(thread.join)
    async with second.awriter() as tail:  # the connection came back to the pool
        assert tail == second.tail()
    db.close()

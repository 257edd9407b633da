"""Two or more processes writing one session in PostgreSQL: appends are serialised by the tail
check, a stale writer is refused (and can re-read), and the tree never forks silently."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from picontext.errors import SessionLockedError, StaleSessionError
from picontext.session.postgres import PgSessionStore, database

WRITER = Path(__file__).with_name("pg_writer.py")
HEADER = {"type": "session", "version": 3, "id": "s-concurrent", "timestamp": "2026-01-01T00:00:00.000Z",
          "cwd": "/tmp/project"}


def _msg(entry_id: str, parent: str | None, text: str = "hi") -> dict[str, Any]:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1767225601000}}


def _new_session(url: str) -> PgSessionStore:
    store = PgSessionStore(url, HEADER["id"])
    store.create([HEADER, _msg("a1", None)])
    return store


def _assert_linear(store: PgSessionStore, expected_entries: int) -> None:
    """One chain: every entry continues the one before it (no fork), no id twice, none lost."""
    entries = [e for e in store.load().entries if e.get("type") != "session"]
    assert len(entries) == expected_entries
    ids = [e["id"] for e in entries]
    assert len(set(ids)) == len(ids)
    for before, after in itertools.pairwise(entries):
        assert after["parentId"] == before["id"]


def test_a_stale_append_is_refused_and_nothing_is_written(pg_url: str) -> None:
    store = _new_session(pg_url)
    seen = store.tail()
    assert seen is not None
    other = PgSessionStore(pg_url, HEADER["id"])
    other.append([_msg("b1", "a1")], expect=seen)
    with pytest.raises(StaleSessionError, match=r"changed by another writer: it now has 3 records, this writer "
                       r"last saw 2.*nothing was appended"):
        store.append([_msg("c1", "a1")], expect=seen)
    assert [e["id"] for e in store.load().entries[1:]] == ["a1", "b1"]


def test_two_processes_continuing_the_same_session_never_fork_it(pg_url: str) -> None:
    store = _new_session(pg_url)
    procs = [subprocess.Popen([sys.executable, str(WRITER), pg_url, HEADER["id"], "race"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"  # both loaded the same tail
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outputs = sorted(p.communicate(timeout=60)[0] for p in procs)
    assert all(p.returncode == 0 for p in procs)
    assert outputs[0] == "ok\n"
    assert outputs[1].startswith("stale Session s-concurrent was changed by another writer")
    assert outputs[1].endswith("ok-after-reload\n")
    _assert_linear(store, 3)


def test_many_processes_appending_at_once_leave_one_chain(pg_url: str) -> None:
    store = _new_session(pg_url)
    procs = [subprocess.Popen([sys.executable, str(WRITER), pg_url, HEADER["id"], "loop", "40"],
                              stdout=subprocess.PIPE, text=True) for _ in range(4)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 and out.startswith("done") for p, out in zip(procs, outputs, strict=True))
    _assert_linear(store, 1 + 4 * 40)


def test_writer_section_excludes_other_writers(pg_url: str) -> None:
    store = _new_session(pg_url)
    other = PgSessionStore(pg_url, HEADER["id"], lock_timeout=0.2)
    with store.writer() as tail:
        assert tail == store.tail()
        tail = store.append([_msg("b1", "a1")], expect=tail)  # the holder does not wait for itself
        errors: list[BaseException] = []

        def contend() -> None:  # another thread: the section is reentrant only for its holder
            try:
                with other.writer():
                    pass
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=contend)
        thread.start()
        thread.join()
        assert len(errors) == 1 and isinstance(errors[0], SessionLockedError)
        assert "locked by another writer" in str(errors[0])
    with other.writer() as tail:  # released
        assert tail is not None and tail.offset == 3


async def test_awriter_waits_without_blocking_the_event_loop(pg_url: str) -> None:
    store = _new_session(pg_url)
    other = PgSessionStore(pg_url, HEADER["id"])
    ticks = 0
    ticked = asyncio.Event()
    got: list[Any] = []

    async def ticker(stop: asyncio.Event) -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            if ticks == 20:
                ticked.set()
            await asyncio.sleep(0.001)

    async def second() -> None:
        async with other.awriter() as tail:
            got.append(tail)

    held, release = threading.Event(), threading.Event()

    def holder() -> None:  # another thread holds the section (it is reentrant for its own thread)
        with store.writer():
            held.set()
            release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    await asyncio.to_thread(held.wait, 30)
    stop = asyncio.Event()
    tick_task = asyncio.create_task(ticker(stop))
    waiter = asyncio.create_task(second())
    await asyncio.wait_for(ticked.wait(), 10)  # the loop keeps running while `second` waits for the lock
    assert not waiter.done()
    release.set()
    await asyncio.wait_for(waiter, 10)
    await asyncio.to_thread(thread.join)
    stop.set()
    await tick_task
    assert got == [store.tail()]


def test_appends_of_other_writers_wait_for_the_writer_section(pg_url: str) -> None:
    store = _new_session(pg_url)
    db = database(pg_url)
    with store.writer() as tail:
        with db.connection() as conn:  # another connection: its append must wait on the lock
            conn.execute("SET lock_timeout = '200ms'")
            with pytest.raises(Exception, match="lock timeout"):
                conn.execute("SELECT * FROM picontext_append(%s, 1, NULL, ARRAY['x'], ARRAY[NULL], ARRAY['custom'],"
                             " ARRAY[NULL::bytea], ARRAY['{}'::bytea], 1, 0, 3, false, NULL, '', 0)", (HEADER["id"],))
            with pytest.raises(Exception, match="lock timeout"):  # the one-line variant too
                conn.execute("SELECT * FROM picontext_append_one(%s, 1, NULL, 'x', NULL, 'custom', NULL,"
                             " '{}'::bytea, 1, 0, 3, false, NULL, '', 0)", (HEADER["id"],))
            conn.execute("SET lock_timeout = 0")
        assert store.tail() == tail

"""The JSONL store keeps its append descriptor open across appends (issue 20: append+context at
most 0.1 ms at 100k entries) and still writes where and how a fresh open would: a file replaced
or deleted under it, a torn line another writer left after our last append, a forked child, and
two threads sharing one store."""

from __future__ import annotations

import fcntl
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from picontext.errors import SessionLockedError, SessionWriteError
from picontext.session.store import JsonlSessionStore

HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"}


def _entry(i: int) -> dict[str, Any]:
    return {"type": "message", "id": f"e{i}", "parentId": None, "timestamp": "2025-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": f"m{i}", "timestamp": i}}


def _ids(path: str) -> list[Any]:
    return [json.loads(line).get("id") for line in Path(path).read_bytes().splitlines() if line.strip()]


def _store(tmp_path: Path, **kw: Any) -> JsonlSessionStore:
    store = JsonlSessionStore(str(tmp_path / "s.jsonl"), **kw)
    store.create([HEADER])
    store.append([_entry(1)])  # the descriptor is open from here on
    return store


def test_an_append_after_the_file_was_replaced_goes_to_the_file_the_path_names(tmp_path: Path) -> None:
    store = _store(tmp_path)
    old = open(store.path, "rb")  # the replaced file, read after the append
    replacement = tmp_path / "other.jsonl"
    replacement.write_bytes(json.dumps(HEADER).encode() + b"\n")
    os.replace(replacement, store.path)  # another program rewrites the session atomically
    tail = store.append([_entry(2)])
    assert _ids(store.path) == ["s1", "e2"]
    assert tail == store.tail()
    with old:
        assert b'"e2"' not in old.read()  # nothing went into the file that was replaced


def test_an_append_after_the_file_was_deleted_reports_it_missing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    os.unlink(store.path)
    with pytest.raises(SessionWriteError) as raised:
        store.append([_entry(2)])
    assert raised.value.missing
    assert not os.path.exists(store.path)


def test_a_torn_line_another_writer_left_after_our_append_is_closed_first(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with open(store.path, "ab") as f:
        f.write(b'{"type":"message","id":"tor')  # another writer crashed mid-line
    store.append([_entry(2)])
    lines = Path(store.path).read_bytes().split(b"\n")
    assert lines[-3:] == [b'{"type":"message","id":"tor', json.dumps(_entry(2), separators=(",", ":")).encode(),
                          b""]


def test_our_own_last_line_is_not_closed_twice(tmp_path: Path) -> None:
    store = _store(tmp_path)
    for i in range(2, 6):
        store.append([_entry(i)])
    assert b"\n\n" not in Path(store.path).read_bytes()
    assert _ids(store.path) == ["s1", "e1", "e2", "e3", "e4", "e5"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_does_not_append_under_the_parents_lock(tmp_path: Path) -> None:
    """flock belongs to the open file description, which a forked child shares: through the
    inherited descriptor the child would 'hold' a lock its parent holds. It opens its own."""
    store = _store(tmp_path, lock_timeout=0.3)
    assert store._fd is not None
    fcntl.flock(store._fd, fcntl.LOCK_EX)  # the parent is inside an append (white box: its lock)
    try:
        pid = os.fork()
        if pid == 0:  # the child: must wait for the parent's lock, and give up after lock_timeout
            code = 1
            try:
                store.append([_entry(99)])
            except SessionLockedError:
                code = 0
            except BaseException:
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        fcntl.flock(store._fd, fcntl.LOCK_UN)
    assert os.waitstatus_to_exitcode(status) == 0
    assert "e99" not in _ids(store.path)
    store.append([_entry(2)])  # the parent's descriptor still works
    assert _ids(store.path)[-1] == "e2"


def test_threads_appending_through_one_store_lose_and_tear_no_line(tmp_path: Path) -> None:
    store = _store(tmp_path)
    start = threading.Barrier(4)

    def writer(k: int) -> None:
        start.wait()
        for i in range(200):
            store.append([_entry(1000 * (k + 1) + i)])

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = _ids(store.path)  # every line parses
    assert sorted(ids[2:]) == sorted(f"e{1000 * (k + 1) + i}" for k in range(4) for i in range(200))
    assert store.tail() is not None and store.tail().offset == os.path.getsize(store.path)  # type: ignore[union-attr]


def test_close_releases_the_descriptor_and_the_next_append_reopens(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.close()
    assert store._fd is None
    store.append([_entry(2)])
    assert _ids(store.path)[-1] == "e2"


def test_a_thread_appending_while_another_is_inside_an_append_waits_for_it(tmp_path: Path) -> None:
    """Two threads of one store do not share its descriptor's lock (a flock is the description's,
    so both would 'hold' it): the second waits for the first, then sees the tail it expected is
    gone and appends nothing."""
    store = _store(tmp_path)
    seen = store.tail()
    inside, go, second_waits = threading.Event(), threading.Event(), threading.Event()
    write_all, try_lock = store._write_all, store._try_lock

    def slow_write(fd: int, payload: bytes, size: int) -> None:
        if not inside.is_set():
            inside.set()
            assert go.wait(10)
        write_all(fd, payload, size)

    def noted_try_lock(flags: int) -> int | None:
        second_waits.set()
        return try_lock(flags)

    store._write_all = slow_write  # type: ignore[method-assign]
    store._try_lock = noted_try_lock  # type: ignore[method-assign]
    first = threading.Thread(target=store.append, args=([_entry(2)],), kwargs={"expect": seen})
    first.start()
    assert inside.wait(10)
    outcome: list[BaseException | None] = []

    def second() -> None:
        try:
            store.append([_entry(3)], expect=seen)
            outcome.append(None)
        except BaseException as exc:  # the outcome is what is asserted
            outcome.append(exc)
        second_waits.set()

    other = threading.Thread(target=second)
    other.start()
    assert second_waits.wait(10)  # waiting for the lock, or (the defect) already done
    go.set()
    first.join()
    other.join()
    assert len(outcome) == 1 and type(outcome[0]).__name__ == "StaleSessionError"
    assert _ids(store.path) == ["s1", "e1", "e2"]

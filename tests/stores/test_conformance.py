"""The store conformance suite (issue 20 item 5): what every `SessionStore` and `SessionRepository`
must do, run against each store picontext ships — JSONL files, PostgreSQL, memory.

A store of your own: give `conformance_repository` (below) your repository, the rest of the
suite talks to it only through the `SessionRepository` and `SessionStore` protocols. It sets the
stores' `lock_timeout` attribute to keep refused waits short.

Covered: all-or-nothing appends (also when two threads race), refusal of stale tails, incremental
reads, the sync, async and non-waiting writer sections, listing facts, byte-identical import and export, and
that a store reads the same bytes as the JSONL parser does.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from picontext.errors import SessionLockedError, StaleSessionError
from picontext.session.protocol import SessionStore, Tail
from picontext.session.records import parse_session_bytes
from picontext.session.repository import SessionRepository, open_repository

CWD = "/home/u/proj"
HEADER = {"type": "session", "version": 3, "id": "0199c0de-0001", "timestamp": "2026-01-01T00:00:00.000Z",
          "cwd": CWD}

# Byte strings a store must give back exactly: odd lines, odd numbers, odd text, no final newline.
ODD_FILES = {
    "blank and unreadable lines": (b'{"type":"session","version":3,"id":"odd-1","timestamp":"2026-01-01T00:00:00Z",'
                                   b'"cwd":"/w"}\n\n  \nnot json\n{"type":"custom","id":"c1","parentId":null}\n'),
    "no final newline": (b'{"type":"session","version":3,"id":"odd-2","timestamp":"2026-01-01T00:00:00Z","cwd":"/w"}'
                         b'\n{"type":"message","id":"m1","parentId":null,"message":{"role":"user","content":"x"}}'),
    "text a database column refuses": (b'{"type":"session","version":3,"id":"odd-3","timestamp":"x","cwd":"/w"}\n'
                                       b'{"type":"session_info","id":"i1","parentId":null,"name":"a\\u0000b\\ud800"}'
                                       b'\n{"type":"message","id":"m1","parentId":"i1","message":{"role":"user",'
                                       b'"content":"caf\xc3\xa9 \\ud83d\\ude00 \\udfff","timestamp":1e400}}\r\n'),
    "odd numbers and keys": (b'{"type":"session","version":3.0,"id":"odd-4","timestamp":"2026-01-01T00:00:00Z",'
                             b'"cwd":"/w","cwd":"/w2"}\n{"type":"label","id":"l1","parentId":null,"n":1.50,'
                             b'"big":123456789012345678901234567890,"neg":-0}\nnull\n0\nfalse\n""\n'),
    "a torn last line": (b'{"type":"session","version":3,"id":"odd-5","timestamp":"2026-01-01T00:00:00Z","cwd":"/w"}\n'
                         b'{"type":"custom","id":"c1","parentId":null}\n{"type":"message","id":"m2","par'),
    "a legacy version": (b'{"type":"session","id":"odd-6","timestamp":"2025-01-01T00:00:00Z","cwd":"/w"}\n'
                         b'{"type":"message","timestamp":"2025-01-01T00:00:01Z","message":{"role":"user",'
                         b'"content":"v1"}}\n'),
}


@pytest.fixture
def conformance_repository(repository_url: str) -> Iterator[SessionRepository]:
    repo = open_repository(repository_url)
    yield repo
    repo.close()


def entry(n: int, parent: str | None, text: str | None = None, role: str = "user") -> dict[str, Any]:
    return {"type": "message", "id": f"e{n}", "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": role, "content": text or f"m{n}", "timestamp": 1_767_225_600_000 + n}}


def new_store(repo: SessionRepository, session_id: str = "0199c0de-0001", *entries: Any) -> SessionStore:
    store, _file = repo.place(CWD, session_id, "2026-01-01T00:00:00.000Z")
    store.create([{**HEADER, "id": session_id}, *(entries or [entry(1, None)])])
    store.lock_timeout = 0.5  # type: ignore[attr-defined]
    return store


def ids(store: SessionStore) -> list[Any]:
    return [e.get("id") for e in store.load().entries[1:]]


def test_stores_implement_the_protocols(conformance_repository: SessionRepository) -> None:
    assert isinstance(conformance_repository, SessionRepository)
    store = new_store(conformance_repository)
    assert isinstance(store, SessionStore)
    assert store.exists() and store.read_header() == HEADER


def test_create_is_exclusive(conformance_repository: SessionRepository) -> None:
    store = new_store(conformance_repository)
    with pytest.raises(FileExistsError):
        store.create([HEADER])
    assert ids(store) == ["e1"]


def test_every_write_and_read_returns_the_tail(conformance_repository: SessionRepository) -> None:
    store = new_store(conformance_repository)
    loaded = store.load()
    assert loaded.valid and loaded.tail == store.tail()
    tail = store.append([entry(2, "e1")], expect=loaded.tail)
    assert tail == store.tail() and tail != loaded.tail
    assert store.load().tail == tail


def test_an_append_is_all_or_nothing(conformance_repository: SessionRepository) -> None:
    """A batch that cannot be stored whole leaves nothing of it behind."""
    store = new_store(conformance_repository)
    before = conformance_repository.export_bytes(HEADER["id"])
    with pytest.raises(TypeError):
        store.append([entry(2, "e1"), {"type": "custom", "id": "bad", "data": object()}, entry(3, "e2")])
    assert conformance_repository.export_bytes(HEADER["id"]) == before
    assert ids(store) == ["e1"]


def test_racing_batches_never_interleave(conformance_repository: SessionRepository) -> None:
    store = new_store(conformance_repository)
    store.lock_timeout = 30.0  # type: ignore[attr-defined]
    start = threading.Barrier(4)

    def writer(w: int) -> None:
        start.wait()
        for b in range(5):
            store.append([{"type": "custom", "id": f"w{w}b{b}n{n}", "parentId": None} for n in range(6)])

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    written = ids(store)[1:]
    assert len(written) == 4 * 5 * 6
    batches = [written[i:i + 6] for i in range(0, len(written), 6)]
    for batch in batches:  # each batch lies whole and in order, however the threads ran
        prefix = batch[0][: batch[0].index("n")]
        assert batch == [f"{prefix}n{n}" for n in range(6)]


def test_a_stale_tail_is_refused_and_nothing_is_written(conformance_repository: SessionRepository) -> None:
    store = new_store(conformance_repository)
    seen = store.load().tail
    assert seen is not None
    store.append([entry(2, "e1")])  # another writer
    before = conformance_repository.export_bytes(HEADER["id"])
    with pytest.raises(StaleSessionError):
        store.append([entry(3, "e1"), entry(4, "e3")], expect=seen)
    assert conformance_repository.export_bytes(HEADER["id"]) == before


def test_a_replaced_log_makes_every_old_tail_stale(conformance_repository: SessionRepository) -> None:
    store = new_store(conformance_repository)
    seen = store.load().tail
    assert seen is not None
    store.replace([HEADER, entry(1, None), entry(2, "e1")])
    assert store.read_since(seen) is None  # not an extension of what was seen: reload
    with pytest.raises(StaleSessionError):
        store.append([entry(3, "e2")], expect=seen)
    assert ids(store) == ["e1", "e2"]


def test_incremental_reads_return_only_what_was_appended(conformance_repository: SessionRepository) -> None:
    store = new_store(conformance_repository)
    first = store.load(lazy=True).tail
    assert first is not None
    empty = store.read_since(first)
    assert empty is not None and empty.entries == [] and empty.tail == first
    after = store.append([entry(2, "e1"), entry(3, "e2", role="assistant")])
    other = conformance_repository.store(HEADER["id"])  # a second reader of the same session
    for lazy in (False, True):
        got = other.read_since(first, lazy=lazy)
        assert got is not None and got.tail == after
        assert [e.get("id") if isinstance(e, dict) else e.id for e in got.entries] == ["e2", "e3"]
    got = store.read_since(first)
    assert got is not None and [e["message"]["content"] for e in got.entries] == ["m2", "m3"]
    again = store.read_since(after)
    assert again is not None and again.entries == [] and again.tail == after


def test_the_writer_section_excludes_other_writers(conformance_repository: SessionRepository) -> None:
    """Another writer's append made while the section is held either waits for its end or is
    refused (SessionLockedError, after the store's lock timeout): it never lands inside it."""
    store = new_store(conformance_repository)
    outcome: list[BaseException | Tail] = []
    started = threading.Event()

    def other_writer() -> None:
        other = conformance_repository.store(HEADER["id"])
        other.lock_timeout = 0.2  # type: ignore[attr-defined]
        started.set()
        try:
            outcome.append(other.append([entry(9, "e1")]))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=other_writer)
    with store.writer() as tail:
        assert tail == store.tail()
        inside = store.append([entry(2, "e1")], expect=tail)  # the holder's appends do not wait
        thread.start()
        started.wait()
        store.append([entry(3, "e2")], expect=inside)  # nobody got in between
    thread.join()
    [result] = outcome
    if isinstance(result, Tail):
        assert ids(store) == ["e1", "e2", "e3", "e9"]
    else:
        assert isinstance(result, SessionLockedError)
        assert ids(store) == ["e1", "e2", "e3"]
    with store.writer():  # released: a section can be had again, and appends go through
        pass
    store.append([entry(10, "e3")])
    assert ids(store)[-1] == "e10"


async def test_the_async_writer_section_never_blocks_the_event_loop(
        conformance_repository: SessionRepository) -> None:
    """While another thread holds the section, `awriter` waits and the loop keeps running: the
    ticker below is what releases the other holder, so a blocked loop would never get the lock."""
    store = new_store(conformance_repository)
    store.lock_timeout = 60.0  # type: ignore[attr-defined]
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with conformance_repository.store(HEADER["id"]).writer():
            held.set()
            release.wait(60)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        await asyncio.to_thread(held.wait, 60)
        acquired = asyncio.Event()

        async def write() -> None:
            async with store.awriter() as tail:
                acquired.set()
                store.append([entry(2, "e1")], expect=tail)  # inside the section: no second wait

        task = asyncio.create_task(write())
        for _ in range(20):
            await asyncio.sleep(0.001)
        assert not acquired.is_set()
        release.set()
        await asyncio.wait_for(task, 60)
    finally:
        release.set()
        await asyncio.to_thread(thread.join)
    assert ids(store) == ["e1", "e2"]


def test_try_writer_refuses_at_once_while_another_writer_holds_the_section(
        conformance_repository: SessionRepository) -> None:
    """`try_writer()` never waits: with the section held by another writer it raises
    SessionLockedError on entering (a store that waited would get the section once the holder
    lets go, after its `release.wait` below, and not raise); free, it is the writer section."""
    store = new_store(conformance_repository)
    store.lock_timeout = 60.0  # type: ignore[attr-defined]
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with conformance_repository.store(HEADER["id"]).writer():
            held.set()
            release.wait(20)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(60)
        with pytest.raises(SessionLockedError), store.try_writer():
            pass
    finally:
        release.set()
        thread.join()
    with store.try_writer() as tail:
        assert tail == store.tail()
        store.append([entry(2, "e1")], expect=tail)  # the holder's appends do not wait
        with store.try_writer(), store.writer():  # reentrant, as writer()
            store.append([entry(3, "e2")])
    assert ids(store) == ["e1", "e2", "e3"]
    with store.writer():  # released at its end
        pass


def test_listing_facts(conformance_repository: SessionRepository) -> None:
    store = new_store(conformance_repository, "0199c0de-0002", entry(1, None, "  first question  "),
                      entry(2, "e1", "answer", role="assistant"),
                      {"type": "session_info", "id": "n1", "parentId": "e2", "name": "old name"})
    store.append([{"type": "session_info", "id": "n2", "parentId": "n1", "name": " new name "},
                  {"type": "message", "id": "t1", "parentId": "n2", "timestamp": "2026-01-01T00:00:02.000Z",
                   "message": {"role": "toolResult", "content": "x", "timestamp": 1_900_000_000_000}},
                  [1, 2], "a string"])
    facts = store.facts()
    assert facts is not None
    assert facts.header == {**HEADER, "id": "0199c0de-0002"}
    assert (facts.name, facts.message_count, facts.entry_count) == ("new name", 3, 5)
    assert facts.first_message == "  first question  "
    assert facts.last_activity_ms == 1_767_225_600_002  # user/assistant messages only
    [info] = conformance_repository.list(CWD)
    assert (info.id, info.name, info.message_count, info.entry_count) == ("0199c0de-0002", "new name", 3, 5)
    assert info.modified.timestamp() * 1000 == pytest.approx(1_767_225_600_002)
    assert conformance_repository.list("/elsewhere") == []


@pytest.mark.parametrize("name", list(ODD_FILES))
def test_import_and_export_are_byte_identical(conformance_repository: SessionRepository, name: str) -> None:
    data = ODD_FILES[name]
    session_id = conformance_repository.import_bytes(data)
    assert conformance_repository.export_bytes(session_id) == data
    store = conformance_repository.store(session_id)
    expected = parse_session_bytes(data)  # the store reads what the JSONL parser reads
    for lazy in (False, True):
        loaded = store.load(lazy=lazy)
        assert [e if isinstance(e, dict) or not hasattr(e, "parse") else e.parse() for e in loaded.entries] \
            == expected.entries
        assert [(s.line, s.torn) for s in loaded.skipped] == [(s.line, s.torn) for s in expected.skipped]


def test_an_append_after_import_closes_a_torn_line_first(conformance_repository: SessionRepository) -> None:
    data = ODD_FILES["a torn last line"]
    session_id = conformance_repository.import_bytes(data)
    store = conformance_repository.store(session_id)
    store.append([{"type": "custom", "id": "c2", "parentId": "c1"}])
    assert conformance_repository.export_bytes(session_id) == data + b'\n{"type":"custom","id":"c2","parentId":"c1"}\n'
    assert ids(store) == ["c1", "c2"]

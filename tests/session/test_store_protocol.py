"""The SessionStore contract, on the JSONL store: tails, optimistic appends, incremental reads,
the asyncio writer section, non-regular files refused before opening."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from picontext.errors import SessionFormatError, StaleSessionError
from picontext.session.manager import SessionManager
from picontext.session.protocol import SessionStore, Tail
from picontext.session.store import JsonlSessionStore

HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w"}


def _entry(i: int, parent: str | None) -> dict[str, Any]:
    return {"type": "message", "id": f"e{i}", "parentId": parent, "timestamp": "2025-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": f"m{i}", "timestamp": i}}


def _new(tmp_path: Path) -> JsonlSessionStore:
    store = JsonlSessionStore(str(tmp_path / "s.jsonl"))
    store.create([HEADER, _entry(1, None)])
    return store


def test_jsonl_store_implements_the_protocol(tmp_path: Path) -> None:
    assert isinstance(_new(tmp_path), SessionStore)


def test_every_write_returns_the_new_tail(tmp_path: Path) -> None:
    store = _new(tmp_path)
    loaded = store.load()
    assert loaded.tail == store.tail()
    tail = store.append([_entry(2, "e1")], expect=loaded.tail)
    assert tail == store.tail() and tail.offset == os.path.getsize(store.path)


def test_stale_append_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    store = _new(tmp_path)
    seen = store.load().tail
    assert seen is not None
    store.append([_entry(2, "e1")])  # another writer
    before = Path(store.path).read_bytes()
    with pytest.raises(StaleSessionError, match="changed since it was read"):
        store.append([_entry(3, "e1"), _entry(4, "e3")], expect=seen)
    assert Path(store.path).read_bytes() == before


def test_replaced_file_makes_the_tail_stale(tmp_path: Path) -> None:
    store = _new(tmp_path)
    seen = store.load().tail
    assert seen is not None
    store.replace([HEADER, _entry(1, None)])  # same bytes, another file
    assert store.tail() != seen
    assert store.read_since(seen) is None
    with pytest.raises(StaleSessionError):
        store.append([_entry(2, "e1")], expect=seen)


def test_read_since_returns_only_complete_appended_lines(tmp_path: Path) -> None:
    store = _new(tmp_path)
    seen = store.load().tail
    assert seen is not None
    line2 = json.dumps(_entry(2, "e1"), separators=(",", ":")).encode()
    with open(store.path, "ab") as f:  # a writer in the middle of its line
        f.write(line2 + b"\n" + line2[:10])
    delta = store.read_since(seen)
    assert delta is not None and [e["id"] for e in delta.entries] == ["e2"]
    assert delta.tail == Tail(seen.generation, seen.offset + len(line2) + 1)
    with open(store.path, "ab") as f:
        f.write(line2[10:].replace(b'"e2"', b'"e3"') + b"\n")
    assert delta.tail is not None
    rest = store.read_since(delta.tail)
    assert rest is not None and [e["id"] for e in rest.entries] == ["e3"]
    assert rest.tail == store.tail()


def test_read_since_after_a_torn_tail_skips_the_torn_line_as_a_whole_read_does(tmp_path: Path) -> None:
    store = _new(tmp_path)
    with open(store.path, "ab") as f:
        f.write(b'{"type":"message","id":"tor')  # a crash mid-line
    seen = store.load().tail
    assert seen is not None
    with open(store.path, "ab") as f:  # a careless writer continues right after the fragment
        f.write(json.dumps(_entry(5, "e1")).encode() + b"\n" + json.dumps(_entry(6, "e1")).encode() + b"\n")
    delta = store.read_since(seen)
    whole = [e.get("id") for e in store.load().entries[1:]]
    assert delta is not None and [e["id"] for e in delta.entries] == ["e6"]
    assert whole == ["e1", "e6"]


def test_truncated_file_is_not_extended(tmp_path: Path) -> None:
    store = _new(tmp_path)
    store.append([_entry(2, "e1")])
    seen = store.tail()
    assert seen is not None
    os.truncate(store.path, seen.offset - 5)
    assert store.read_since(seen) is None


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_non_regular_files_are_refused_before_opening(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "s.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path = Path("/dev/zero")  # opening would succeed; reading would never end
    store = JsonlSessionStore(str(path))
    outcome: list[Any] = []

    def read() -> None:
        for call in (store.load, store.read_header, store.facts):
            try:
                call()
                outcome.append("read")
            except SessionFormatError as exc:
                outcome.append(str(exc))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(20)  # a FIFO opened for reading would block here forever
    assert not reader.is_alive()
    assert len(outcome) == 3
    for message in outcome:
        assert message.startswith("not a regular file (") and message.endswith(str(path))
        assert "\n" not in message


HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.readline()
"""


async def test_awriter_waits_without_blocking_the_event_loop(tmp_path: Path) -> None:
    store = _new(tmp_path)
    holder = await asyncio.create_subprocess_exec(sys.executable, "-c", HOLDER, store.path,
                                                  stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert (await holder.stdout.readline()).strip() == b"locked"
        ticks = 0
        acquired = asyncio.Event()

        async def write() -> None:
            async with store.awriter() as tail:
                acquired.set()
                store.append([_entry(2, "e1")], expect=tail)  # inside the section: no second wait

        task = asyncio.create_task(write())
        while ticks < 20:  # the loop keeps running while the lock is held elsewhere
            await asyncio.sleep(0.01)
            ticks += 1
        assert not acquired.is_set()
        holder.stdin.write(b"go\n")
        await holder.stdin.drain()
        await asyncio.wait_for(task, 20)
    finally:
        if holder.returncode is None:
            holder.kill()
        await holder.wait()
    assert [e.get("id") for e in store.load().entries[1:]] == ["e1", "e2"]


def test_second_manager_takes_in_foreign_entries_and_keeps_file_order(tmp_path: Path) -> None:
    first = SessionManager.create(str(tmp_path), str(tmp_path))
    first.append_message({"role": "user", "content": "hi", "timestamp": 1})
    first.append_message({"role": "assistant", "content": [], "api": "x", "provider": "p", "model": "m",
                          "usage": {}, "stopReason": "stop", "timestamp": 2})
    path = first.get_session_file()
    assert path is not None
    warnings: list[str] = []
    second = SessionManager.open(path, warn=warnings.append)
    leaf = second.get_leaf_id()
    foreign = first.append_message({"role": "user", "content": "from first", "timestamp": 3})
    mine = second.append_message({"role": "user", "content": "from second", "timestamp": 4})
    assert any("by another writer" in w for w in warnings)
    on_disk = [json.loads(x)["id"] for x in Path(path).read_text().splitlines()[1:]]
    assert on_disk[-2:] == [foreign, mine]
    assert [e["id"] for e in second.get_entries()] == on_disk  # memory in file order
    assert second.get_entry(mine)["parentId"] == leaf  # the leaf did not jump to the foreign entry
    assert second.get_entry(foreign) is not None


def test_strict_section_refuses_after_a_foreign_append(tmp_path: Path) -> None:
    first = SessionManager.create(str(tmp_path), str(tmp_path))
    first.append_message({"role": "user", "content": "hi", "timestamp": 1})
    first.append_message({"role": "assistant", "content": [], "api": "x", "provider": "p", "model": "m",
                          "usage": {}, "stopReason": "stop", "timestamp": 2})
    path = first.get_session_file()
    assert path is not None
    second = SessionManager.open(path)
    first.append_message({"role": "user", "content": "meanwhile", "timestamp": 3})
    before = Path(path).read_bytes()
    with pytest.raises(StaleSessionError), second.exclusive():
        second.append_message({"role": "user", "content": "planned on old data", "timestamp": 4})
    assert Path(path).read_bytes() == before

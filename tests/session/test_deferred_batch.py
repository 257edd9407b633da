"""`SessionManager.batch(wait=False)`: a batch that finds the session held by another writer does
not wait for it; its entries stay in memory and are written before anything else at the next
write (synchronous or asyncio), after whatever the other writer appended meanwhile.

The other writer here is another open file description holding the file's flock (what another
process holds), taken and released by the test itself.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from picontext.errors import SessionLockedError
from picontext.session.manager import SessionManager
from picontext.session.store import JsonlSessionStore

ASSISTANT = {"role": "assistant", "content": [], "api": "x", "provider": "p", "model": "m", "usage": {},
             "stopReason": "stop", "timestamp": 2}


def _session(tmp_path: Path) -> tuple[SessionManager, Path]:
    sm = SessionManager.create(str(tmp_path), str(tmp_path))
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message(ASSISTANT)
    path = Path(sm.get_session_file() or "")
    return SessionManager.open(str(path), str(tmp_path)), path


@contextmanager
def held(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        yield fd
    finally:
        os.close(fd)


def stored(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()][1:]


def _settings(sm: SessionManager) -> list[str]:
    return [sm.append_model_change("p", "m2"), sm.append_thinking_level_change("high")]


def test_a_free_session_is_written_at_the_end_of_the_batch(tmp_path: Path) -> None:
    sm, path = _session(tmp_path)
    with sm.batch(wait=False):
        ids = _settings(sm)
    assert sm.pending_writes() == 0
    assert [e["id"] for e in stored(path)][-2:] == ids


def test_a_held_session_keeps_the_batch_in_memory_and_the_next_write_stores_it_first(tmp_path: Path) -> None:
    sm, path = _session(tmp_path)
    before = path.read_bytes()
    leaf = sm.get_leaf_id()
    with held(path):
        with sm.batch(wait=False):  # would wait 30 s (lock_timeout) and raise if it waited
            model_id, thinking_id = _settings(sm)
        assert path.read_bytes() == before
        assert sm.pending_writes() == 2
        projection = sm.build_session_projection()  # memory has them: reads and projections agree
        assert projection.thinking_level == "high" and projection.model == {"provider": "p", "modelId": "m2"}
    message_id = sm.append_message({"role": "user", "content": "next", "timestamp": 3})
    assert sm.pending_writes() == 0
    after = stored(path)
    assert [e["id"] for e in after[-3:]] == [model_id, thinking_id, message_id]
    assert [e["parentId"] for e in after[-3:]] == [leaf, model_id, thinking_id]
    assert SessionManager.open(str(path)).get_entries() == sm.get_entries()


def test_entries_the_other_writer_appended_go_first_and_keep_their_own_branch(tmp_path: Path) -> None:
    warnings: list[str] = []
    sm, path = _session(tmp_path)
    sm = SessionManager.open(str(path), str(tmp_path), warn=warnings.append)
    leaf = sm.get_leaf_id()
    foreign = {"type": "custom", "id": "f0000001", "parentId": leaf, "timestamp": "2026-01-01T00:00:00.000Z",
               "customType": "other", "data": {}}
    with held(path) as fd:
        with sm.batch(wait=False):
            model_id, thinking_id = _settings(sm)
        os.write(fd, (json.dumps(foreign, separators=(",", ":")) + "\n").encode())
    sm.branch(leaf)  # the user navigated (no write): the next entry continues from there
    message_id = sm.append_message({"role": "user", "content": "next", "timestamp": 3})
    after = stored(path)
    assert [e["id"] for e in after[-4:]] == ["f0000001", model_id, thinking_id, message_id]
    assert [e["parentId"] for e in after[-4:]] == [leaf, leaf, model_id, leaf]
    assert [e["id"] for e in sm.get_entries()] == [e["id"] for e in after]  # memory in file order
    assert any("by another writer" in w for w in warnings)


def test_a_strict_section_finds_them_written_and_the_other_writer_s_entries_taken_in(tmp_path: Path) -> None:
    """A compaction (a strict section) right after: not refused as stale, because the deferred
    write caught up with the other writer first."""
    _sm, path = _session(tmp_path)
    sm = SessionManager.open(str(path), str(tmp_path), warn=lambda _message: None)  # the catch-up warns
    with held(path) as fd:
        with sm.batch(wait=False):
            _settings(sm)
        os.write(fd, b'{"type":"custom","id":"f0000002","parentId":null,"customType":"o","data":{}}\n')
    with sm.exclusive(strict=True):
        sm.append_custom_entry("compaction-stand-in")
    assert [e["type"] for e in stored(path)][-4:] == ["custom", "model_change", "thinking_level_change", "custom"]


async def test_an_async_section_writes_them_first_without_blocking_the_loop(tmp_path: Path) -> None:
    sm, path = _session(tmp_path)
    with held(path):
        with sm.batch(wait=False):
            _settings(sm)
        writing = asyncio.ensure_future(sm.awrite_pending())
        for _ in range(20):  # the loop runs while the write waits for the lock
            await asyncio.sleep(0.001)
        assert not writing.done() and sm.pending_writes() == 2
    await writing
    assert sm.pending_writes() == 0
    assert [e["type"] for e in stored(path)][-2:] == ["model_change", "thinking_level_change"]
    async with sm.aexclusive(strict=False):
        sm.append_message({"role": "user", "content": "next", "timestamp": 3})
    assert [e["type"] for e in stored(path)][-3:] == ["model_change", "thinking_level_change", "message"]


def test_a_write_that_times_out_waiting_leaves_them_pending_for_the_next_one(tmp_path: Path) -> None:
    _sm, path = _session(tmp_path)
    sm = SessionManager.open_store(JsonlSessionStore(str(path), lock_timeout=0.05), file=str(path))
    before = sm.get_entries()
    with held(path):
        with sm.batch(wait=False):
            _settings(sm)
        with pytest.raises(SessionLockedError):
            sm.append_message({"role": "user", "content": "next", "timestamp": 3})
        assert sm.pending_writes() == 2  # the section was never had: still pending
    sm.append_message({"role": "user", "content": "next", "timestamp": 3})
    assert [e["type"] for e in stored(path)][-3:] == ["model_change", "thinking_level_change", "message"]
    assert len(sm.get_entries()) == len(before) + 3


class _StoreWithoutTry:
    """A third-party store written before `try_writer` joined the protocol."""

    def __init__(self, inner: JsonlSessionStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "try_writer":
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_store_without_try_writer_defers_the_batch_instead_of_failing(tmp_path: Path) -> None:
    _, path = _session(tmp_path)
    sm = SessionManager.open_store(_StoreWithoutTry(JsonlSessionStore(str(path))), file=str(path),  # type: ignore[arg-type]
                                   session_dir=str(tmp_path))
    before = path.read_bytes()
    with sm.batch(wait=False):
        model_id, thinking_id = _settings(sm)
    assert path.read_bytes() == before and sm.pending_writes() == 2
    message_id = sm.append_message({"role": "user", "content": "next", "timestamp": 3})
    assert [e["id"] for e in stored(path)[-3:]] == [model_id, thinking_id, message_id]

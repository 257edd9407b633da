"""Mask compaction writes all its context edits in one all-or-nothing batch."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from compaction_fixtures import tool_session

import picontext.session.store as store_mod
from picontext.compaction.compact import compact_session
from picontext.compaction.settings import CompactionSettings
from picontext.errors import SessionWriteError
from picontext.session.manager import SessionManager


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


SMALL = CompactionSettings(reserve_tokens=2000, keep_recent_tokens=1500)


def _disk_with_room_for(monkeypatch: pytest.MonkeyPatch, free: int) -> None:
    """os.write in the store as on a disk with `free` bytes left: partial write, then ENOSPC."""
    real_write = os.write
    left = [free]

    def write(fd: int, data: Any) -> int:
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        chunk = bytes(data)[: left[0]]
        left[0] -= len(chunk)
        return real_write(fd, chunk)

    monkeypatch.setattr(store_mod.os, "write", write)


async def test_full_disk_during_mask_leaves_no_mask_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = tool_session(tmp_path, turns=12)
    path = manager.get_session_file()
    assert path is not None
    before = _read(path)
    entries_before = len(manager.get_entries())
    context_before = json.dumps(manager.build_session_context(), default=list)
    _disk_with_room_for(monkeypatch, 2 * 700)  # enough for two or three edit lines, not for all
    with pytest.raises(SessionWriteError):
        await compact_session(manager, strategy="mask", settings=SMALL)
    monkeypatch.undo()
    assert _read(path) == before
    assert len(manager.get_entries()) == entries_before
    assert json.dumps(manager.build_session_context(), default=list) == context_before
    # and it works once there is room again, all masks at once
    outcome = await compact_session(manager, strategy="mask", settings=SMALL)
    assert outcome.masked >= 5
    reopened = SessionManager.open(path)
    edits = [e for e in reopened.get_entries() if e["type"] == "context_edit"]
    assert len(edits) == outcome.masked


async def test_masks_are_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = tool_session(tmp_path, turns=12)
    real_write = os.write
    calls: list[int] = []

    def write(fd: int, data: Any) -> int:
        calls.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(store_mod.os, "write", write)
    outcome = await compact_session(manager, strategy="mask", settings=SMALL)
    assert outcome.masked >= 5 and len(calls) == 1


async def test_manager_opened_from_an_earlier_read_refuses_lines_appended_since(tmp_path: Path) -> None:
    """`picontext compact` reads the file once and opens the manager from that read: a line
    another writer appended between the read and the open must not be forked over."""
    from picontext.errors import SessionChanged
    from picontext.session.store import JsonlSessionStore

    path = tool_session(tmp_path, turns=12).get_session_file()
    assert path is not None
    read = JsonlSessionStore(path).load(lazy=True)
    foreign = {"type": "custom", "customType": "pi", "id": "f0f0f0f0", "parentId": None,
               "timestamp": "2026-03-01T10:00:00.000Z"}
    _write(path, _read(path) + json.dumps(foreign, separators=(",", ":")).encode() + b"\n")
    after_foreign = _read(path)
    manager = SessionManager.open(path, loaded=read)
    assert manager.get_entry("f0f0f0f0") is None  # what was read, not read again
    with pytest.raises(SessionChanged):
        await compact_session(manager, strategy="mask", settings=SMALL)
    assert _read(path) == after_foreign


async def test_manager_opened_from_a_read_writes_the_same_masks(tmp_path: Path) -> None:
    from picontext.session.store import JsonlSessionStore

    path = tool_session(tmp_path, turns=12).get_session_file()
    assert path is not None
    original = _read(path)
    fresh = await compact_session(SessionManager.open(path), strategy="mask", settings=SMALL)
    _write(path, original)
    from_read = await compact_session(SessionManager.open(path, loaded=JsonlSessionStore(path).load(lazy=True)),
                                      strategy="mask", settings=SMALL)
    assert from_read.masked == fresh.masked >= 5
    assert (from_read.tokens_before, from_read.tokens_after) == (fresh.tokens_before, fresh.tokens_after)
    targets = [e["targetId"] for e in SessionManager.open(path).get_entries() if e["type"] == "context_edit"]
    assert len(targets) == from_read.masked

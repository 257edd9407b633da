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
    context_before = json.dumps(manager.build_session_context())
    _disk_with_room_for(monkeypatch, 2 * 700)  # enough for two or three edit lines, not for all
    with pytest.raises(SessionWriteError):
        await compact_session(manager, strategy="mask", settings=SMALL)
    monkeypatch.undo()
    assert _read(path) == before
    assert len(manager.get_entries()) == entries_before
    assert json.dumps(manager.build_session_context()) == context_before
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

"""A new session whose first write finds it already stored: its own create whose answer was lost
(it did store), or another process that created the same new file first. The session joins what
is stored, appending only the entries whose ids are not stored yet, after the tail it read
(SessionWriter._join; docs/storage.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from picontext._clock import FrozenClock, RandomIds, SequentialIds
from picontext.session.manager import SessionManager


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()[1:]]


def _opening(manager: SessionManager) -> None:
    manager.append_model_change("p", "m")
    manager.append_message({"role": "user", "content": "q1", "timestamp": 1})
    manager.append_message({"role": "assistant", "content": [{"type": "text", "text": "a1"}], "timestamp": 2})


def _open(path: Path, **kw: Any) -> SessionManager:
    return SessionManager.open(str(path), clock=FrozenClock(), **kw)


def test_an_opening_already_stored_is_not_stored_again(tmp_path: Path) -> None:
    """The file already holds this very opening (same ids), as after a create that did store but
    reported a failure: nothing of it is written twice, and the session goes on after it."""
    path = tmp_path / "s.jsonl"
    first = _open(path, ids=SequentialIds())
    again = _open(path, ids=SequentialIds())  # opened before the file existed: the same new session
    _opening(first)
    _opening(again)
    assert _ids(path) == [e["id"] for e in first.get_entries()]  # stored once
    again.append_message({"role": "user", "content": "q2", "timestamp": 3})
    ids = _ids(path)
    assert len(ids) == len(set(ids)) == 4
    assert SessionManager.open(str(path)).build_session_context() == again.build_session_context()


def test_two_processes_creating_one_new_file_keep_both_conversations(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = _open(path, ids=SequentialIds())
    second = _open(path, ids=RandomIds())
    second.append_message({"role": "user", "content": "other", "timestamp": 1})
    _opening(first)
    second.append_message({"role": "assistant", "content": [{"type": "text", "text": "b"}], "timestamp": 2})
    first.append_message({"role": "user", "content": "q2", "timestamp": 3})  # after the other's lines
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    ids = [e["id"] for e in lines[1:]]
    assert len(ids) == len(set(ids)) == 6
    assert all(e["parentId"] is None or e["parentId"] in ids for e in lines[1:])
    reopened = SessionManager.open(str(path))
    assert [m["content"] for m in reopened.build_session_context()["messages"]] == ["q1", [
        {"type": "text", "text": "a1"}], "q2"]
    assert reopened.get_branch(second.get_leaf_id())[0]["parentId"] is None  # the second root

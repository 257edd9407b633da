"""The JSONL index cache: never needed for correctness; where it and the file disagree, the file
wins (truncated by hand, replaced by another file, torn last line); extended, not rebuilt, when
the file only grew."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest

from picontext.session import jsonl_index
from picontext.session.listing import list_all_sessions
from picontext.session.manager import SessionManager
from picontext.session.store import JsonlSessionStore, scan_listing_facts


def _session(tmp_path: Path, name: str, turns: int) -> str:
    sm = SessionManager.create("/w", str(tmp_path), id=name)
    for i in range(turns):
        sm.append_message({"role": "user", "content": f"{name} question {i}", "timestamp": 1000 + i})
        sm.append_message({"role": "assistant", "content": [{"type": "text", "text": "ok"}], "api": "a",
                           "provider": "p", "model": "m", "usage": {}, "stopReason": "stop", "timestamp": 2000 + i})
    sm.append_session_info(f"name of {name}")
    path = sm.get_session_file()
    assert path is not None
    return path


def _facts(path: str) -> Any:
    facts = JsonlSessionStore(path).facts()
    return None if facts is None else dataclasses.asdict(facts)


def _truth(path: str) -> Any:
    facts = scan_listing_facts(path)
    return None if facts is None else dataclasses.asdict(facts)


@pytest.fixture
def rebuilds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = jsonl_index.new_index

    def counting(st: os.stat_result) -> Any:
        calls.append(1)
        return real(st)

    monkeypatch.setattr(jsonl_index, "new_index", counting)
    return calls


def test_facts_from_the_index_equal_a_whole_read(tmp_path: Path, rebuilds: list[int]) -> None:
    path = _session(tmp_path, "s1", 5)
    assert _facts(path) == _truth(path)
    assert os.path.exists(jsonl_index.index_path(os.path.realpath(path)))
    assert rebuilds == [1]
    facts = _facts(path)  # second time: from the index alone
    assert facts == _truth(path) and rebuilds == [1]
    assert facts["message_count"] == 10 and facts["name"] == "name of s1"
    assert facts["first_message"] == "s1 question 0"


def test_the_index_is_never_needed(tmp_path: Path) -> None:
    path = _session(tmp_path, "s1", 3)
    _facts(path)
    Path(jsonl_index.index_path(os.path.realpath(path))).write_bytes(b"\x00garbage")
    assert _facts(path) == _truth(path)


def test_appends_extend_the_index(tmp_path: Path, rebuilds: list[int]) -> None:
    path = _session(tmp_path, "s1", 3)
    _facts(path)
    sm = SessionManager.open(path)
    sm.append_message({"role": "user", "content": "later", "timestamp": 9000})
    assert _facts(path) == _truth(path)
    assert _facts(path)["message_count"] == 7
    assert rebuilds == [1]  # extended, not rebuilt


def test_file_truncated_by_hand_rebuilds(tmp_path: Path, rebuilds: list[int]) -> None:
    path = _session(tmp_path, "s1", 4)
    _facts(path)
    lines = Path(path).read_bytes().split(b"\n")
    Path(path).write_bytes(b"\n".join(lines[:4]) + b"\n")  # same file, shorter
    assert _facts(path) == _truth(path)
    assert _facts(path)["message_count"] == 3
    assert rebuilds == [1, 1]


def test_file_truncated_and_regrown_past_the_old_size_rebuilds(tmp_path: Path, rebuilds: list[int]) -> None:
    path = _session(tmp_path, "s1", 4)
    _facts(path)
    data = Path(path).read_bytes()
    with open(path, "r+b") as f:  # rewritten in place: same inode, longer, different content
        f.write(data.replace(b"question", b"QUESTION") + b'{"type":"label","id":"zz","parentId":null}\n')
    assert _facts(path) == _truth(path)
    assert _facts(path)["first_message"] == "s1 QUESTION 0"
    assert rebuilds == [1, 1]


def test_file_replaced_by_another_rebuilds(tmp_path: Path, rebuilds: list[int]) -> None:
    path = _session(tmp_path, "s1", 4)
    other = _session(tmp_path, "s2", 6)
    _facts(path)
    os.replace(other, path)
    assert _facts(path) == _truth(path)
    assert _facts(path)["header"]["id"] == "s2"
    assert rebuilds == [1, 1]


def test_torn_last_line(tmp_path: Path) -> None:
    path = _session(tmp_path, "s1", 2)
    _facts(path)
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"t1","parentId":null,"message":{"role":"user","cont')
    assert _facts(path) == _truth(path)
    assert _facts(path)["message_count"] == 4
    with open(path, "ab") as f:  # the writer finishes its line
        f.write(b'ent":"done","timestamp":5}}\n')
    assert _facts(path) == _truth(path)
    assert _facts(path)["message_count"] == 5


def test_listing_uses_the_index_and_agrees_without_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(5):
        _session(tmp_path, f"s{i}", i + 1)
    with_index = [dataclasses.asdict(i) for i in list_all_sessions(str(tmp_path))]
    again = [dataclasses.asdict(i) for i in list_all_sessions(str(tmp_path))]
    monkeypatch.setenv("PICONTEXT_INDEX", "0")
    without = [dataclasses.asdict(i) for i in list_all_sessions(str(tmp_path))]
    assert with_index == again == without
    assert [i["message_count"] for i in without] == [10, 8, 6, 4, 2]

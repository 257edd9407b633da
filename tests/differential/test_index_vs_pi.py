"""A session indexed by picontext, then appended to by the real Pi reference: listing and the
manager pick Pi's lines up (the index is extended, the file wins)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest

from picontext.session import jsonl_index
from picontext.session.manager import SessionManager
from picontext.session.store import JsonlSessionStore, scan_listing_facts


def test_pi_appends_to_an_indexed_file(pi: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warnings: list[str] = []
    sm = SessionManager.create("/w", str(tmp_path), warn=warnings.append)
    sm.append_message({"role": "user", "content": "first", "timestamp": 1})
    sm.append_message({"role": "assistant", "content": [{"type": "text", "text": "ok"}], "api": "a",
                       "provider": "p", "model": "m", "usage": {}, "stopReason": "stop", "timestamp": 2})
    path = sm.get_session_file()
    assert path is not None
    store = JsonlSessionStore(path)
    assert store.facts() is not None  # indexed now
    rebuilds: list[int] = []
    real_new = jsonl_index.new_index
    monkeypatch.setattr(jsonl_index, "new_index", lambda st: rebuilds.append(1) or real_new(st))

    pi_id = pi.op("json_ops.piAppendUserMessage", path, "from pi")

    facts = store.facts()
    truth = scan_listing_facts(path)
    assert facts is not None and truth is not None
    assert dataclasses.asdict(facts) == dataclasses.asdict(truth)
    assert facts.message_count == 3 and rebuilds == []  # extended, not rebuilt
    assert os.path.exists(jsonl_index.index_path(os.path.realpath(path)))
    # the manager that was open meanwhile takes Pi's line in before its own
    mine = sm.append_message({"role": "user", "content": "from picontext", "timestamp": 3})
    ids = [e["id"] for e in SessionManager.open(path).get_entries()]
    assert ids[-2:] == [pi_id, mine]
    assert any("by another writer" in w for w in warnings)

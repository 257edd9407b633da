"""The export's shortcuts give what the rules they skip would give (issue 20, fourth round).

* A preview whose first 81 characters hold no whitespace run is cut from the text as it is
  (nothing split): it must equal `one_line`'s, for every kind of whitespace at every place
  around the cut.
* The index maps parent ids to positions in C when no parentId can be read otherwise than as a
  plain lookup: the positions must equal `parent_lookup`'s, on sessions with empty, null, falsy
  and repeated ids and parents.
* The models table's sums and the walk's usage anchor read an int `totalTokens` inline: rows and
  estimates must not change for usages out of that shape (checked against `_add_usage` itself).
"""

from __future__ import annotations

import random
import sys
from typing import Any

import pytest

from picontext.compaction.tokens import BranchEstimate, estimate_before
from picontext.session.index import EntryIndex, parent_lookup
from picontext.session.migrations import migrate_to_current
from picontext.viewer.model import _entry_facts, entry_preview

_WHITESPACE = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]


def _texts(rng: random.Random) -> list[str]:
    texts = ["x" * 81, "x" * 80, "x" * 82, " " + "x" * 90, "x" * 80 + " ", "x" * 80 + " y", "x" * 79 + "  y" * 10,
             "word " * 40, "é" * 100, "𝄞" * 100, "", "short text", "a\tb" * 50, "x" * 300 + "\n" + "y" * 300]
    for ws in _WHITESPACE:
        for at in (0, 1, 40, 78, 79, 80, 81, 82, 120):
            base = list("abcdefghij" * 20)
            base[at] = ws
            texts.append("".join(base))
    pieces = ["ab", "c", " ", "  ", "\n", "\u00a0", "\u2028", "é", "x" * 30]
    for _ in range(300):
        texts.append("".join(rng.choice(pieces) for _ in range(40)))
    return texts


def _entries(messages: list[dict[str, Any]]) -> list[Any]:
    entries: list[Any] = [{"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z",
                           "cwd": "/"}]
    parent = None
    for i, message in enumerate(messages):
        entries.append({"type": "message", "id": f"e{i}", "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
                        "message": message})
        parent = f"e{i}"
    return entries


def test_previews_equal_one_line_for_any_whitespace() -> None:
    rng = random.Random(20)
    messages: list[dict[str, Any]] = []
    for text in _texts(rng):
        messages.append({"role": "user", "content": text})
        messages.append({"role": "assistant", "content": [{"type": "thinking", "thinking": text},
                                                          {"type": "text", "text": text}]})
        messages.append({"role": "toolResult", "toolCallId": "c", "toolName": "read",
                         "content": [{"type": "text", "text": text}]})
    file_entries = _entries(messages)
    index = EntryIndex()
    index.load(file_entries)
    facts = _entry_facts(index, index.entries)
    expected = [entry_preview(e) for e in index.entries]
    for got, want, entry in zip(facts.columns["previews"], expected, index.entries, strict=True):
        assert got == want, entry


def _odd_session(rng: random.Random, n: int) -> list[Any]:
    pool: list[Any] = ["", None, 0, False, "a", "b", "e1", "e2", 5, 5.0, True]
    entries: list[Any] = [{"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00Z"}]
    for i in range(n):
        entry: dict[str, Any] = {"type": "label", "timestamp": "2026-01-01T00:00:00Z", "targetId": "x"}
        if rng.random() < 0.9:
            entry["id"] = f"e{i}" if rng.random() < 0.8 else rng.choice(pool)
        if rng.random() < 0.9:
            entry["parentId"] = f"e{rng.randrange(n)}" if rng.random() < 0.7 else rng.choice(pool)
        entries.append(entry)
    return entries


@pytest.mark.parametrize("seed", range(40))
def test_parent_positions_equal_parent_lookup(seed: int) -> None:
    rng = random.Random(seed)
    file_entries = _odd_session(rng, rng.randrange(1, 30))
    if seed % 4 == 0:  # the usual shape too: string ids, string or null parents
        for i, e in enumerate(file_entries[1:]):
            e["id"], e["parentId"] = f"e{i}", (f"e{rng.randrange(i)}" if i and rng.random() < 0.9 else None)
    migrate_to_current(file_entries)
    index = EntryIndex()
    index.load(file_entries)
    by_id: dict[Any, int] = {}
    for position, e in enumerate(index.entries):
        if "id" in e:
            by_id[e["id"]] = position  # the last entry with an id wins
    expected = [parent_lookup(by_id, e.get("parentId")) for e in index.entries]
    assert index.parent_positions() == expected


@pytest.mark.parametrize("odd_id", ["", None])
def test_an_empty_or_null_parent_names_no_entry(odd_id: Any) -> None:
    # String or null parents only (the shape mapped in C), and an entry whose id is "" or null:
    # a parentId "" or null still names no entry (Pi follows only a truthy parentId).
    file_entries: list[Any] = [{"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00Z"}]
    for i, (key, parent) in enumerate([("a", None), (odd_id, "a"), ("b", odd_id), ("c", ""), ("d", "b")]):
        file_entries.append({"type": "label", "id": key, "parentId": parent, "targetId": "x",
                             "timestamp": f"2026-01-01T00:00:0{i}Z"})
    index = EntryIndex()
    index.load(file_entries)
    assert index.parent_positions() == [None, 0, None, None, 2]


def _usage_shapes(rng: random.Random) -> dict[str, Any]:
    usage: dict[str, Any] = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0,
                             "totalTokens": rng.choice([15, 0, -3, 2.5, True, None, "7", 10**20])}
    if rng.random() < 0.3:
        usage["input"] = rng.choice([1.5, True, None])
    if rng.random() < 0.5:
        usage["cost"] = {"total": rng.choice([0.1, 1, True, None, "x"])}
    return usage


@pytest.mark.parametrize("seed", range(10))
def test_usage_shapes_rows_and_estimates(seed: int) -> None:
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = []
    for i in range(40):
        messages.append({"role": "user", "content": f"question {i} " * rng.randrange(1, 20)})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "answer " * rng.randrange(1, 9)}],
                         "provider": rng.choice(["p", "q"]), "model": "m", "usage": _usage_shapes(rng),
                         "stopReason": rng.choice(["stop", "toolUse", "error", "aborted"])})
    file_entries = _entries(messages)
    path = file_entries[1:]
    walk = BranchEstimate()
    for position, entry in enumerate(path):
        assert walk.tokens() == estimate_before(path, position), position
        walk.add(entry)
    index = EntryIndex()
    index.load(file_entries)
    rows = _entry_facts(index, index.entries).columns["models"]
    expected: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message["role"] == "assistant":
            name = f"{message['provider']}/{message['model']}"
            row = expected.setdefault(name, {"model": name, "calls": 0})
            row["calls"] += 1
            for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
                value = message["usage"].get(key)
                if type(value) in (int, float):
                    row[key] = row.get(key, 0) + value
            cost = message["usage"].get("cost")
            if isinstance(cost, dict) and isinstance(cost.get("total"), int | float):
                row["cost"] = row.get("cost", 0) + cost["total"]
    assert rows == sorted(expected.values(), key=lambda r: -r.get("cost", 0))

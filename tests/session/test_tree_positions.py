"""`tree.tree_positions` reads the index's parent positions where they follow the tree's rules;
these sessions hold it equal to the rules themselves (written out below), including the cases
where the two differ: an entry that is its own parent, a falsy parentId ("", 0, false) that names
an entry, duplicate ids, orphans, unhashable ids and parents, non-object entries."""

from __future__ import annotations

import random
from typing import Any

import pytest

from picontext._clock import js_date_ms
from picontext.session.index import EntryIndex
from picontext.session.tree import on_path, path_to, tree_positions


def reference(entries: list[Any]) -> tuple[list[int], dict[int, list[int]]]:
    """The rules: a parentId that is absent or null, is the entry's own id, or names no entry
    makes a root; the last entry with an id is its children's parent; children by timestamp."""
    node_of: dict[Any, int] = {}
    for p, e in enumerate(entries):
        key = e.get("id") if isinstance(e, dict) else None
        try:
            hash(key)
        except TypeError:
            continue
        node_of[key] = p
    node_of.pop(None, None)
    roots: list[int] = []
    children: dict[int, list[int]] = {}
    for p, e in enumerate(entries):
        parent_id = e.get("parentId") if isinstance(e, dict) else None
        try:
            parent = None if parent_id is None else node_of.get(parent_id)
        except TypeError:
            parent = None
        if parent is None or parent_id == (e.get("id") if isinstance(e, dict) else None):
            roots.append(p)
        else:
            children.setdefault(parent, []).append(p)

    def when(p: int) -> float:
        ms = js_date_ms(entries[p].get("timestamp"))
        return ms if ms == ms else 0.0

    for kids in children.values():
        kids.sort(key=when)
    return roots, children


def session(rng: random.Random, n: int, odd: bool) -> list[Any]:
    ids: list[Any] = [f"e{i}" for i in range(n)]
    if odd:
        for _ in range(3):
            ids[rng.randrange(n)] = rng.choice(["", 0, False, None, ["x"], "e1", 5, 5.0])
    entries: list[Any] = [{"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00Z"}]
    for i in range(n):
        if odd and rng.random() < 0.05:
            parent: Any = rng.choice(["", 0, False, None, "nope", ["e0"], ids[i], 5])
        else:
            parent = ids[rng.randrange(i)] if i and rng.random() < 0.3 else (ids[i - 1] if i else None)
        entry = {"type": "message", "id": ids[i], "parentId": parent,
                 "timestamp": f"2026-01-01T00:00:{rng.randrange(60):02d}Z",
                 "message": {"role": "user", "content": "x", "timestamp": 1}}
        if odd and rng.random() < 0.05:
            del entry["id"]
        entries.append(entry)
    if odd:
        entries.insert(1 + rng.randrange(n), ["not", "an", "object"])
    return entries


@pytest.mark.parametrize("odd", [False, True])
def test_tree_positions_follow_the_rules(odd: bool) -> None:
    rng = random.Random(20)
    for _ in range(300):
        file_entries = session(rng, rng.randrange(1, 40), odd)
        index = EntryIndex()
        index.load(file_entries)
        assert tree_positions(index) == reference(index.entries)


def test_own_parent_and_falsy_parent_ids() -> None:
    def msg(entry_id: Any, parent: Any, ts: int = 1) -> dict[str, Any]:
        return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": ts,
                "message": {"role": "user", "content": "x", "timestamp": 1}}

    header = {"type": "session", "version": 3, "id": "s", "timestamp": 0}
    for entries in ([header, msg("a", None), msg("b", "b")],  # its own parent: a root
                    [header, msg("", None), msg("b", "")],  # "" names an entry: a child
                    [header, msg(0, None), msg("b", False)],  # false names the entry with id 0
                    [header, msg("a", None), msg("b", "")]):  # "" names none: a root
        index = EntryIndex()
        index.load(entries)
        assert tree_positions(index) == reference(index.entries)


@pytest.mark.parametrize("odd", [False, True])
def test_on_path_is_membership_in_the_path(odd: bool) -> None:
    """`on_path` walks up from the leaf and stops at the id; it answers as the whole path does,
    parent cycles (a parent written after its child) and duplicate or odd ids included."""
    rng = random.Random(21)
    for _ in range(300):
        file_entries = session(rng, rng.randrange(1, 40), odd)
        if odd and rng.random() < 0.5:  # a parent cycle: an early entry's parent is a later one
            objects = [e for e in file_entries[1:] if isinstance(e, dict) and "id" in e]
            rng.choice(objects)["parentId"] = rng.choice(objects)["id"]
        index = EntryIndex()
        index.load(file_entries)
        ids = [e.get("id") if isinstance(e, dict) else None for e in file_entries]
        for leaf in [None, "missing", *rng.sample(ids, min(5, len(ids)))]:
            path_ids = index.ids_of(path_to(index, leaf))
            for entry_id in [*ids, "missing", None]:
                assert on_path(index, leaf, entry_id) == (entry_id in path_ids), (leaf, entry_id)

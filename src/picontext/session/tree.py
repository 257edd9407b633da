"""The session tree over an `EntryIndex`: root-to-leaf paths and the whole forest.

    path_to(index, leaf)   -> positions root -> leaf (Pi buildSessionPath, on the index)
    tree_positions(index)  -> roots and children as positions (Pi getTree's order)
    build_tree(index)      -> [TreeNode] (Pi getTree: children by timestamp, orphans are roots)

`leaf` is an entry id, None (before the first entry) or `projection.LAST` (the last entry of the
file, when it has no id).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from picontext._clock import js_date_ms
from picontext.session.index import EntryIndex, key_of
from picontext.session.projection import Entry, LeafArg, field_of, hashable

__all__ = ["BranchView", "TreeNode", "build_tree", "path_to", "tree_positions"]


@dataclass(slots=True)
class TreeNode:
    entry: Entry
    children: list[TreeNode] = field(default_factory=list)
    label: str | None = None
    label_timestamp: str | None = None
    position: int = -1  # of the entry in file order (in the index)


def path_to(index: EntryIndex, leaf: LeafArg) -> list[int]:
    """Positions from the root to `leaf`; an unknown leaf means the last entry, as in Pi."""
    start = _leaf_position(index, leaf)
    if start is None:
        return []
    parent_pos = index.parent_positions()
    limit = len(parent_pos)
    path: list[int] = []
    append = path.append
    current: int | None = start
    while current is not None:
        append(current)
        current = parent_pos[current]
        if len(path) > limit:  # longer than the session: a parent cycle (Pi loops forever)
            return _path_without_cycle(parent_pos, start)
    path.reverse()
    return path


def _leaf_position(index: EntryIndex, leaf: LeafArg) -> int | None:
    if leaf is None:
        return None
    start = index.position_of(leaf) if leaf else None
    if start is None and len(index):
        start = len(index) - 1
    return start


def on_path(index: EntryIndex, leaf: LeafArg, entry_id: Any) -> bool:
    """`entry_id in index.ids_of(path_to(index, leaf))`, walking up from the leaf only until it
    meets the id: an entry near the leaf costs a few steps, not the whole branch."""
    current = _leaf_position(index, leaf)
    parent_pos = index.parent_positions()
    id_at = index.id_at
    for _ in range(len(parent_pos) + 1):  # a parent cycle visits its entries again: stop
        if current is None:
            return False
        if id_at(current) == entry_id:
            return True
        current = parent_pos[current]
    return False


def _path_without_cycle(parent_pos: list[int | None], start: int) -> list[int]:
    path: list[int] = []
    seen: set[int] = set()
    current: int | None = start
    while current is not None and current not in seen:
        seen.add(current)
        path.append(current)
        current = parent_pos[current]
    path.reverse()
    return path


def tree_positions(index: EntryIndex) -> tuple[list[int], dict[int, list[int]]]:
    """The forest as positions: the roots, and the children of each position that has any,
    sorted by timestamp (stable). An entry whose parent id is absent or null, is its own id, or
    names no entry is a root; with duplicate ids the last entry with an id is its children's parent.
    """
    parents = index.parent_positions()
    # The index's parent positions follow the same rules except for a parentId that is the
    # entry's own id and a falsy parentId ("", 0, false) naming an entry: with unique ids (its own
    # id then names the entry itself) and no falsy id, read them (built once per load; the
    # export's branch already needed them) instead of every entry.
    if (index.ids_unique() and index.position_of("") is None and index.position_of(0) is None
            and not any(map(operator.eq, parents, range(len(parents))))):
        roots: list[int] = []
        children: dict[int, list[int]] = {}
        for p, parent in enumerate(parents):
            if parent is None:
                roots.append(p)
                continue
            found = children.get(parent)
            if found is None:
                children[parent] = [p]
            else:
                found.append(p)
        entry = index.entry
        for kids in children.values():
            if len(kids) > 1:
                kids.sort(key=lambda p: _timestamp_ms(entry(p)))
        return roots, children
    return _tree_positions(index)


def _tree_positions(index: EntryIndex) -> tuple[list[int], dict[int, list[int]]]:
    """`tree_positions` from the entries themselves."""
    entries = [index.entry(p) for p in range(len(index))]
    ids = [e.get("id") if type(e) is dict else None for e in entries]
    try:
        node_of = dict(zip(ids, range(len(ids)), strict=True))  # later duplicates win
    except TypeError:  # an id that cannot be a key (a JSON list or object)
        node_of = {key: p for p, key in enumerate(ids) if hashable(key)}
    node_of.pop(None, None)
    roots: list[int] = []
    children: dict[int, list[int]] = {}
    get = node_of.get
    for p, entry in enumerate(entries):
        parent_id = entry.get("parentId") if type(entry) is dict else None
        if parent_id is None:
            roots.append(p)
            continue
        parent = get(parent_id) if type(parent_id) is str else get(key_of(parent_id))
        if parent is None or parent_id == ids[p]:
            roots.append(p)
        else:
            found = children.get(parent)
            if found is None:
                children[parent] = [p]
            else:
                found.append(p)
    for kids in children.values():
        if len(kids) > 1:  # a sort of one still parses its timestamp
            kids.sort(key=lambda p: _timestamp_ms(entries[p]))
    return roots, children


def build_tree(index: EntryIndex) -> list[TreeNode]:
    """Forest of nodes (`tree_positions`): children sorted by timestamp, orphans are roots."""
    roots, children = tree_positions(index)
    labels, label_ts = index.labels, index.label_ts

    def node(p: int) -> TreeNode:
        entry = index.entry(p)
        key = key_of(field_of(entry, "id"))
        return TreeNode(entry, [], labels.get(key), label_ts.get(key), p)

    nodes = [node(p) for p in roots]
    stack = list(nodes)
    while stack:
        parent = stack.pop()
        kids = [node(p) for p in children.get(parent.position, ())]
        parent.children = kids
        stack.extend(kids)
    return nodes


def _timestamp_ms(entry: Entry) -> float:
    ms = js_date_ms(field_of(entry, "timestamp"))
    return ms if ms == ms else 0.0


class BranchView(Sequence[Entry]):
    """The entries of a root-first path, parsed only when looked at (a request needs the last few,
    not the whole branch materialised); `type_at` reads the index without parsing."""

    def __init__(self, index: EntryIndex, positions: list[int]) -> None:
        self._index = index
        self._positions = positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, i: int) -> Entry: ...
    @overload
    def __getitem__(self, i: slice) -> list[Entry]: ...
    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self._index.entry(p) for p in self._positions[i]]
        return self._index.entry(self._positions[i])

    def __iter__(self) -> Iterator[Entry]:
        return (self._index.entry(p) for p in self._positions)

    def __reversed__(self) -> Iterator[Entry]:
        return (self._index.entry(p) for p in reversed(self._positions))

    def type_at(self, i: int) -> Any:
        return self._index.type_of(self._positions[i])

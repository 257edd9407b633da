"""The session tree over an `EntryIndex`: root-to-leaf paths and the whole forest.

    path_to(index, leaf)   -> positions root -> leaf (Pi buildSessionPath, on the index)
    build_tree(index)      -> [TreeNode] (Pi getTree: children by timestamp, orphans are roots)

`leaf` is an entry id, None (before the first entry) or `projection.LAST` (the last entry of the
file, when it has no id).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from picontext._clock import js_date_ms
from picontext.session.index import EntryIndex, key_of
from picontext.session.projection import Entry, LeafArg, field_of

__all__ = ["BranchView", "TreeNode", "build_tree", "path_to"]


@dataclass(slots=True)
class TreeNode:
    entry: Entry
    children: list[TreeNode] = field(default_factory=list)
    label: str | None = None
    label_timestamp: str | None = None
    position: int = -1  # of the entry in file order (in the index)


def path_to(index: EntryIndex, leaf: LeafArg) -> list[int]:
    """Positions from the root to `leaf`; an unknown leaf means the last entry, as in Pi."""
    if leaf is None:
        return []
    start = index.position_of(leaf) if leaf else None
    if start is None:
        if not len(index):
            return []
        start = len(index) - 1
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


def build_tree(index: EntryIndex) -> list[TreeNode]:
    """Forest of nodes; children sorted by timestamp (stable), orphans become roots."""
    nodes: dict[Hashable, TreeNode] = {}
    ordered: list[TreeNode] = []
    labels, label_ts = index.labels, index.label_ts
    entry_at = index.entry
    for position in range(len(index)):
        entry = entry_at(position)
        key = key_of(entry.get("id") if type(entry) is dict else None)
        node = TreeNode(entry, [], labels.get(key), label_ts.get(key), position) if labels else \
            TreeNode(entry, [], None, None, position)
        if key is not None:
            nodes[key] = node
        ordered.append(node)
    roots: list[TreeNode] = []
    for node in ordered:
        entry = node.entry
        if type(entry) is dict:
            parent_id, own_id = entry.get("parentId"), entry.get("id")
        else:
            parent_id = own_id = None
        parent = nodes.get(key_of(parent_id)) if parent_id is not None else None
        if parent_id is None or parent_id == own_id or parent is None:
            roots.append(node)
        else:
            parent.children.append(node)
    stack = list(roots)
    while stack:
        node = stack.pop()
        if len(node.children) > 1:  # a sort of one still parses its timestamp
            node.children.sort(key=_timestamp_key)
        stack.extend(node.children)
    return roots


def _timestamp_key(node: TreeNode) -> float:
    ms = js_date_ms(field_of(node.entry, "timestamp"))
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

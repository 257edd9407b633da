"""The entry index of one session: everything known by id or position, nothing about the leaf.

    index = EntryIndex()
    index.load(file_entries)          # bulk, in C-speed comprehensions
    index.add(entry)                  # one appended entry
    index.entry(i), index.position_of(id), index.children_of(parent_id), index.path_to(position)

Holds the file's entries in file order (parsed dicts, or `store.RawLine` until first needed),
and derived from them: id and type per position, id -> position (later duplicates win, as in
Pi), children and parent positions (built on first use), labels, the position of the
session-name entry, and whether any assistant message exists (Pi's lazy-flush rule). It is the
`EntryView` the live projection reads through.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Iterable
from typing import Any

from msgspec import UNSET

from picontext.session.projection import Entry, field_of, hashable, message_role
from picontext.session.records import RawLine


def key_of(value: Any) -> Hashable | None:
    """`value` as a dict key, or None when it cannot be one (JSON lists and objects)."""
    return value if hashable(value) else None


_STR_OR_NONE = frozenset({str, type(None)})
_SHARED_FIELDS = ("role", "api", "provider", "model", "stopReason", "toolName")
_SHARED_MAX = 64  # names, not text: a longer value is left as parsed
_intern = sys.intern


def parent_lookup(by_id: dict[Hashable, int], parent: Any) -> int | None:
    """Pi follows a parentId only when it is truthy; unhashable values never match an id."""
    if not parent or parent is UNSET or not hashable(parent):
        return None
    return by_id.get(parent)


def _id(entry: Any) -> Any:
    if type(entry) is RawLine:
        return entry.id
    return entry.get("id", UNSET) if type(entry) is dict else UNSET


def id_of(entry: Any) -> Hashable | None:
    """An entry's id as a dict key, parsed or not (None when absent or not hashable)."""
    value = _id(entry)
    return None if value is UNSET else key_of(value)


def _parent(entry: Any) -> Any:
    if type(entry) is RawLine:
        return entry.parent_id
    return entry.get("parentId") if type(entry) is dict else None


class EntryIndex:
    """Entries of one session by position and by id (see the module docstring).

    Invariant: `entries` are the non-header file entries in file order and every other field
    is derived from them; `add`/`undo_add` keep them in step.
    """

    def __init__(self, *, share_strings: bool = False) -> None:
        # On for an index that lives as long as its session (a SessionManager's, an agent's):
        # its parsed entries then cost less memory for as long as they are held. Off for a
        # one-shot reader (export, the read commands), which would pay ~3 us an entry parsed
        # for memory it frees a moment later (see `_share_strings`).
        self._share = share_strings
        self.header: dict[str, Any] = {}
        self.file_entries: list[Any] = []  # header(s) included, as read or written
        self.entries: list[Any] = []
        self._ids: list[Any] = []  # id of each entry (UNSET when it has no id key)
        self._types: list[Any] = []
        self._by_id: dict[Hashable, int] = {}
        self._children: dict[Hashable, list[int]] | None = None
        self._parent_pos: list[int | None] | None = None
        self.labels: dict[Hashable, str] = {}
        self.label_ts: dict[Hashable, Any] = {}
        self.name_position: int | None = None
        self._has_assistant: bool | None = None
        self._ids_unique = True  # no id occurs twice (then an id names exactly one entry)
        # Parsed entries whose line is a long line the file gives again (`store.FileLines`):
        # position -> its `RawLine` (no bytes), so that `forget` can drop the value.
        self._long: dict[int, RawLine] = {}
        self._released: set[int] = set()  # positions `forget` dropped, until parsed again

    # ------------------------------------------------------------------ building

    def load(self, file_entries: list[Any]) -> None:
        """Adopt a file's entries and build the index in bulk (comprehensions, not per-entry calls)."""
        self.file_entries = file_entries
        self.header = next((e for e in file_entries if field_of(e, "type") == "session"), {})
        if file_entries and file_entries[0] is self.header:
            entries = file_entries[1:]  # the usual shape: one header, first
            if any(type(e) is dict and e.get("type") == "session" for e in entries if type(e) is not RawLine):
                entries = [e for e in entries if type(e) is RawLine or field_of(e, "type") != "session"]
        else:
            entries = [e for e in file_entries if type(e) is RawLine or field_of(e, "type") != "session"]
        self.entries = entries
        self._long = {}
        self._released = set()
        self._children = None
        self._parent_pos = None
        self.labels = {}
        self.label_ts = {}
        self._has_assistant = None
        self.name_position = None
        ids = self._ids = [e.id if type(e) is RawLine else (e.get("id", UNSET) if type(e) is dict else UNSET)
                           for e in entries]
        self._types = [e.type if type(e) is RawLine else field_of(e, "type") for e in entries]
        try:
            by_id = dict(zip(ids, range(len(entries)), strict=True))
        except TypeError:  # an unhashable id somewhere: skip those
            by_id = {k: i for i, k in enumerate(ids) if hashable(k)}
        by_id.pop(UNSET, None)
        self._by_id = by_id
        # Counted in C; an unhashable id (not in by_id) counts as "not unique": callers then take
        # the general path.
        self._ids_unique = len(by_id) == len(ids) - ids.count(UNSET)
        types = self._types
        if "label" in types or "session_info" in types:  # scanned in C; most sessions have few or none
            for position in [i for i, t in enumerate(types) if t == "label" or t == "session_info"]:
                self._index_metadata(position, entries[position])

    def last_id(self) -> Any:
        """Id of the last entry (UNSET when it has none, None when there are no entries)."""
        return self._ids[-1] if self.entries else None

    def add(self, entry: Any) -> int:
        """Index one entry appended to the file (ours or another writer's); returns its position."""
        position = len(self.entries)
        self.file_entries.append(entry)
        self.entries.append(entry)
        key = _id(entry)
        self._ids.append(key)
        self._types.append(entry.type if type(entry) is RawLine else field_of(entry, "type"))
        if key is not UNSET and hashable(key):
            if key in self._by_id:
                self._ids_unique = False  # stays False after an undo: only a fast path is lost
            self._by_id[key] = position
        elif key is not UNSET:
            self._ids_unique = False
        parent = key_of(_parent(entry))
        if self._children is not None:
            self._children.setdefault(parent, []).append(position)
        if self._parent_pos is not None:
            self._parent_pos.append(parent_lookup(self._by_id, parent))
        if self.role_of(position) == "assistant":
            self._has_assistant = True
        if type(entry) is dict:
            if entry.get("type") == "label":
                # Copied on write, so that a `snapshot()` (taken before every append) holds the
                # label maps by reference instead of copying them per append.
                self.labels, self.label_ts = dict(self.labels), dict(self.label_ts)
            self._index_metadata(position, entry)
        return position

    def snapshot(self) -> tuple[Any, ...]:
        """What `undo_add` needs to restore the metadata of before the next `add` (the label maps
        by reference: `add` replaces them rather than changing them)."""
        return (self._has_assistant, self.name_position, self.labels, self.label_ts)

    def undo_add(self, snapshot: tuple[Any, ...]) -> None:
        """Forget the last `add` (its write failed)."""
        entry = self.entries.pop()
        self.file_entries.pop()
        self._ids.pop()
        self._types.pop()
        key = _id(entry)
        if key is not UNSET and hashable(key) and self._by_id.get(key) == len(self.entries):
            del self._by_id[key]
            # an earlier entry with the same id is visible again
            for position in range(len(self._ids) - 1, -1, -1):
                if self._ids[position] == key:
                    self._by_id[key] = position
                    break
        if self._children is not None:
            self._children[key_of(_parent(entry))].pop()
        if self._parent_pos is not None:
            self._parent_pos.pop()
        self._has_assistant, self.name_position, self.labels, self.label_ts = snapshot

    def _index_metadata(self, position: int, entry: dict[str, Any]) -> None:
        kind = entry.get("type")
        if kind == "label":
            target = key_of(entry.get("targetId"))
            if entry.get("label"):
                self.labels[target] = entry["label"]
                self.label_ts[target] = entry.get("timestamp")
            else:
                self.labels.pop(target, None)
                self.label_ts.pop(target, None)
        elif kind == "session_info":
            self.name_position = position

    # ------------------------------------------------------------------ lookups

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, entry_id: Any) -> bool:
        return hashable(entry_id) and entry_id in self._by_id

    def position_of(self, entry_id: Any) -> int | None:
        return self._by_id.get(entry_id) if hashable(entry_id) else None

    def session_name(self) -> str | None:
        """The name of the last session_info entry, stripped (None when none or empty)."""
        if self.name_position is None:
            return None
        name = field_of(self.entry(self.name_position), "name")
        return name.strip() or None if isinstance(name, str) else None

    def ids_unique(self) -> bool:
        """True when no id occurs twice (so `position_of` names the only entry with that id)."""
        return self._ids_unique

    def entry(self, index: int) -> Entry:
        """The entry at `index` in file order, parsed on first use."""
        item = self.entries[index]
        if type(item) is RawLine:
            line = item
            if self._released:
                self._released.discard(index)
            item = item.parse()
            source = line.source
            if source is not None and line.seq in getattr(source, "long", ()):
                self._long[index] = line
            if self._share and type(item) is dict:
                self._share_strings(index, item)
            self.entries[index] = item
        return item

    def forget(self, index: int) -> bool:
        """Drop the parsed value of the entry at `index` when its line is a long line the file
        gives again (the next `entry(index)` reads it back); returns whether it was dropped.
        For a compaction that shortens a kept tool output of megabytes: nothing needs its text
        while the summaries are written, nor after (docs/compaction.md, "Round six")."""
        line = self._long.pop(index, None)
        if line is None or type(self.entries[index]) is RawLine:
            return False
        self.entries[index] = line
        self._released.add(index)
        return True

    def has_released(self) -> bool:
        """Whether some entry dropped by `forget` was not parsed again since."""
        return bool(self._released)

    def head_of(self, index: int) -> Entry | None:
        """The entry at `index` without its long strings (each ""), read from the file, when
        `forget` dropped it (and nothing parsed it since) and its long strings are all in its
        message's content; else None. What a context needs of a message whose content a context
        edit replaces."""
        if index not in self._released:
            return None
        item = self.entries[index]
        if type(item) is not RawLine or item.source is None or not hasattr(item.source, "head_of"):
            return None
        value = item.source.head_of(item.seq, item.id)
        return value if type(value) is dict else None

    def _share_strings(self, index: int, entry: dict[str, Any]) -> None:
        """Point a parsed entry's repeated short strings at one object each: its id, type and
        parentId at the index's own (equal) objects, and the message's role, api, provider,
        model, stop reason, tool name and content block types at interned ones. The parser makes
        a new string for every value, 50-70 bytes even for "assistant"; a session of short turns
        parsed whole peaked at 5.6x its file, now 4.6x (`tests/session/test_shared_strings.py`).
        The values stay equal: nothing reads, compares or writes differently. Costs ~3 us of CPU
        an entry parsed (docs/performance.md)."""
        ids = self._ids
        key = ids[index]
        if key.__class__ is str and entry.get("id") == key:
            entry["id"] = key
        kind = self._types[index]
        if kind.__class__ is str and entry.get("type") == kind:
            entry["type"] = kind
        parent = entry.get("parentId")
        if parent.__class__ is str:
            position = self._by_id.get(parent)
            if position is not None:
                entry["parentId"] = ids[position]
        message = entry.get("message")
        if message.__class__ is not dict:
            return
        for name in _SHARED_FIELDS:
            if name in message:
                value = message[name]
                if value.__class__ is str and len(value) <= _SHARED_MAX:
                    message[name] = _intern(value)
        content = message.get("content")
        if content.__class__ is list:
            for block in content:
                if block.__class__ is dict:
                    value = block.get("type")
                    if value.__class__ is str and len(value) <= _SHARED_MAX:
                        block["type"] = _intern(value)

    def ids_of(self, positions: Iterable[int]) -> list[Any]:
        """Ids of the entries at `positions` (UNSET where an entry has no id key)."""
        return list(map(self._ids.__getitem__, positions))

    def id_at(self, index: int) -> Any:
        return self._ids[index]

    def types_of(self, positions: Iterable[int]) -> list[Any]:
        return list(map(self._types.__getitem__, positions))

    def type_of(self, index: int) -> Any:
        return self._types[index]

    def role_of(self, index: int) -> Any:
        item = self.entries[index]
        return item.role if type(item) is RawLine else message_role(item)

    def has_assistant_message(self) -> bool:
        if self._has_assistant is None:
            types = self._types
            self._has_assistant = any(self.role_of(i) == "assistant" for i in range(len(self.entries))
                                      if types[i] == "message")
        return self._has_assistant

    def children_of(self, parent_id: Any) -> list[int]:
        """Positions of the entries whose parentId equals `parent_id`, in file order."""
        if self._children is None:
            children: dict[Hashable, list[int]] = {}
            for position, entry in enumerate(self.entries):
                children.setdefault(key_of(_parent(entry)), []).append(position)
            self._children = children
        return self._children.get(parent_id, []) if hashable(parent_id) else []

    def parent_positions(self) -> list[int | None]:
        """Position of each entry's parent (None for roots and orphans), built once per load."""
        if self._parent_pos is None:
            by_id = self._by_id
            parents = [e.parentId if type(e) is RawLine else (e.get("parentId") if type(e) is dict else None)
                       for e in self.entries]
            get = by_id.get
            if set(map(type, parents)) <= _STR_OR_NONE and "" not in by_id and None not in by_id:
                # parent_lookup of each, mapped in C: an empty or null parentId names no entry here
                self._parent_pos = list(map(get, parents))
            else:
                self._parent_pos = [get(p) if type(p) is str and p else parent_lookup(by_id, p) for p in parents]
        return self._parent_pos

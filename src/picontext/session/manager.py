"""SessionManager: one session's entries, its tree index, the leaf pointer and persistence.

The behaviour and error messages are Pi's `SessionManager` (session-manager.ts), in snake_case.
Where we differ on purpose (docs/divergences.md): files are never rewritten in place (legacy
upgrades and whole-file writes are atomic and keep a backup), a vanished file is recreated whole
instead of without a header, a failed write leaves memory and disk as they were, appends are
locked against other processes, skipped lines are reported, and the projection is incremental.

Usage:
    sm = SessionManager.create("/home/u/proj")
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    ctx = sm.build_session_context()
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from msgspec import UNSET

from picontext._clock import Clock, IdFactory, RandomIds, SystemClock, iso_from_ms, js_date_ms
from picontext._gc import gc_paused
from picontext.errors import (
    EntryNotFound,
    ForkError,
    InvalidReplacement,
    InvalidSessionId,
    NotEditable,
    NotOnActiveBranch,
    SessionFormatError,
    SessionWriteError,
)
from picontext.session import paths
from picontext.session.live import LiveProjection
from picontext.session.migrations import CURRENT_SESSION_VERSION, file_version, migrate_to_current
from picontext.session.projection import (
    LAST,
    Entry,
    LeafArg,
    SessionProjection,
    field_of,
    hashable,
    message_role,
)
from picontext.session.store import (
    JsonlSessionStore,
    RawLine,
    SessionStore,
    read_session_file,
    read_session_header,
)
from picontext.session.system_prompt import get_current_system_message

Warn = Callable[[str], None]
APP_NAME = "pi"  # the reference's error text names its app; scripts match on it


def stderr_warn(message: str) -> None:
    print(f"picontext: warning: {message}", file=sys.stderr)


@dataclass(slots=True)
class TreeNode:
    entry: Entry
    children: list[TreeNode] = field(default_factory=list)
    label: str | None = None
    label_timestamp: str | None = None


def _key(value: Any) -> Hashable | None:
    """`value` as a dict key, or None when it cannot be one (JSON lists and objects)."""
    return value if hashable(value) else None


class SessionManager:
    """Entries in file order + id index + labels + leaf; appends persist per Pi's lazy-flush rule.

    Invariant: `_entries` are the non-header file entries in file order; `_by_id`, `_children`,
    `_labels`, `_name` and `_live` are derived from them and the leaf, and are updated together.
    """

    def __init__(
        self,
        cwd: str,
        session_dir: str,
        session_file: str | None,
        persist: bool,
        *,
        new_session_id: str | None = None,
        parent_session: str | None = None,
        preloaded: list[Any] | None = None,
        clock: Clock | None = None,
        ids: IdFactory | None = None,
        warn: Warn | None = None,
        store_factory: Callable[[str], SessionStore] | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        self._ids = ids or RandomIds(self._clock)
        self._warn = warn or stderr_warn
        self._store_factory = store_factory or JsonlSessionStore
        self._cwd = paths.resolve_path(cwd)
        self._session_dir = paths.resolve_path(session_dir) if session_dir else ""
        self._persist = persist
        self._store: SessionStore | None = None
        self._session_file: str | None = None
        self._header: dict[str, Any] = {}
        self._file_entries: list[Any] = []
        self._entries: list[Any] = []  # parsed entries, or RawLine until first needed
        self._id_list: list[Any] = []  # id of each entry (UNSET when it has no id key)
        self._type_list: list[Any] = []  # type of each entry
        self._by_id: dict[Hashable, int] = {}  # id -> position in _entries (later duplicates win)
        self._children: dict[Hashable, list[int]] | None = None  # built on first use
        self._parent_pos: list[int | None] | None = None  # built on first use
        self._labels: dict[Hashable, str] = {}
        self._label_ts: dict[Hashable, Any] = {}
        self._leaf: LeafArg = None
        self._has_assistant: bool | None = None  # computed on first use
        self._name_entry: int | None = None
        self._flushed = False
        self._pending_upgrade: float | None = None  # legacy version awaiting an atomic upgrade
        self._live = LiveProjection()
        if persist and self._session_dir:
            paths.ensure_dir(self._session_dir)
        with gc_paused():
            if session_file:
                self._set_session_file(session_file, preloaded)
            elif preloaded:
                self._load_entries(preloaded, new_session_id, parent_session)
            else:
                self.new_session(id=new_session_id, parent_session=parent_session)

    # ------------------------------------------------------------------ factories

    @classmethod
    def create(
        cls, cwd: str, session_dir: str | None = None, *, id: str | None = None,
        parent_session: str | None = None, **kw: Any,
    ) -> SessionManager:
        """A new persisted session; its file appears with the first assistant message."""
        directory = session_dir or paths.default_session_dir(cwd, create=True)
        return cls(cwd, directory, None, True, new_session_id=id, parent_session=parent_session, **kw)

    @classmethod
    def open(cls, path: str, session_dir: str | None = None, cwd_override: str | None = None,
             **kw: Any) -> SessionManager:
        """Open a session file (created lazily if it does not exist)."""
        resolved = paths.resolve_path(path)
        cwd = cwd_override
        if cwd is None and os.path.exists(resolved):
            header = read_session_header(resolved)
            if header is not None and isinstance(header.get("cwd"), str):
                cwd = header["cwd"]
        directory = session_dir or os.path.dirname(resolved)
        return cls(cwd or os.getcwd(), directory, resolved, True, **kw)

    @classmethod
    def continue_recent(cls, cwd: str, session_dir: str | None = None, **kw: Any) -> SessionManager:
        """The most recently modified session of the directory, or a new one."""
        from picontext.session.listing import find_most_recent_session

        directory = session_dir or paths.default_session_dir(cwd, create=True)
        filter_cwd = session_dir is not None and paths.resolve_path(directory) != paths.default_session_dir(cwd)
        recent = find_most_recent_session(directory, cwd if filter_cwd else None)
        return cls(cwd, directory, recent, True, **kw)

    @classmethod
    def in_memory(cls, cwd: str | None = None, *, id: str | None = None, parent_session: str | None = None,
                  entries: list[Any] | None = None, **kw: Any) -> SessionManager:
        """A session that never touches the filesystem."""
        return cls(cwd or os.getcwd(), "", None, False, new_session_id=id, parent_session=parent_session,
                   preloaded=entries, **kw)

    @classmethod
    def fork_from(cls, source_path: str, target_cwd: str, session_dir: str | None = None, *,
                  id: str | None = None, **kw: Any) -> SessionManager:
        """Copy a whole session (all branches) into a new file for `target_cwd`.

        Unlike Pi 0.87.0, a legacy source is migrated before copying, so the copy is a valid tree.
        """
        source = paths.resolve_path(source_path)
        target = paths.resolve_path(target_cwd)
        loaded = read_session_file(source)
        if not loaded.valid:
            raise ForkError(f"Cannot fork: source session file is empty or invalid: {source}")
        entries = loaded.entries
        migrate_to_current(entries)
        directory = session_dir or paths.default_session_dir(target, create=True)
        paths.ensure_dir(directory)
        if id is not None and not paths.is_valid_session_id(id):
            raise InvalidSessionId()
        ids = kw.get("ids") or RandomIds(kw.get("clock"))
        clock = kw.get("clock") or SystemClock()
        session_id = id or ids.session_id()
        timestamp = iso_from_ms(clock.now_ms())
        file = os.path.join(directory, paths.session_file_name(timestamp, session_id))
        header = {"type": "session", "version": CURRENT_SESSION_VERSION, "id": session_id,
                  "timestamp": timestamp, "cwd": target, "parentSession": source}
        store = (kw.get("store_factory") or JsonlSessionStore)(file)
        store.create([header, *(e for e in entries if field_of(e, "type") != "session")])
        return cls(target, directory, file, True, **kw)

    # ------------------------------------------------------------------ loading

    def new_session(self, *, id: str | None = None, parent_session: str | None = None) -> str | None:
        """Start a fresh session in memory (nothing is written until the first assistant)."""
        if id is not None and not paths.is_valid_session_id(id):
            raise InvalidSessionId()
        session_id = id if id is not None else self._ids.session_id()
        timestamp = iso_from_ms(self._clock.now_ms())
        header: dict[str, Any] = {"type": "session", "version": CURRENT_SESSION_VERSION, "id": session_id,
                                  "timestamp": timestamp, "cwd": self._cwd}
        if parent_session is not None:
            header["parentSession"] = parent_session
        self._set_file_entries([header])
        self._flushed = False
        self._pending_upgrade = None
        if self._persist:
            self._set_path(os.path.join(self._session_dir, paths.session_file_name(timestamp, session_id)))
        return self._session_file

    def set_session_file(self, path: str) -> None:
        """Switch to another file, with the same rules as `open`."""
        self._set_session_file(path, None)

    def _set_path(self, path: str | None) -> None:
        self._session_file = path
        self._store = self._store_factory(path) if path and self._persist else None

    def _set_session_file(self, path: str, preloaded: list[Any] | None) -> None:
        resolved = paths.resolve_path(path)
        if not os.path.exists(resolved):
            self.new_session()
            self._set_path(resolved)
            return
        if preloaded is None:
            loaded = read_session_file(resolved, lazy=True)
            for line in loaded.warnings(resolved):
                self._warn(line)
            entries = loaded.entries if loaded.valid else []
        else:
            entries = preloaded
        if not entries:
            if os.path.getsize(resolved) > 0:
                raise SessionFormatError(f"Session file is not a valid {APP_NAME} session: {resolved}",
                                         path=resolved)
            self.new_session()
            self._set_path(resolved)
            assert self._store is not None
            self._store.replace(self._file_entries)
            self._flushed = True
            return
        self._set_path(resolved)
        self._load_entries(entries, None, None)
        self._flushed = True

    def _load_entries(self, entries: list[Any], new_id: str | None, parent_session: str | None) -> None:
        header = next((e for e in entries if field_of(e, "type") == "session"), None)
        if header is None:
            self.new_session(id=new_id, parent_session=parent_session)
            self._set_file_entries(self._file_entries + list(entries))
            return
        version = file_version(entries)
        if migrate_to_current(entries):
            # Pi rewrites the file here. We upgrade it atomically on the first append instead,
            # so merely reading a legacy file never modifies it.
            self._pending_upgrade = version
        self._set_file_entries(entries)

    def _set_file_entries(self, file_entries: list[Any]) -> None:
        """Adopt a file's entries and build the index in bulk (comprehensions, not per-entry calls)."""
        self._file_entries = file_entries
        self._header = next((e for e in file_entries if field_of(e, "type") == "session"), {})
        if file_entries and file_entries[0] is self._header:
            entries = file_entries[1:]  # the usual shape: one header, first
            if any(type(e) is dict and e.get("type") == "session" for e in entries if type(e) is not RawLine):
                entries = [e for e in entries if type(e) is RawLine or field_of(e, "type") != "session"]
        else:
            entries = [e for e in file_entries if type(e) is RawLine or field_of(e, "type") != "session"]
        self._entries = entries
        self._children = None
        self._parent_pos = None
        self._labels = {}
        self._label_ts = {}
        self._has_assistant = None
        self._name_entry = None
        ids = self._id_list = [e.id if type(e) is RawLine else (e.get("id", UNSET) if type(e) is dict else UNSET)
                           for e in entries]
        self._type_list = [e.type if type(e) is RawLine else field_of(e, "type") for e in entries]
        try:
            by_id = dict(zip(ids, range(len(entries)), strict=True))
        except TypeError:  # an unhashable id somewhere: skip those
            by_id = {k: i for i, k in enumerate(ids) if hashable(k)}
        by_id.pop(UNSET, None)
        self._by_id = by_id
        self._leaf = None
        if entries:
            last = entries[-1]
            last_id = last.id if type(last) is RawLine else (last.get("id", UNSET) if type(last) is dict else UNSET)
            self._leaf = LAST if last_id is UNSET else last_id
        types = self._type_list
        if "label" in types or "session_info" in types:  # scanned in C; most sessions have few or none
            for position in [i for i, t in enumerate(types) if t == "label" or t == "session_info"]:
                self._index_metadata(position, entries[position])
        self._live.invalidate()

    def _index_metadata(self, position: int, entry: dict[str, Any]) -> None:
        kind = entry.get("type")
        if kind == "label":
            target = _key(entry.get("targetId"))
            if entry.get("label"):
                self._labels[target] = entry["label"]
                self._label_ts[target] = entry.get("timestamp")
            else:
                self._labels.pop(target, None)
                self._label_ts.pop(target, None)
        elif kind == "session_info":
            self._name_entry = position

    def _children_index(self) -> dict[Hashable, list[int]]:
        if self._children is None:
            children: dict[Hashable, list[int]] = {}
            for position, entry in enumerate(self._entries):
                if type(entry) is RawLine:
                    parent = entry.parent_id
                else:
                    parent = entry.get("parentId") if type(entry) is dict else None
                children.setdefault(_key(parent), []).append(position)
            self._children = children
        return self._children

    def _has_assistant_message(self) -> bool:
        if self._has_assistant is None:
            self._has_assistant = any(self.role_of(i) == "assistant" for i in range(len(self._entries))
                                      if self.type_of(i) == "message")
        return self._has_assistant

    def _index(self, entry: dict[str, Any]) -> None:
        """Index one appended entry."""
        position = len(self._entries)
        self._entries.append(entry)
        self._id_list.append(entry.get("id", UNSET))
        self._type_list.append(entry.get("type"))
        key = entry.get("id")
        if hashable(key):
            self._by_id[key] = position
        parent = _key(entry.get("parentId"))
        if self._children is not None:
            self._children.setdefault(parent, []).append(position)
        if self._parent_pos is not None:
            self._parent_pos.append(self._by_id.get(parent) if parent is not None else None)
        self._leaf = key
        if message_role(entry) == "assistant":
            self._has_assistant = True
        self._index_metadata(position, entry)

    # ------------------------------------------------------------------ entry view (by position)

    def entry(self, index: int) -> Entry:
        """The entry at `index` in file order, parsed on first use."""
        item = self._entries[index]
        if type(item) is RawLine:
            item = item.parse()
            self._entries[index] = item
        return item

    def ids_of(self, positions: Iterable[int]) -> list[Any]:
        """Ids of the entries at `positions` (UNSET where an entry has no id key)."""
        return list(map(self._id_list.__getitem__, positions))

    def types_of(self, positions: Iterable[int]) -> list[Any]:
        return list(map(self._type_list.__getitem__, positions))

    def type_of(self, index: int) -> Any:
        return self._type_list[index]

    def role_of(self, index: int) -> Any:
        item = self._entries[index]
        return item.role if type(item) is RawLine else message_role(item)

    def _parent_positions(self) -> list[int | None]:
        """Position of each entry's parent (None for roots and orphans), built once per load."""
        if self._parent_pos is None:
            by_id = self._by_id
            entries = self._entries
            parents = [e.parentId if type(e) is RawLine else (e.get("parentId") if type(e) is dict else None)
                       for e in entries]
            get = by_id.get
            self._parent_pos = [get(p) if type(p) is str and p else _parent_lookup(by_id, p) for p in parents]
        return self._parent_pos

    def _path_to(self, leaf: LeafArg) -> list[int]:
        """Positions from the root to `leaf` (Pi buildSessionPath on the index)."""
        if leaf is None:
            return []
        start = self._by_id.get(leaf) if leaf and hashable(leaf) else None
        if start is None:
            if not self._entries:
                return []
            start = len(self._entries) - 1
        parent_pos = self._parent_positions()
        limit = len(parent_pos)
        path: list[int] = []
        append = path.append
        current: int | None = start
        while current is not None:
            append(current)
            current = parent_pos[current]
            if len(path) > limit:  # longer than the session: a parent cycle (Pi loops forever)
                return self._path_without_cycle(start)
        path.reverse()
        return path

    def _path_without_cycle(self, start: int) -> list[int]:
        parent_pos = self._parent_positions()
        path: list[int] = []
        seen: set[int] = set()
        current: int | None = start
        while current is not None and current not in seen:
            seen.add(current)
            path.append(current)
            current = parent_pos[current]
        path.reverse()
        return path

    # ------------------------------------------------------------------ accessors

    def is_persisted(self) -> bool:
        return self._persist

    def get_cwd(self) -> str:
        return self._cwd

    def get_session_dir(self) -> str:
        return self._session_dir

    def get_session_id(self) -> str:
        return str(self._header.get("id", ""))

    def get_session_file(self) -> str | None:
        return self._session_file

    def uses_default_session_dir(self) -> bool:
        return self._session_dir == paths.default_session_dir(self._cwd)

    def get_header(self) -> dict[str, Any] | None:
        return self._header or None

    def get_entries(self) -> list[Entry]:
        return [self.entry(i) for i in range(len(self._entries))]

    def entry_count(self) -> int:
        return len(self._entries)

    def get_leaf_id(self) -> str | None:
        return None if self._leaf is LAST else self._leaf  # type: ignore[return-value]

    def get_leaf_entry(self) -> Entry | None:
        leaf = self.get_leaf_id()
        return self.get_entry(leaf) if leaf else None

    def get_entry(self, entry_id: str) -> Entry | None:
        index = self._by_id.get(entry_id) if hashable(entry_id) else None
        return None if index is None else self.entry(index)

    def get_children(self, parent_id: str | None) -> list[Entry]:
        """Entries whose parentId equals `parent_id`, in file order (indexed, not scanned)."""
        return [self.entry(i) for i in self._children_index().get(parent_id, ())]

    def get_label(self, entry_id: str) -> str | None:
        return self._labels.get(entry_id)

    def get_session_name(self) -> str | None:
        if self._name_entry is None:
            return None
        name = field_of(self.entry(self._name_entry), "name")
        return name.strip() or None if isinstance(name, str) else None

    def get_branch(self, from_id: str | None = None) -> list[Entry]:
        """Root-first path to `from_id` (default: the leaf); [] for an unknown start."""
        start = from_id if from_id is not None else self.get_leaf_id()
        if not start or _key(start) not in self._by_id:
            return []
        if start == self._leaf and self._live.valid:
            positions = self._live.path_positions  # already walked for the projection
        else:
            positions = self._path_to(start)
        entries = self._entries
        return [e if type(e := entries[i]) is not RawLine else self.entry(i) for i in positions]

    def get_tree(self) -> list[TreeNode]:
        """Forest of nodes; children sorted by timestamp (stable), orphans become roots."""
        nodes: dict[Hashable, TreeNode] = {}
        ordered: list[tuple[Entry, TreeNode]] = []
        for entry in self.get_entries():
            key = _key(field_of(entry, "id"))
            node = TreeNode(entry, [], self._labels.get(key), self._label_ts.get(key))
            if key is not None:
                nodes[key] = node
            ordered.append((entry, node))
        roots: list[TreeNode] = []
        for entry, node in ordered:
            parent_id = field_of(entry, "parentId")
            parent = nodes.get(_key(parent_id)) if parent_id is not None else None
            if parent_id is None or parent_id == field_of(entry, "id") or parent is None:
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

    # ------------------------------------------------------------------ projection

    def _live_projection(self) -> LiveProjection:
        if not self._live.valid:
            with gc_paused():
                self._live.rebuild(self, self._path_to(self._leaf))
        return self._live

    def build_session_projection(self) -> SessionProjection:
        return self._live_projection().projection()

    def build_session_context(self) -> dict[str, Any]:
        return self.build_session_projection().context()

    def build_context_entries(self) -> list[Entry]:
        return list(self._live_projection().context_entries)

    # ------------------------------------------------------------------ navigation

    def branch(self, entry_id: str) -> None:
        if _key(entry_id) not in self._by_id:
            raise EntryNotFound(entry_id)
        self._move_leaf(entry_id)

    def reset_leaf(self) -> None:
        self._move_leaf(None)

    def _move_leaf(self, leaf: LeafArg) -> None:
        if leaf != self._leaf or leaf is LAST:
            self._leaf = leaf
            self._live.invalidate()

    def branch_with_summary(self, from_id: str | None, summary: str, details: Any = None,
                            from_hook: bool | None = None, usage: Any = None) -> str:
        if from_id is not None and _key(from_id) not in self._by_id:
            raise EntryNotFound(from_id)
        previous_leaf = self._leaf
        previous = self.get_leaf_id() or "root"
        self._move_leaf(from_id)
        entry = self._base("branch_summary")
        entry.update(_defined(fromId=previous, summary=summary, details=details, usage=usage, fromHook=from_hook))
        try:
            return self._append(entry)["id"]
        except BaseException:
            self._move_leaf(previous_leaf)
            raise

    # ------------------------------------------------------------------ appends

    def _new_id(self) -> str:
        for _ in range(100):
            candidate = self._ids.entry_id()
            if candidate not in self._by_id:
                return candidate
        return self._ids.full_id()  # type: ignore[attr-defined, no-any-return]

    def _now_iso(self) -> str:
        return iso_from_ms(self._clock.now_ms())

    def _base(self, kind: str, timestamp: str | None = None) -> dict[str, Any]:
        return {"type": kind, "id": self._new_id(), "parentId": self.get_leaf_id(),
                "timestamp": timestamp or self._now_iso()}

    def _append(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Add to memory, persist, and undo the memory change if persisting fails."""
        snapshot = (self._leaf, self._has_assistant, self._name_entry, dict(self._labels), dict(self._label_ts))
        live_was_valid = self._live.valid and self._leaf is not LAST and entry.get("parentId") == self._leaf
        self._file_entries.append(entry)
        self._index(entry)
        if live_was_valid:
            self._live.append(entry, len(self._entries) - 1)
        else:
            self._live.invalidate()
        try:
            self._persist_entry(entry)
        except BaseException:
            self._file_entries.pop()
            self._entries.pop()
            self._id_list.pop()
            self._type_list.pop()
            del self._by_id[entry["id"]]
            if self._children is not None:
                self._children[_key(entry.get("parentId"))].pop()
            if self._parent_pos is not None:
                self._parent_pos.pop()
            self._leaf = snapshot[0]
            (self._leaf, self._has_assistant, self._name_entry, self._labels, self._label_ts) = snapshot
            self._live.invalidate()
            raise
        return entry

    def _persist_entry(self, entry: dict[str, Any]) -> None:
        store = self._store
        if not self._persist or store is None:
            return
        if not self._has_assistant_message():
            if self._flushed:
                self._write(store, [entry])
            return
        if not self._flushed:
            store.create(self._file_entries)
            self._flushed = True
            self._pending_upgrade = None
        else:
            self._write(store, [entry])

    def _write(self, store: SessionStore, entries: list[Any]) -> None:
        if self._pending_upgrade is not None:
            self._upgrade_and_append(store, entries)
            return
        try:
            store.append(entries)
        except SessionWriteError as exc:
            if not exc.missing:
                raise
            # Pi recreates a vanished file without its header; we write the whole session back.
            store.replace(self._file_entries)
            self._warn(f"session file was deleted while in use; rewrote it: {store.path}")

    def _upgrade_and_append(self, store: SessionStore, entries: list[Any]) -> None:
        """First append to a legacy file: rewrite it as v3 atomically (original kept as backup).

        Done under the file lock from what is on disk *now*, so lines another process appended
        since we loaded are kept; v1 ids are deterministic, so they match ours.
        """
        version = self._pending_upgrade
        with store.lock():
            current = store.load()
            if not current.valid:
                raise SessionFormatError(f"Session file is not a valid {APP_NAME} session: {store.path}",
                                         path=store.path)
            if file_version(current.entries) >= CURRENT_SESSION_VERSION:
                upgraded = None  # somebody upgraded it meanwhile
            else:
                migrate_to_current(current.entries)
                upgraded = current.entries + entries
            if upgraded is not None:
                suffix = f".v{int(version) if version is not None and version == version else 'x'}.bak"
                store.replace(upgraded, backup_suffix=suffix)
                self._warn(f"upgraded {store.path} to format v{CURRENT_SESSION_VERSION}; original kept as "
                           f"{os.path.basename(store.path)}{suffix}")
        if upgraded is None:
            store.append(entries)
        self._pending_upgrade = None

    def append_message(self, message: dict[str, Any]) -> str:
        entry = self._base("message")
        entry["message"] = message
        return self._append(entry)["id"]

    def append_thinking_level_change(self, thinking_level: str) -> str:
        entry = self._base("thinking_level_change")
        entry["thinkingLevel"] = thinking_level
        return self._append(entry)["id"]

    def append_model_change(self, provider: str, model_id: str) -> str:
        entry = self._base("model_change")
        entry.update(provider=provider, modelId=model_id)
        return self._append(entry)["id"]

    def append_usage(self, kind: str, provider: str, model: str, usage: dict[str, Any],
                     note: str | None = None) -> dict[str, Any]:
        """Returns the whole entry, as Pi's appendUsage does."""
        entry = self._base("usage")
        entry.update(kind=kind, provider=provider, model=model, usage=usage)
        if note:
            entry["note"] = note
        return self._append(entry)

    def append_compaction(self, summary: str, first_kept_entry_id: str | None, tokens_before: int,
                          details: Any = None, from_hook: bool | None = None, usage: Any = None) -> str:
        """Append a compaction; `first_kept_entry_id=None` keeps nothing (stores its own id)."""
        timestamp = self._now_iso()
        checkpoint = get_current_system_message(self.build_session_projection().messages)
        entry = self._base("compaction", timestamp)
        entry.update(_defined(summary=summary, firstKeptEntryId=first_kept_entry_id or entry["id"],
                              tokensBefore=tokens_before, details=details, usage=usage, fromHook=from_hook))
        if checkpoint is not None:
            entry["systemMessage"] = {**checkpoint, "timestamp": js_date_ms(timestamp)}
        return self._append(entry)["id"]

    def append_custom_entry(self, custom_type: str, data: Any = None) -> str:
        base = self._base("custom")
        entry = {"type": "custom", "customType": custom_type, **_defined(data=data)}
        entry.update(id=base["id"], parentId=base["parentId"], timestamp=base["timestamp"])
        return self._append(entry)["id"]

    def append_custom_message_entry(self, custom_type: str, content: Any, display: bool,
                                    details: Any = None) -> str:
        base = self._base("custom_message")
        entry = {"type": "custom_message", "customType": custom_type, "content": content, "display": display,
                 **_defined(details=details)}
        entry.update(id=base["id"], parentId=base["parentId"], timestamp=base["timestamp"])
        return self._append(entry)["id"]

    def append_session_info(self, name: str) -> str:
        entry = self._base("session_info")
        entry["name"] = re.sub(r"[\r\n]+", " ", name).strip()
        return self._append(entry)["id"]

    def append_label_change(self, target_id: str, label: str | None = None) -> str:
        if _key(target_id) not in self._by_id:
            raise EntryNotFound(target_id)
        entry = self._base("label")
        entry["targetId"] = target_id
        if label is not None:
            entry["label"] = label
        return self._append(entry)["id"]

    def append_context_edit(self, target_id: str, replacement: dict[str, Any] | None) -> str:
        """Hide (`None`) or replace (`{"content": ...}`) an earlier entry's model content."""
        if replacement is not None and not (
            isinstance(replacement, dict) and isinstance(replacement.get("content"), str | list)
        ):
            raise InvalidReplacement()
        target = self.get_entry(target_id)
        if target is None:
            raise EntryNotFound(target_id)
        if not self._live_projection().on_path(target_id):
            raise NotOnActiveBranch(target_id)
        role = "custom" if field_of(target, "type") == "custom_message" else message_role(target)
        if role not in ("custom", "user", "assistant", "toolResult"):
            raise NotEditable(target_id)
        if replacement is not None and role in ("assistant", "toolResult") and isinstance(
            replacement["content"], str
        ):
            replacement = {"content": [{"type": "text", "text": replacement["content"]}]}
        entry = self._base("context_edit")
        entry.update(targetId=target_id, replacement=replacement)
        return self._append(entry)["id"]

    # ------------------------------------------------------------------ branched sessions

    def create_branched_session(self, leaf_id: str) -> str | None:
        """Extract the path to `leaf_id` (labels re-created) into a new session; returns its file."""
        previous_file = self._session_file
        path = self.get_branch(leaf_id)
        if not path:
            raise EntryNotFound(leaf_id)
        kept: list[dict[str, Any]] = []
        label_successor: dict[Any, Any] = {}
        pending_labels: list[Any] = []
        parent_id = None
        for entry in path:
            if field_of(entry, "type") == "label":
                pending_labels.append(entry.get("id"))
                continue
            for label_id in pending_labels:
                label_successor[label_id] = entry.get("id")
            pending_labels.clear()
            copy = {**entry, "parentId": parent_id} if isinstance(entry, dict) else entry
            if field_of(entry, "type") == "compaction":
                first = entry.get("firstKeptEntryId")
                if first != entry.get("id"):
                    copy["firstKeptEntryId"] = label_successor.get(_key(first), first)
            kept.append(copy)
            parent_id = field_of(entry, "id")
        session_id = self._ids.session_id()
        timestamp = self._now_iso()
        header: dict[str, Any] = {"type": "session", "version": CURRENT_SESSION_VERSION, "id": session_id,
                                  "timestamp": timestamp, "cwd": self._cwd}
        if self._persist and previous_file is not None:
            header["parentSession"] = previous_file
        kept_ids = {field_of(e, "id") for e in kept}
        label_entries = []
        parent_id = field_of(kept[-1], "id") or None
        for target, label in self._labels.items():
            if target in kept_ids:
                new_id = self._ids.entry_id()
                while new_id in kept_ids:
                    new_id = self._ids.entry_id()
                kept_ids.add(new_id)
                label_entries.append({"type": "label", "id": new_id, "parentId": parent_id,
                                      "timestamp": self._label_ts.get(target), "targetId": target,
                                      "label": label})
                parent_id = new_id
        self._set_file_entries([header, *kept, *label_entries])
        self._pending_upgrade = None
        if not self._persist:
            return None
        new_file = os.path.join(self._session_dir, paths.session_file_name(timestamp, session_id))
        self._set_path(new_file)
        if self._has_assistant_message():
            assert self._store is not None
            self._store.create(self._file_entries)
            self._flushed = True
        else:
            self._flushed = False
        return new_file

    # ------------------------------------------------------------------ listing (delegates)

    @staticmethod
    def list(cwd: str, session_dir: str | None = None) -> list[Any]:
        from picontext.session.listing import list_sessions

        return list_sessions(cwd, session_dir)

    @staticmethod
    def list_all(session_dir: str | None = None) -> list[Any]:
        from picontext.session.listing import list_all_sessions

        return list_all_sessions(session_dir)

    @staticmethod
    def find_by_id(cwd: str, session_id: str, session_dir: str | None = None) -> str | None:
        from picontext.session.listing import find_session_by_id

        return find_session_by_id(cwd, session_id, session_dir)


def _parent_lookup(by_id: dict[Hashable, int], parent: Any) -> int | None:
    """Pi follows a parentId only when it is truthy; unhashable values never match an id."""
    if not parent or parent is UNSET or not hashable(parent):
        return None
    return by_id.get(parent)


def _defined(**fields: Any) -> dict[str, Any]:
    """Keyword fields minus the ones that are None (Pi writes undefined fields as absent)."""
    return {k: v for k, v in fields.items() if v is not None}


def _timestamp_key(node: TreeNode) -> float:
    ms = js_date_ms(field_of(node.entry, "timestamp"))
    return ms if ms == ms else 0.0


__all__ = ["APP_NAME", "SessionManager", "TreeNode", "stderr_warn"]

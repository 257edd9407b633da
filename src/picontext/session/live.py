"""The session manager's projection, kept current as entries are appended.

Pi rebuilds the projection from the whole path before every request (O(session) each time,
O(n^2) over a session). `LiveProjection` holds the path, the folded context entries, the edit
map and each entry's projected messages for the current leaf, and updates them per append:
a plain append is O(1); an edit re-projects only its target; a compaction re-folds only the
kept tail. Leaf moves drop the cache, which is rebuilt by the pure pipeline on next use.
`tests/session/test_live_projection.py` holds it equal to `projection.build_session_projection`
after every append of long random sequences.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from picontext.session.projection import (
    ContextSettings,
    Entry,
    LeafArg,
    ProjectedEntry,
    SessionProjection,
    build_session_path,
    collect_edits,
    field_of,
    fold_path,
    message_role,
    project_entry,
)


class LiveProjection:
    """Projection for one leaf; `append(entry)` must be called for each child of that leaf."""

    def __init__(self) -> None:
        self.valid = False
        self._path: list[Entry] = []
        self._first_pos: dict[Hashable, int] = {}
        self._settings = ContextSettings()
        self._context: list[Entry] = []
        self._ctx_pos: dict[Hashable, list[int]] = {}
        self._edits: dict[Hashable, Entry] = {}
        self._projected: list[ProjectedEntry] = []
        self._messages: list[Any] = []
        self._messages_stale = False

    def invalidate(self) -> None:
        self.valid = False

    def rebuild(self, entries: Sequence[Entry], leaf: LeafArg, by_id: Mapping[Hashable, Entry]) -> None:
        self._path = build_session_path(entries, leaf, by_id)
        self._first_pos = {}
        self._settings = ContextSettings()
        for i, entry in enumerate(self._path):
            self._index_path(entry, i)
            self._settings.update(entry)
        self._set_context(fold_path(self._path))
        self.valid = True

    def _index_path(self, entry: Entry, position: int) -> None:
        key = field_of(entry, "id")
        if isinstance(key, Hashable):
            self._first_pos.setdefault(key, position)

    def _set_context(self, context: list[Entry]) -> None:
        self._context = context
        self._edits = collect_edits(context)
        self._ctx_pos = {}
        self._projected = []
        for i, entry in enumerate(context):
            self._projected.append(ProjectedEntry(entry, self._project(entry, i)))
            self._index_context(entry, i)
        self._messages = [m for p in self._projected for m in p.messages]
        self._messages_stale = False

    def _index_context(self, entry: Entry, position: int) -> None:
        key = field_of(entry, "id")
        if isinstance(key, Hashable):
            self._ctx_pos.setdefault(key, []).append(position)

    def _project(self, entry: Entry, position: int) -> list[Any]:
        if position > 0 and field_of(entry, "type") == "compaction":
            return []
        key = field_of(entry, "id")
        return project_entry(entry, self._edits.get(key) if isinstance(key, Hashable) else None)

    def append(self, entry: Entry) -> None:
        """Extend the path by `entry` (a child of the current leaf) and update the projection."""
        position = len(self._path)
        self._path.append(entry)
        self._index_path(entry, position)
        self._settings.update(entry)
        kind = field_of(entry, "type")
        if kind == "compaction":
            self._set_context(self._fold_new_compaction(entry))
            return
        index = len(self._context)
        self._context.append(entry)
        self._index_context(entry, index)
        if kind == "context_edit":
            target = entry.get("targetId")
            if isinstance(target, Hashable):
                self._edits[target] = entry
                for i in self._ctx_pos.get(target, ()):
                    self._projected[i].messages = self._project(self._context[i], i)
                    self._messages_stale = True
        messages = self._project(entry, index)
        self._projected.append(ProjectedEntry(entry, messages))
        if not self._messages_stale:
            self._messages.extend(messages)

    def _fold_new_compaction(self, compaction: Entry) -> list[Entry]:
        # Same result as fold_path(self._path), but only touching the kept tail.
        cid = compaction.get("id")
        at = len(self._path) - 1
        if isinstance(cid, Hashable):
            at = self._first_pos.get(cid, at)
        first_kept = compaction.get("firstKeptEntryId")
        start = self._first_pos.get(first_kept) if isinstance(first_kept, Hashable) else None
        result = [compaction]
        if start is not None and start < at:
            result.extend(e for e in self._path[start:at] if message_role(e) != "system")
        result.extend(self._path[at + 1 :])
        return result

    def projection(self) -> SessionProjection:
        if self._messages_stale:
            self._messages = [m for p in self._projected for m in p.messages]
            self._messages_stale = False
        return SessionProjection(
            list(self._projected), list(self._messages), self._settings.thinking_level, self._settings.model
        )

    @property
    def path(self) -> list[Entry]:
        return self._path

    @property
    def context_entries(self) -> list[Entry]:
        return self._context

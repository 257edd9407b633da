"""The session manager's projection, kept current as entries are appended.

Pi rebuilds the projection from the whole path before every request (O(session) each time,
O(n^2) over a session). `LiveProjection` holds the path (as entry positions), the folded context
entries, the edit map and each entry's projected messages for the current leaf, and updates them
per append: a plain append is O(1); an edit re-projects only its target; a compaction re-folds
only the kept tail. Leaf moves drop the cache, which is rebuilt on next use.

Rebuilding touches only what the result needs: the path is walked on the tree index, the model
and thinking level come from the last entries that set them, and only the folded context entries
are parsed (entries of a large file are parsed lazily, see `store.RawLine`).
`tests/session/test_live_projection.py` holds the result equal to the pure pipeline
(`projection.build_session_projection`) after every append of long random sequences.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable
from typing import Any, Protocol

from msgspec import UNSET

from picontext.session.projection import (
    ContextSettings,
    Entry,
    ProjectedEntry,
    SessionProjection,
    collect_edits,
    field_of,
    hashable,
    project_entry,
)


class EntryView(Protocol):
    """Read access to a session's entries by position, without parsing more than asked for."""

    def entry(self, index: int) -> Entry: ...
    def types_of(self, positions: list[int]) -> list[Any]: ...
    def ids_of(self, positions: list[int]) -> list[Any]: ...
    def role_of(self, index: int) -> Any: ...
    def position_of(self, entry_id: Any) -> int | None: ...
    def ids_unique(self) -> bool: ...


class LiveProjection:
    """Projection for one leaf; `append(entry, index)` must be called for each child of that leaf."""

    def __init__(self) -> None:
        self.valid = False
        self._view: EntryView | None = None
        self._path: list[int] = []
        self._path_ids: list[Any] = []  # id of each path entry (None when absent); list.index = first occurrence
        self._path_id_set: set[Any] | None = None  # the same ids as a set, for on_path
        self._path_pos: dict[Any, int] | None = None  # id -> first position on the path, built on first use
        self.last_compaction: int | None = None  # path position of the newest compaction
        self.edit_count = 0  # context_edit entries among the context entries
        self._settings = ContextSettings()
        self._context: list[Entry] = []
        self._ctx_pos: dict[Hashable, list[int]] = {}
        self._edits: dict[Hashable, Entry] = {}
        self._projected: list[ProjectedEntry] = []
        self._messages: list[Any] = []
        self._messages_stale = False

    def invalidate(self) -> None:
        self.valid = False

    def rebuild(self, view: EntryView, path: list[int]) -> None:
        """Project the root-first `path` (positions of entries in `view`)."""
        self._view = view
        self._path = path
        ids = view.ids_of(path)
        if UNSET in ids:
            ids = [None if key is UNSET else key for key in ids]  # an absent id compares like null
        self._path_ids = ids
        self._path_id_set = None
        types = view.types_of(path)
        self._settings = self._settings_of(view, path, types)
        last_compaction = next((pos for pos in range(len(path) - 1, -1, -1) if types[pos] == "compaction"), None)
        self.last_compaction = last_compaction
        self._path_pos = None
        if last_compaction is None:
            self._set_context([view.entry(i) for i in path])
        else:
            self._set_context(self._fold(view.entry(path[last_compaction]), last_compaction))
        self.valid = True

    @staticmethod
    def _settings_of(view: EntryView, path: list[int], types: list[Any]) -> ContextSettings:
        # Last writer wins, so only the last entry of each kind matters: find them from the end
        # (list.index on the reversed types runs in C) and parse only those.
        settings = ContextSettings()
        backwards = types[::-1]
        if "thinking_level_change" in backwards:
            settings.update(view.entry(path[len(path) - 1 - backwards.index("thinking_level_change")]))
        last_change = len(path) - 1 - backwards.index("model_change") if "model_change" in backwards else -1
        for pos in range(len(path) - 1, last_change, -1):
            if types[pos] == "message" and view.role_of(path[pos]) == "assistant":
                last_change = pos
                break
        if last_change >= 0:
            model_only = ContextSettings()
            model_only.update(view.entry(path[last_change]))
            settings.model = model_only.model
        return settings

    def _fold(self, compaction: Entry, at_last: int) -> list[Entry]:
        """Same result as projection.fold_path, touching only the kept tail of the path."""
        assert self._view is not None
        view = self._view
        at = self._first_position(compaction.get("id"), at_last)  # Pi finds it by id: the first occurrence
        start = self._first_position(compaction.get("firstKeptEntryId"), None)
        result = [compaction]
        if start is not None and start < at:
            kept = self._path[start:at]
            for index, kind in zip(kept, view.types_of(kept), strict=True):
                if not (kind == "message" and view.role_of(index) == "system"):
                    result.append(view.entry(index))
        result.extend(view.entry(index) for index in self._path[at + 1 :])
        return result

    def _first_position(self, entry_id: Any, default: Any) -> Any:
        try:
            return self._path_ids.index(entry_id)
        except ValueError:
            return default

    def _set_context(self, context: list[Entry]) -> None:
        self._context = context
        self._edits = collect_edits(context)
        self.edit_count = sum(1 for e in context if field_of(e, "type") == "context_edit")
        self._ctx_pos = {}
        self._projected = []
        for i, entry in enumerate(context):
            self._projected.append(ProjectedEntry(entry, self._project(entry, i)))
            self._index_context(entry, i)
        self._messages = [m for p in self._projected for m in p.messages]
        self._messages_stale = False

    def _index_context(self, entry: Entry, position: int) -> None:
        key = field_of(entry, "id")
        if hashable(key):
            self._ctx_pos.setdefault(key, []).append(position)

    def _project(self, entry: Entry, position: int) -> list[Any]:
        if position > 0 and field_of(entry, "type") == "compaction":
            return []
        key = field_of(entry, "id")
        return project_entry(entry, self._edits.get(key) if hashable(key) else None)

    def append(self, entry: Entry, index: int) -> None:
        """Extend the path by `entry` (a child of the current leaf, at `index` in the view)."""
        position = len(self._path)
        self._path.append(index)
        entry_id = field_of(entry, "id")
        self._path_ids.append(entry_id)
        if self._path_id_set is not None and hashable(entry_id):
            self._path_id_set.add(entry_id)
        self._settings.update(entry)
        kind = field_of(entry, "type")
        if self._path_pos is not None and hashable(entry_id):
            self._path_pos.setdefault(entry_id, position)
        if kind == "compaction":
            self.last_compaction = position
            self._set_context(self._fold(entry, position))
            return
        ctx_index = len(self._context)
        self._context.append(entry)
        self._index_context(entry, ctx_index)
        if kind == "context_edit":
            self.edit_count += 1
            target = entry.get("targetId")
            if hashable(target):
                self._edits[target] = entry
                for i in self._ctx_pos.get(target, ()):
                    self._projected[i].messages = self._project(self._context[i], i)
                    self._messages_stale = True
        messages = self._project(entry, ctx_index)
        self._projected.append(ProjectedEntry(entry, messages))
        if not self._messages_stale:
            self._messages.extend(messages)

    def projection(self) -> SessionProjection:
        if self._messages_stale:
            self._messages = [m for p in self._projected for m in p.messages]
            self._messages_stale = False
        return SessionProjection(
            list(self._projected), list(self._messages), self._settings.thinking_level, self._settings.model
        )

    @property
    def path_positions(self) -> list[int]:
        """Positions (in the entry view) of the path root -> leaf; read-only."""
        return self._path

    def path_position(self, entry_id: Any) -> int | None:
        """Position on the path of the first entry with `entry_id` (as Pi finds entries by id)."""
        if not hashable(entry_id):
            return self._first_position(entry_id, None)
        view = self._view
        if self._path_pos is None and type(entry_id) is str and view is not None and view.ids_unique():
            # The after-run check asks this once or twice per run: find the entry through the
            # index instead of mapping every id of a long path first.
            return self._position_on_path(view.position_of(entry_id))
        if self._path_pos is None:
            positions: dict[Any, int] = {}
            for position, key in enumerate(self._path_ids):
                if hashable(key):
                    positions.setdefault(key, position)
            self._path_pos = positions
        return self._path_pos.get(entry_id)

    def _position_on_path(self, index: int | None) -> int | None:
        """Where the entry at `index` (in the view) is on the path, or None."""
        if index is None:
            return None
        path = self._path
        at = bisect_left(path, index)  # a path written in file order is ascending
        if at < len(path) and path[at] == index:
            return at
        try:
            return path.index(index)  # a path not in file order (parents appended after children)
        except ValueError:
            return None

    def contributes(self, entry_id: Any) -> bool:
        """Whether an entry with `entry_id` is in the context and projects to some message."""
        if not hashable(entry_id):
            return any(field_of(p.source_entry, "id") == entry_id and p.messages for p in self._projected)
        return any(self._projected[i].messages for i in self._ctx_pos.get(entry_id, ()))

    def on_path(self, entry_id: Any) -> bool:
        if not hashable(entry_id):
            return entry_id in self._path_ids
        view = self._view
        if self._path_id_set is None and type(entry_id) is str and view is not None and view.ids_unique():
            return self._position_on_path(view.position_of(entry_id)) is not None
        if self._path_id_set is None:  # built on first use: most projections never ask
            self._path_id_set = {i for i in self._path_ids if hashable(i)}
        return entry_id in self._path_id_set

    def messages_of(self, entry_id: Any) -> list[Any]:
        """The projected messages of the context entries with `entry_id` (what an edit of that
        id replaces), in context order."""
        if not hashable(entry_id):
            return [m for p in self._projected if field_of(p.source_entry, "id") == entry_id for m in p.messages]
        return [m for i in self._ctx_pos.get(entry_id, ()) for m in self._projected[i].messages]

    def newest_messages(self) -> list[Any]:
        """The projected messages of the newest context entry."""
        return self._projected[-1].messages if self._projected else []

    @property
    def context_entries(self) -> list[Entry]:
        return self._context

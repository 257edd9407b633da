"""The session manager's projection, kept current as entries are appended.

Pi rebuilds the projection from the whole path before every request (O(session) each time,
O(n^2) over a session). `LiveProjection` holds the path of the current leaf (as entry
positions) and a `projection.ProjectedContext` of its folded context, and updates them per
append with the pipeline's own stages: a plain append is O(1); an edit re-projects only its
target; a compaction re-folds the path (`projection.fold_bounds`), touching only the kept tail.
Leaf moves drop the cache, which is rebuilt on next use. `projection()` hands out the result in
O(1) (read-only `PrefixView`s, no copies), whatever the length of the context.

Rebuilding touches only what the result needs: the path is walked on the tree index, the model
and thinking level come from the last entries that set them (`projection.setting_entries_from_end`),
and only the folded context entries are parsed (entries of a large file are parsed lazily, see
`store.RawLine`). `tests/session/test_live_projection.py` holds the result equal to the pure
pipeline (`projection.build_session_projection`) after every append of long random sequences.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, Protocol

from msgspec import UNSET

from picontext.session.projection import (
    EDITABLE_ROLES,
    ContextSettings,
    Entry,
    ProjectedContext,
    SessionProjection,
    fold_bounds,
    folds_away,
    hashable,
    setting_entries_from_end,
    settings_of,
)


def _editable(role: Any) -> bool:
    return type(role) is str and role in EDITABLE_ROLES


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
        # The last entries that set the thinking level and the model; the settings are derived
        # from them when asked (most appends are assistant messages, each setting the model).
        self._thinking_entry: Entry | None = None
        self._model_entry: Entry | None = None
        self._settings: ContextSettings | None = None
        self._context = ProjectedContext()

    def invalidate(self) -> None:
        self.valid = False

    def release(self) -> None:
        """Invalidate and let go of the context now (not at the next rebuild): what only the
        context held is freed while the rebuild waits for the next reader."""
        self.valid = False
        self._context = ProjectedContext()
        self._thinking_entry = self._model_entry = None
        self._settings = None

    def rebuild(self, view: EntryView, path: list[int]) -> None:
        """Project the root-first `path` (positions of entries in `view`)."""
        self._view = view
        self._path = path
        ids = view.ids_of(path)
        if UNSET in ids:
            ids = [None if key is UNSET else key for key in ids]  # an absent id compares like null
        self._path_ids = ids
        self._path_id_set = None
        self._path_pos = None
        types = view.types_of(path)
        self._thinking_entry, self._model_entry = self._setting_entries(view, path, types)
        self._settings = None
        last_compaction = next((pos for pos in range(len(path) - 1, -1, -1) if types[pos] == "compaction"), None)
        self.last_compaction = last_compaction
        if last_compaction is None:
            self._context.reset(self._entries(path, types, path, types))
        else:
            self._context.reset(self._fold(view.entry(path[last_compaction])))
        self.valid = True

    @staticmethod
    def _setting_entries(view: EntryView, path: list[int], types: list[Any]) -> tuple[Entry | None, Entry | None]:
        # list.index on the reversed types runs in C; only the entries found are parsed.
        backwards = types[::-1]
        last = len(path) - 1

        def last_of(kind: str) -> int:
            return last - backwards.index(kind) if kind in backwards else -1

        def last_assistant_after(after: int) -> int:
            return next((pos for pos in range(last, after, -1)
                         if types[pos] == "message" and view.role_of(path[pos]) == "assistant"), -1)

        return setting_entries_from_end(last_of("thinking_level_change"), last_of("model_change"),
                                        last_assistant_after, lambda pos: view.entry(path[pos]))

    def _fold(self, compaction: Entry) -> list[Entry]:
        """`projection.fold_path` of the path, reading the types and roles of the kept part
        from the view and parsing only the entries the folded context holds."""
        assert self._view is not None
        view = self._view
        start, at = fold_bounds(self._path_ids, compaction)
        kept = self._path[start:at]
        kinds = view.types_of(kept)
        tail = self._path[at + 1 :]
        tail_kinds = view.types_of(tail)
        result = [compaction]
        result.extend(self._entries(kept, kinds, kept + tail, kinds + tail_kinds, fold=True))
        result.extend(view.entry(index) for index in tail)
        return result

    def _entries(self, positions: list[int], kinds: list[Any], context: list[int], context_kinds: list[Any], *,
                 fold: bool = False) -> list[Entry]:
        """The entries at `positions` (of the folded `context`; with `fold`, those a fold keeps),
        each parsed, or its head for a message the index released whose content the context's
        edits replace (`EntryIndex.head_of`)."""
        assert self._view is not None
        view = self._view
        if fold:
            positions = [index for index, kind in zip(positions, kinds, strict=True)
                         if not folds_away(kind, view.role_of(index) if kind == "message" else None)]
        released = getattr(view, "has_released", None)
        if released is None or not released() or "context_edit" not in context_kinds:
            return [view.entry(index) for index in positions]
        head_of = view.head_of  # type: ignore[attr-defined]  # an EntryIndex: has_released found
        replaced = self._replaced_content(context, context_kinds)
        return [(head_of(index) if index in replaced else None) or view.entry(index) for index in positions]

    def _replaced_content(self, context: list[int], context_kinds: list[Any]) -> set[int]:
        """Positions of the context's messages whose content no projection reads: the latest
        context edit of their id in the context replaces it (or drops them) and their role is one
        an edit changes. For these `_entries` may take the entry's head, its long strings left in
        the file: a tool output of megabytes, shortened by the compaction, is not read back whole."""
        assert self._view is not None
        view = self._view
        latest: dict[Any, Any] = {}
        for index, kind in zip(context, context_kinds, strict=True):
            if kind == "context_edit":
                edit = view.entry(index)
                target = edit.get("targetId") if type(edit) is dict else None
                if type(target) is str:
                    latest[target] = edit
        if not latest:
            return set()
        ids = view.ids_of(context)
        return {index for index, kind, key in zip(context, context_kinds, ids, strict=True)
                if kind == "message" and key in latest and "replacement" in latest[key]
                and (latest[key]["replacement"] is None or _editable(view.role_of(index)))}

    def append(self, entry: Entry, index: int) -> list[Any]:
        """Extend the path by `entry` (a child of the current leaf, at `index` in the view);
        returns the messages it adds to the context (`newest_messages()`; none for a compaction,
        which re-folds it)."""
        if type(entry) is dict:
            kind, entry_id = entry.get("type"), entry.get("id")
        else:
            kind = entry_id = None
        if kind == "message":
            message = entry.get("message")
            return self.append_message(entry, index, entry_id, message,
                                       message.get("role") if type(message) is dict else None)
        position = self._extend_path(index, entry_id)
        if kind == "compaction":
            self.last_compaction = position
            self._context.reset(self._fold(entry))
            return []
        if kind == "thinking_level_change":
            self._thinking_entry, self._settings = entry, None
        elif kind == "model_change":
            self._model_entry, self._settings = entry, None
        return self._context.append(entry)

    def append_message(self, entry: dict[str, Any], index: int, entry_id: Any, message: Any, role: Any) -> list[Any]:
        """`append` of a `message` entry whose id, message and role (None unless the message
        is an object) the caller has read already (a walk along a long branch appends mostly these)."""
        self._extend_path(index, entry_id)
        if role == "assistant":
            self._model_entry, self._settings = entry, None
        return self._context.append_message(entry, entry_id, message)

    def _extend_path(self, index: int, entry_id: Any) -> int:
        """The path and its id maps extended by the entry at `index`; returns its position."""
        position = len(self._path)
        self._path.append(index)
        self._path_ids.append(entry_id)
        if type(entry_id) is str or hashable(entry_id):
            if self._path_id_set is not None:
                self._path_id_set.add(entry_id)
            if self._path_pos is not None:
                self._path_pos.setdefault(entry_id, position)
        return position

    def projection(self) -> SessionProjection:
        """The projection of the path, in O(1): read-only views, never copies."""
        if self._settings is None:
            self._settings = settings_of(self._thinking_entry, self._model_entry)
        return self._context.view(self._settings)

    @property
    def edit_count(self) -> int:
        """context_edit entries among the context entries."""
        return self._context.edit_count

    @property
    def path_positions(self) -> list[int]:
        """Positions (in the entry view) of the path root -> leaf; read-only."""
        return self._path

    def first_position(self, entry_id: Any) -> int | None:
        """Position on the path of the first entry with `entry_id`, by a scan (no map of the
        path's ids is built or kept: for a caller that asks rarely, such as a walk along a branch)."""
        try:
            return self._path_ids.index(entry_id)
        except ValueError:
            return None

    def path_position(self, entry_id: Any) -> int | None:
        """Position on the path of the first entry with `entry_id` (as Pi finds entries by id)."""
        if not hashable(entry_id):
            try:
                return self._path_ids.index(entry_id)
            except ValueError:
                return None
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
        view = self._view
        if self.last_compaction is None and type(entry_id) is str and view is not None and view.ids_unique():
            # No compaction: the context is the path, entry for entry. Found through the index,
            # without the context's map of ids (a list per entry: 0.5 MB for 8,000 entries,
            # built by the compaction check of a session far over the window, just before the
            # compaction's own peak).
            position = self._position_on_path(view.position_of(entry_id))
            return position is not None and self._context.contributes_at(position)
        return self._context.contributes(entry_id)

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
        return self._context.messages_of(entry_id)

    def newest_messages(self) -> list[Any]:
        """The projected messages of the newest context entry."""
        return self._context.newest_messages()

    @property
    def context_entries(self) -> list[Entry]:
        """The folded context entries (read-only)."""
        return self._context.entries

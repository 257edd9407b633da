"""From entries to what the model sees: the projection pipeline, defined once.

    build_session_path        leaf -> root walk, reversed              (Pi buildSessionPath)
    get_context_settings      thinking level and model from the path   (Pi getSessionContextSettings)
    fold_path / fold_bounds   fold the path at its newest compaction   (Pi buildContextEntries)
    entry_to_messages         one entry -> its messages                (Pi sessionEntryToContextMessages)
    project_entry             apply the winning context edit           (Pi projectContextEntry)
    ProjectedContext          the folded context, projected entry by entry, extendable per entry
    build_session_projection  all of the above, with provenance        (Pi buildSessionProjection)
    build_session_context     {messages, thinkingLevel, model}         (Pi buildSessionContext)

Every way picontext projects a session goes through these stages: the pure pipeline below, the
session manager's incremental view (`live.LiveProjection`: the path kept per append, the
context kept in a `ProjectedContext`), `context --json` from the entry columns
(`context_stream.py`: the same fold, edit and per-entry stages over lines it reads) and the
viewer's walk along a branch (`viewer/timeline.py`, over a `LiveProjection`).

Nothing here mutates its input: unedited messages are the stored objects themselves, and the
lists a projection hands out are read-only `PrefixView`s of lists that are only ever appended
to, so handing out the context of a 100k-message session costs O(1), not a copy. Callers treat
messages and views as read-only and take `list(view)` when they need a list of their own.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Final, TypeVar, overload

import msgspec

from picontext._clock import js_date_ms
from picontext._gc import gc_paused


class _Last:
    """Marker for JavaScript's `undefined` leaf: start at the last entry of the list."""

    _instance: _Last | None = None

    def __new__(cls) -> _Last:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "LAST"


LAST: Final = _Last()


class _Undefined:
    """A value JavaScript would hold as `undefined`: JSON.stringify drops such object members."""

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __bool__(self) -> bool:
        return False


UNDEFINED: Final = _Undefined()
LeafArg = str | None | _Last

Entry = Any  # an entry as parsed from a line: normally a dict, but Pi keeps any non-falsy value
Message = dict[str, Any]
EDITABLE_ROLES: Final = frozenset({"user", "assistant", "toolResult", "custom"})
_BLOCK_ROLES: Final = frozenset({"assistant", "toolResult"})


def field_of(entry: Entry, key: str) -> Any:
    """`entry[key]` as JavaScript reads it: None for non-objects and absent keys."""
    return entry.get(key) if isinstance(entry, dict) else None


def hashable(value: Any) -> bool:
    """Whether `value` can be a dict key (JSON lists and objects cannot)."""
    return type(value) is str or value is None or isinstance(value, Hashable)


class _ByReference:
    """Tags the key of a value that cannot be a dict key (see `id_key`)."""


_BY_REFERENCE: Final = _ByReference()


def id_key(entry: Entry) -> Hashable:
    """The entry's `id` as a set member or dict key. An id that is a list or an object stands
    for itself only, as JavaScript's Set and Map compare such values by reference."""
    value = field_of(entry, "id")
    return value if hashable(value) else (_BY_REFERENCE, id(value))


def message_role(entry: Entry) -> Any:
    """Role of a `message` entry's message, or None."""
    if field_of(entry, "type") != "message":
        return None
    return field_of(entry.get("message"), "role")


def build_index(entries: Iterable[Entry]) -> dict[Hashable, Entry]:
    """id -> entry, later duplicates winning, as a JavaScript Map filled in order."""
    index: dict[Hashable, Entry] = {}
    for entry in entries:
        key = field_of(entry, "id")
        if hashable(key):
            index[key] = entry
    return index


def _lookup(index: Mapping[Hashable, Entry], key: Any) -> Entry | None:
    return index.get(key) if hashable(key) else None


def build_session_path(
    entries: Sequence[Entry], leaf_id: LeafArg = LAST, by_id: Mapping[Hashable, Entry] | None = None
) -> list[Entry]:
    """Entries from the root down to the leaf.

    `leaf_id=None` gives `[]`; `LAST`, "" or an unknown id start at the last entry of the list.
    Unlike the reference (which loops forever), a parent cycle ends the walk where it closes.
    """
    if leaf_id is None:
        return []
    index = by_id if by_id is not None else build_index(entries)
    leaf = _lookup(index, leaf_id) if isinstance(leaf_id, str) and leaf_id else None
    if leaf is None:
        if not entries:
            return []
        leaf = entries[-1]
    path: list[Entry] = []
    seen: set[int] = set()
    current: Entry | None = leaf
    while current is not None:
        marker = id(current)
        if marker in seen:
            break  # a parent cycle: Pi loops forever here
        seen.add(marker)
        path.append(current)
        parent = current.get("parentId") if type(current) is dict else None
        current = _lookup(index, parent) if parent else None
    path.reverse()
    return path


@dataclass(slots=True)
class ContextSettings:
    thinking_level: Any = "off"
    model: dict[str, Any] | None = None

    def update(self, entry: Entry) -> None:
        """Fold one more path entry in (last writer wins)."""
        kind = field_of(entry, "type")
        if kind == "thinking_level_change":
            self.thinking_level = entry.get("thinkingLevel", UNDEFINED)
        elif kind == "model_change":
            self.model = _model_ref(entry, "provider", "modelId")
        elif kind == "message":
            message = entry.get("message")
            if field_of(message, "role") == "assistant":
                self.model = _model_ref(message, "provider", "model")


def _model_ref(source: dict[str, Any], provider_key: str, model_key: str) -> dict[str, Any]:
    # JSON.stringify drops undefined members: absent keys stay absent, nulls stay null.
    ref: dict[str, Any] = {}
    if provider_key in source:
        ref["provider"] = source[provider_key]
    if model_key in source:
        ref["modelId"] = source[model_key]
    return ref


def get_context_settings(path: Iterable[Entry]) -> ContextSettings:
    """Thinking level ("off" by default) and model (None by default) from the whole path."""
    settings = ContextSettings()
    for entry in path:
        settings.update(entry)
    return settings


def get_latest_compaction_entry(entries: Sequence[Entry]) -> Entry | None:
    """The last compaction in `entries` (callers pass the current branch), or None."""
    for entry in reversed(entries):
        if field_of(entry, "type") == "compaction":
            return entry
    return None


def fold_bounds(ids: Sequence[Any], compaction: Entry) -> tuple[int, int]:
    """Where `compaction` (the newest compaction of a root-first path whose entry ids are `ids`,
    None for an entry without one) folds the path: `(start, at)`. The folded context is the
    compaction, the entries `start..at-1` except system messages (`folds_away`), and every entry
    after `at`.

    `at` is the first entry with the compaction's id (Pi locates it by id, so with duplicate ids
    the first occurrence wins); `start` the first entry before `at` whose id is the compaction's
    `firstKeptEntryId`, else `at` (an id that does not occur before it, the compaction's own
    included, keeps nothing: retain-none)."""
    at = ids.index(compaction.get("id"))
    try:
        start = ids.index(compaction.get("firstKeptEntryId"), 0, at)
    except ValueError:
        start = at
    return start, at


def folds_away(kind: Any, role: Any) -> bool:
    """Whether an entry of the kept part is left out of the folded context: system messages are
    (the compaction carries the prompt state as its `systemMessage`)."""
    return kind == "message" and role == "system"


def fold_path(path: Sequence[Entry]) -> list[Entry]:
    """Fold a root-first path at its newest compaction: `[C, kept..., after...]` (`fold_bounds`)."""
    compaction_at = -1
    for i in range(len(path) - 1, -1, -1):
        if field_of(path[i], "type") == "compaction":
            compaction_at = i
            break
    if compaction_at < 0:
        return list(path)
    compaction = path[compaction_at]
    start, at = fold_bounds([field_of(entry, "id") for entry in path], compaction)
    result = [compaction]
    result.extend(entry for entry in path[start:at] if not folds_away(field_of(entry, "type"), message_role(entry)))
    result.extend(path[at + 1 :])
    return result


def build_context_entries(
    entries: Sequence[Entry], leaf_id: LeafArg = LAST, by_id: Mapping[Hashable, Entry] | None = None
) -> list[Entry]:
    """The path folded at its newest compaction (Pi buildContextEntries)."""
    return fold_path(build_session_path(entries, leaf_id, by_id))


def _with(message: Message, key: str, value: Any) -> Message:
    return {**message, key: value}


def _synthetic(role: str, entry: dict[str, Any], keys: Sequence[str]) -> Message:
    message: Message = {"role": role}
    for key in keys:
        if key in entry:
            message[key] = entry[key]
    message["timestamp"] = entry_time_ms(entry)
    return message


def entry_time_ms(entry: dict[str, Any]) -> int | float:
    """`new Date(entry.timestamp).getTime()`: NaN when the key is absent, 0 when it is null."""
    return js_date_ms(entry["timestamp"]) if "timestamp" in entry else float("nan")


def entry_to_messages(entry: Entry) -> list[Any]:
    """The messages one entry contributes before edits (Pi sessionEntryToContextMessages)."""
    kind = field_of(entry, "type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict):
            # Pi throws on a missing message; we treat the entry as contributing nothing.
            return [] if message is None else [message]
        role = message.get("role")
        if message.get("content") is None:
            if role == "system":
                return [_with(message, "content", "")]
            if role in ("user", "assistant", "toolResult"):
                return [_with(message, "content", [])]
        return [message]
    if kind == "custom_message":
        custom = _synthetic("custom", entry, ("customType",))
        content = entry.get("content")
        custom["content"] = [] if content is None else content
        for key in ("display", "details"):
            if key in entry:
                custom[key] = entry[key]
        custom["timestamp"] = custom.pop("timestamp")
        return [custom]
    if kind == "branch_summary":
        if not _truthy(entry.get("summary")):  # JavaScript's truthiness: [] and {} are summaries
            return []
        return [_synthetic("branchSummary", entry, ("summary", "fromId"))]
    if kind == "compaction":
        summary = _synthetic("compactionSummary", entry, ("summary", "tokensBefore"))
        system = entry.get("systemMessage")
        return [system, summary] if _truthy(system) else [summary]
    return []


def _truthy(value: Any) -> bool:
    """JavaScript truthiness for JSON values (empty objects and lists are truthy)."""
    if isinstance(value, dict | list):
        return True
    return bool(value) and value == value


def project_entry(entry: Entry, edit: Entry | None = None) -> list[Any]:
    """The entry's messages with a context edit applied (Pi projectContextEntry)."""
    messages = entry_to_messages(entry)
    if edit is None or "replacement" not in edit:
        # An edit without a replacement key makes Pi throw; we leave the content alone.
        return messages
    replacement = edit["replacement"]
    if replacement is None:
        return []
    has_content = isinstance(replacement, dict) and "content" in replacement
    content = replacement["content"] if has_content else None
    result = []
    for message in messages:
        role = field_of(message, "role")
        if type(role) is not str or role not in EDITABLE_ROLES:  # a list or object is no role (Pi: Set.has)
            result.append(message)
            continue
        copy = dict(message)
        if role in _BLOCK_ROLES and isinstance(content, str):
            copy["content"] = [{"type": "text", "text": content}]
        elif has_content:
            copy["content"] = content
        else:
            copy.pop("content", None)  # Pi spreads `content: undefined`, which JSON omits
        result.append(copy)
    return result


T = TypeVar("T")


class PrefixView(Sequence[T]):
    """The first `len` items of a list that its owner only ever appends to: a read-only snapshot
    made in O(1), however long the list.

    The owner (`ProjectedContext`) never changes or removes an item of a list it has handed out;
    any change other than an append is made on a new list, so a view never changes after it is
    made. It reads like a list (len, iteration, reversed, indexing; a slice is a new list) and
    has no append, insert or item assignment. `list(view)` when a list of one's own is needed.
    """

    __slots__ = ("_items", "_len")

    def __init__(self, items: list[T], length: int | None = None) -> None:
        self._items = items
        self._len = len(items) if length is None else length

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._len)
            return self._items[start:stop:step]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("view index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[T]:
        return islice(self._items, self._len)  # items appended later are not part of this view

    def __reversed__(self) -> Iterator[T]:
        return map(self._items.__getitem__, range(self._len - 1, -1, -1))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PrefixView | list | tuple):
            return NotImplemented
        return len(other) == self._len and all(a == b for a, b in zip(self, other, strict=False))

    __hash__ = None  # type: ignore[assignment]  # like a list

    def __add__(self, other: Iterable[T]) -> list[T]:
        return [*self, *other]

    def __radd__(self, other: Iterable[T]) -> list[T]:
        return [*other, *self]

    def __repr__(self) -> str:
        return repr(list(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return PrefixView, (list(self),)

    def head(self, count: int) -> PrefixView[T]:
        """A view of the first `count` items, in O(1)."""
        return PrefixView(self._items, max(0, min(count, self._len)))

    def starts_with(self, other: Sequence[Any]) -> bool:
        """Whether this view begins with `other`'s items, the same objects. A view of the same
        list is known from the lengths alone (its owner never changes an item it handed out),
        so a caller that keeps the last projection learns in O(1) that the new one only grew."""
        if isinstance(other, PrefixView) and other._items is self._items:
            return other._len <= self._len
        count = len(other)
        return count <= self._len and all(map(operator.is_, islice(self._items, count), other))


class ProjectedEntry(msgspec.Struct):
    """One folded context entry and the messages it projects to. Never changed once made: an
    edit gives its target a new `ProjectedEntry`. (A `msgspec.Struct`, made in C: a walk along a
    long branch makes one per entry.)"""

    source_entry: Entry
    messages: list[Any]


@dataclass(slots=True)
class SessionProjection:
    """What the model sees, with provenance. `entries` and `messages` are read-only sequences
    (`PrefixView`s when they come from a `ProjectedContext`)."""

    entries: Sequence[ProjectedEntry] = field(default_factory=list)
    messages: Sequence[Any] = field(default_factory=list)
    thinking_level: Any = "off"
    model: dict[str, Any] | None = None

    def context(self) -> dict[str, Any]:
        if self.thinking_level is UNDEFINED:
            return {"messages": self.messages, "model": self.model}
        return {"messages": self.messages, "thinkingLevel": self.thinking_level, "model": self.model}


def collect_edits(context_entries: Iterable[Entry]) -> dict[Hashable, Entry]:
    """targetId -> the latest context_edit among the folded context entries."""
    edits: dict[Hashable, Entry] = {}
    for entry in context_entries:
        if type(entry) is dict and entry.get("type") == "context_edit":
            target = entry.get("targetId")
            if hashable(target):
                edits[target] = entry
    return edits


def project_context_entry(entry: Entry, position: int, edits: Mapping[Hashable, Entry]) -> list[Any]:
    """The messages of the folded context entry at `position`, with `edits` (targetId -> edit)
    applied. Only a compaction at position 0 (the newest, which folded the path) contributes
    its summary; an unedited message with content is itself."""
    if type(entry) is dict:
        kind = entry.get("type")
        key = entry.get("id")
        edit = edits.get(key) if edits and hashable(key) else None
        if kind == "message" and edit is None:
            message = entry.get("message")
            if type(message) is dict and message.get("content") is not None:
                return [message]
        elif position > 0 and kind == "compaction":
            return []
    else:
        edit = None
    return project_entry(entry, edit)


def project_context_entries(context_entries: Sequence[Entry]) -> list[ProjectedEntry]:
    """Project each folded entry (`project_context_entry`) with the context's own edits."""
    edits = collect_edits(context_entries)
    return [ProjectedEntry(entry, project_context_entry(entry, i, edits)) for i, entry in enumerate(context_entries)]


class ProjectedContext:
    """The folded context entries of one path, each with its projected messages, and their
    concatenation; extended one entry at a time as the path grows.

    `reset(context)` projects a folded context (`fold_path`); `append(entry)` adds the next
    entry of the path (not a compaction: that re-folds, so the owner resets). A plain entry
    appends its messages; a context edit re-projects only the entries it targets. `view()`
    hands out the result as `PrefixView`s in O(1): the entry and message lists are only ever
    appended to while views of them exist; an edit copies the entry list first if it was handed
    out, and rebuilds the message list as a new list at the next `view()`.

    Invariant: `view()` equals `project_context_entries(entries)` and its flattened messages.
    """

    __slots__ = ("_edit_count", "_edits", "_messages", "_positions", "_projected", "_shared", "_stale", "entries")

    def __init__(self, context: list[Entry] | None = None) -> None:
        self.reset([] if context is None else context)

    def reset(self, context: list[Entry]) -> None:
        """Project `context` (a folded path, root first; the object adopts the list)."""
        self.entries = context
        self._edits = edits = collect_edits(context)
        self._edit_count: int | None = None  # counted on first use
        project = project_context_entry
        self._projected = projected = [ProjectedEntry(e, project(e, i, edits)) for i, e in enumerate(context)]
        self._messages = [m for p in projected for m in p.messages]
        self._positions: dict[Hashable, list[int]] | None = None  # id -> context positions, built on first use
        self._stale = False
        self._shared = False

    @property
    def edit_count(self) -> int:
        """How many context_edit entries the context holds."""
        if self._edit_count is None:
            self._edit_count = sum(1 for e in self.entries if field_of(e, "type") == "context_edit")
        return self._edit_count

    def _positions_of(self, key: Hashable) -> list[int]:
        positions = self._positions
        if positions is None:
            positions = {}
            for i, entry in enumerate(self.entries):
                entry_id = field_of(entry, "id")
                if hashable(entry_id):
                    positions.setdefault(entry_id, []).append(i)
            self._positions = positions
        return positions.get(key, [])

    def append(self, entry: Entry) -> list[Any]:
        """Add the next (non-compaction) entry of the path to the context; returns the messages
        it projects to."""
        if type(entry) is dict:
            kind = entry.get("type")
            if kind == "message":
                return self.append_message(entry, entry.get("id"), entry.get("message"))
            key = entry.get("id")
        else:
            kind = key = None
        position = len(self.entries)
        self.entries.append(entry)
        if kind == "context_edit":
            self._retarget(entry, position)
        messages = project_context_entry(entry, position, self._edits)
        self._add(entry, key, position, messages)
        return messages

    def append_message(self, entry: dict[str, Any], key: Any, message: Any) -> list[Any]:
        """`append` of a `message` entry whose id and message the caller has read already (a
        walk along a long branch appends mostly these)."""
        position = len(self.entries)
        self.entries.append(entry)
        edits = self._edits
        if type(message) is dict and message.get("content") is not None and (
                not edits or (key not in edits if type(key) is str else not hashable(key) or key not in edits)):
            messages = [message]  # the common case (project_context_entry's first rule), inline
        else:
            messages = project_context_entry(entry, position, edits)
        # `_add`, inline
        self._projected.append(ProjectedEntry(entry, messages))
        positions = self._positions
        if positions is not None and (type(key) is str or hashable(key)):
            found = positions.get(key)
            if found is None:
                positions[key] = [position]
            else:
                found.append(position)
        if not self._stale:
            self._messages.extend(messages)
        return messages

    def _add(self, entry: Entry, key: Any, position: int, messages: list[Any]) -> None:
        self._projected.append(ProjectedEntry(entry, messages))
        positions = self._positions
        if positions is not None and (type(key) is str or hashable(key)):
            found = positions.get(key)
            if found is None:
                positions[key] = [position]
            else:
                found.append(position)
        if not self._stale:
            self._messages.extend(messages)

    def _retarget(self, edit: dict[str, Any], position: int) -> None:
        """Take in the context edit at `position`: re-project the earlier entries it targets."""
        if self._edit_count is not None:
            self._edit_count += 1
        target = edit.get("targetId")
        if not hashable(target):
            return
        self._edits[target] = edit
        retarget = [i for i in self._positions_of(target) if i < position]
        if not retarget:
            return
        if self._shared:  # views hold the old list: change a copy
            self._projected = list(self._projected)
            self._shared = False
        projected, context, edits = self._projected, self.entries, self._edits
        for i in retarget:
            projected[i] = ProjectedEntry(context[i], project_context_entry(context[i], i, edits))
        self._stale = True

    def view(self, settings: ContextSettings | None = None) -> SessionProjection:
        """The projection now, in O(1) (see the class docstring)."""
        if self._stale:
            self._messages = [m for p in self._projected for m in p.messages]
            self._stale = False
        self._shared = True
        projection = SessionProjection(PrefixView(self._projected), PrefixView(self._messages))
        if settings is not None:
            projection.thinking_level, projection.model = settings.thinking_level, settings.model
        return projection

    def contributes(self, entry_id: Any) -> bool:
        """Whether a context entry with `entry_id` projects to some message."""
        if not hashable(entry_id):
            return any(field_of(p.source_entry, "id") == entry_id and p.messages for p in self._projected)
        projected = self._projected
        return any(projected[i].messages for i in self._positions_of(entry_id))

    def contributes_at(self, position: int) -> bool:
        """Whether the context entry at `position` projects to some message."""
        return bool(self._projected[position].messages)

    def messages_of(self, entry_id: Any) -> list[Any]:
        """The projected messages of the context entries with `entry_id` (what an edit of that
        id replaces), in context order."""
        if not hashable(entry_id):
            return [m for p in self._projected if field_of(p.source_entry, "id") == entry_id for m in p.messages]
        projected = self._projected
        return [m for i in self._positions_of(entry_id) for m in projected[i].messages]

    def newest_messages(self) -> list[Any]:
        """The projected messages of the newest context entry."""
        return self._projected[-1].messages if self._projected else []


def settings_of(thinking: Entry | None, model: Entry | None) -> ContextSettings:
    """The settings of a path whose last thinking_level_change is `thinking` and whose last
    model-setting entry (model_change or assistant message) is `model` (None: none)."""
    settings = ContextSettings()
    if thinking is not None:
        settings.update(thinking)
    if model is not None:
        settings.update(model)  # sets only the model
    return settings


def setting_entries_from_end(thinking_at: int, model_change_at: int, last_assistant_after: Callable[[int], int],
                             entry_at: Callable[[int], Entry]) -> tuple[Entry | None, Entry | None]:
    """The entries `settings_of` needs, found from the end of a path (last writer wins):
    `thinking_at` and `model_change_at` are the path indexes of the last thinking_level_change
    and model_change (-1: none); `last_assistant_after(i)` the index of the last assistant
    message after `i` (-1: none); `entry_at(i)` the entry at a path index. Only those entries
    are read, so a path of unparsed lines stays unparsed."""
    model_at = max(model_change_at, last_assistant_after(model_change_at))
    return (entry_at(thinking_at) if thinking_at >= 0 else None, entry_at(model_at) if model_at >= 0 else None)


def settings_from_end(thinking_at: int, model_change_at: int, last_assistant_after: Callable[[int], int],
                      entry_at: Callable[[int], Entry]) -> ContextSettings:
    """`get_context_settings` of a path from its last entries of each kind
    (`setting_entries_from_end`)."""
    return settings_of(*setting_entries_from_end(thinking_at, model_change_at, last_assistant_after, entry_at))


def project_path(path: Sequence[Entry], *, with_settings: bool = True) -> SessionProjection:
    """The projection of a resolved root-first path (Pi buildSessionProjection on it); without
    `with_settings`, thinking level and model keep their defaults (planning does not need them)."""
    with gc_paused():
        projection = ProjectedContext(fold_path(path)).view()
    if with_settings:
        settings = get_context_settings(path)
        projection.thinking_level, projection.model = settings.thinking_level, settings.model
    return projection


def build_session_projection(
    entries: Sequence[Entry], leaf_id: LeafArg = LAST, by_id: Mapping[Hashable, Entry] | None = None
) -> SessionProjection:
    """Compaction-aware, edit-aware projection with provenance (Pi buildSessionProjection)."""
    with gc_paused():
        return project_path(build_session_path(entries, leaf_id, by_id))


def build_session_context(
    entries: Sequence[Entry], leaf_id: LeafArg = LAST, by_id: Mapping[Hashable, Entry] | None = None
) -> dict[str, Any]:
    """`{"messages", "thinkingLevel", "model"}` exactly as Pi's buildSessionContext returns it
    (the messages as a read-only `PrefixView`)."""
    return build_session_projection(entries, leaf_id, by_id).context()

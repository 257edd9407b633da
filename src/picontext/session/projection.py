"""From entries to what the model sees: the projection pipeline, as pure functions.

    build_session_path        leaf -> root walk, reversed              (Pi buildSessionPath)
    get_context_settings      thinking level and model from the path   (Pi getSessionContextSettings)
    build_context_entries     fold the path at its newest compaction   (Pi buildContextEntries)
    entry_to_messages         one entry -> its messages                (Pi sessionEntryToContextMessages)
    project_entry             apply the winning context edit           (Pi projectContextEntry)
    build_session_projection  all of the above, with provenance        (Pi buildSessionProjection)
    build_session_context     {messages, thinkingLevel, model}         (Pi buildSessionContext)

Nothing here mutates its input: unedited messages are the stored objects themselves, so callers
treat them as read-only. The module-level functions are the source of truth; the session
manager keeps an incremental copy (`picontext.session.live`) that a test holds equal to them.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

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


def fold_path(path: Sequence[Entry]) -> list[Entry]:
    """Fold a root-first path at its newest compaction: `[C, kept..., after...]`.

    Kept = entries before C from the one named by `firstKeptEntryId` on, without system
    messages; an id that does not occur before C (including C's own: retain-none) keeps nothing.
    """
    compaction_at = -1
    for i in range(len(path) - 1, -1, -1):
        if field_of(path[i], "type") == "compaction":
            compaction_at = i
            break
    if compaction_at < 0:
        return list(path)
    compaction = path[compaction_at]
    # Pi locates the compaction by id; with duplicate ids the first occurrence wins.
    cid = compaction.get("id")
    compaction_at = next(i for i, entry in enumerate(path) if field_of(entry, "id") == cid)
    first_kept = compaction.get("firstKeptEntryId")
    result = [compaction]
    start = next((i for i in range(compaction_at) if field_of(path[i], "id") == first_kept), compaction_at)
    result.extend(entry for entry in path[start:compaction_at] if message_role(entry) != "system")
    result.extend(path[compaction_at + 1 :])
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


@dataclass(slots=True)
class ProjectedEntry:
    source_entry: Entry
    messages: list[Any]


@dataclass(slots=True)
class SessionProjection:
    entries: list[ProjectedEntry] = field(default_factory=list)
    messages: list[Any] = field(default_factory=list)
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


def project_context_entries(context_entries: Sequence[Entry]) -> list[ProjectedEntry]:
    """Project each folded entry; only a compaction at index 0 contributes its summary."""
    edits = collect_edits(context_entries)
    projected: list[ProjectedEntry] = []
    append = projected.append
    for index, entry in enumerate(context_entries):
        if type(entry) is dict:
            kind = entry.get("type")
            key = entry.get("id")
            edit = edits.get(key) if edits and hashable(key) else None
            if kind == "message" and edit is None:
                # The common case, inlined: an unedited message with content is itself.
                message = entry.get("message")
                if type(message) is dict and message.get("content") is not None:
                    append(ProjectedEntry(entry, [message]))
                    continue
            elif index > 0 and kind == "compaction":
                append(ProjectedEntry(entry, []))
                continue
        else:
            edit = None
        append(ProjectedEntry(entry, project_entry(entry, edit)))
    return projected


def build_session_projection(
    entries: Sequence[Entry], leaf_id: LeafArg = LAST, by_id: Mapping[Hashable, Entry] | None = None
) -> SessionProjection:
    """Compaction-aware, edit-aware projection with provenance (Pi buildSessionProjection)."""
    with gc_paused():
        path = build_session_path(entries, leaf_id, by_id)
        settings = get_context_settings(path)
        projected = project_context_entries(fold_path(path))
        messages = [m for p in projected for m in p.messages]
    return SessionProjection(projected, messages, settings.thinking_level, settings.model)


def build_session_context(
    entries: Sequence[Entry], leaf_id: LeafArg = LAST, by_id: Mapping[Hashable, Entry] | None = None
) -> dict[str, Any]:
    """`{"messages", "thinkingLevel", "model"}` exactly as Pi's buildSessionContext returns it."""
    return build_session_projection(entries, leaf_id, by_id).context()

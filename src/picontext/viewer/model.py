"""The data behind the viewer page, computed once in Python with the session and compaction code.

`build_view(file_entries, leaf)` returns two things the page embeds:

* `meta` — a compact JSON object: header facts, one short row per entry (id, parent, kind, role,
  preview, label) in tree display order, the branch, what `picontext dropped` reports, the plot
  series (`timeline.py`), each compaction's summary, ledger, cut point and summarized entries, and
  tokens/cost per model;
* `lines` — each entry as one JSON line, parsed by the page only when the entry is opened, so a
  100k-entry session costs the browser one string split, not 100k objects or DOM nodes.

Everything is computed by the same functions the CLI uses (`session.dropped`, `compaction.tokens`,
`session.projection`, the manager's tree and labels), in one walk along the branch over one
incremental projection (`timeline.py`); the page only shows it.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import orjson
from msgspec import UNSET

from picontext import _json
from picontext._gc import gc_paused
from picontext.ai.models import ModelCatalog, default_catalog
from picontext.compaction.records import FAILURE_TYPE, failure_line, failure_records
from picontext.compaction.settings import CompactionSettings, load_compaction_settings
from picontext.compaction.verify import parse_ledger
from picontext.errors import EntryNotFound, PicontextError
from picontext.session.dropped import dropped_reasons, entry_text, one_line
from picontext.session.index import EntryIndex
from picontext.session.migrations import migrate_to_current
from picontext.session.projection import field_of, hashable
from picontext.session.records import RawLine
from picontext.session.tree import path_to, tree_positions
from picontext.viewer.page import embedded_json, pack_in_background
from picontext.viewer.parallel import beside, can_fork, spare_core
from picontext.viewer.timeline import Timeline, build_timeline

__all__ = ["PREVIEW_CHARS", "build_view", "entry_preview", "page_data", "page_parts", "view_data"]

PREVIEW_CHARS = 80
_CONTENT = ("message", "custom_message")
_WHY = {"compacted": 0, "omitted": 1, "replaced": 2}  # DroppedEntry.why, coded
_PARALLEL_FROM = 5_000  # entries: below this, forking costs more than it saves


def _short(text: str, width: int = PREVIEW_CHARS) -> str:
    return one_line(text, width, width * 4)  # the start of a long text is enough for a preview


def entry_preview(entry: Any) -> str:
    """One line of plain text describing any entry (the page escapes it)."""
    if not isinstance(entry, dict):
        return _short(_json.dumps(entry).decode(errors="replace"))
    kind = entry.get("type")
    if kind in _CONTENT:
        text = entry_text(entry)
        return _system_preview(entry, text) or _short(text)
    if kind == "compaction":
        return _short(f"compaction · {entry.get('tokensBefore')} tokens before · {entry.get('summary', '')}")
    if kind == "branch_summary":
        return _short(f"branch summary · {entry.get('summary', '')}")
    if kind == "context_edit":
        what = "omit" if entry.get("replacement") is None else "replace"
        return _short(f"context edit · {what} {entry.get('targetId')}")
    if kind == "model_change":
        return _short(f"model → {entry.get('provider')}/{entry.get('modelId')}")
    if kind == "thinking_level_change":
        return _short(f"thinking → {entry.get('thinkingLevel')}")
    if kind == "label":
        return _short(f"label {entry.get('targetId')} = {entry.get('label', '(cleared)')}")
    if kind == "session_info":
        return _short(f"name = {entry.get('name')}")
    if kind == "custom" and entry.get("customType") == FAILURE_TYPE:
        return _short(f"compaction failed · {failure_line(failure_records([entry])[0])}")
    if kind == "custom":
        return _short(f"custom [{entry.get('customType')}]")
    if kind == "usage":
        found = entry.get("usage")
        usage: dict[str, Any] = found if isinstance(found, dict) else {}
        return _short(f"usage [{entry.get('kind')}] {entry.get('provider')}/{entry.get('model')}: "
                      f"{usage.get('totalTokens')} tokens")
    return _short(f"{kind} (unknown type)")


def _system_preview(entry: dict[str, Any], text: str) -> str | None:
    """The preview of a system prompt entry without text of its own (`text` is its `entry_text`);
    None for any other entry."""
    message = entry.get("message")
    if isinstance(message, dict) and message.get("role") == "system" and not text.strip():
        sections = message.get("sections")
        names = ", ".join(map(str, sections)) if isinstance(sections, dict) else ""
        return _short(f"system prompt · sections: {names}" if names else "system prompt")
    return None


def _role(entry: Any) -> str:
    """A message's role; "compactionFailed" marks a failed summary attempt's record, which the tree
    shows among the conversation (other custom entries are settings, hidden by default)."""
    kind = field_of(entry, "type")
    if kind == "message":
        return str(field_of(field_of(entry, "message"), "role") or "")
    if kind == "custom" and field_of(entry, "customType") == FAILURE_TYPE:
        return "compactionFailed"
    return ""


def _flags(message: dict[str, Any]) -> int:
    """Of an assistant message: bit 1, only tool calls (Pi's filters hide it); bit 2, an error or
    aborted turn."""
    content = message.get("content")
    has_text = False
    # `not text.isspace()` is `text.strip() != ""` for a non-empty text, without copying it
    if isinstance(content, str):
        has_text = content != "" and not content.isspace()
    elif isinstance(content, list):
        for b in content:
            if isinstance(b, dict) and b.get("type") == "text" and (text := str(b.get("text", ""))) \
                    and not text.isspace():
                has_text = True
                break
    stop = message.get("stopReason")
    failed = bool(stop) and stop not in ("stop", "toolUse")
    return (0 if has_text else 1) | (2 if failed else 0)


_USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
_USAGE_SET = frozenset(_USAGE_KEYS)
_NUMBER = (int, float)  # a JSON number (`bool` is not one: its type is `bool`)


def _add_usage(row: dict[str, Any], usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    get = usage.get
    # The usual usage, every count an int, into a row that has them all (no key added: the
    # row's keys keep their order)
    a, b, c, d, e = get("input"), get("output"), get("cacheRead"), get("cacheWrite"), get("totalTokens")
    if (type(a) is int and type(b) is int and type(c) is int and type(d) is int and type(e) is int
            and row.keys() >= _USAGE_SET):
        row["input"] += a
        row["output"] += b
        row["cacheRead"] += c
        row["cacheWrite"] += d
        row["totalTokens"] += e
    else:
        for key in _USAGE_KEYS:
            value = get(key)
            if type(value) in _NUMBER:
                row[key] = row.get(key, 0) + value
    cost = get("cost")
    if isinstance(cost, dict) and isinstance(total := cost.get("total"), _NUMBER):
        row["cost"] = row.get("cost", 0) + total


class _ModelsTable:
    """Tokens and cost per model over the whole file; the extra rows make the total equal `stats`."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def count(self, name: str, usage: Any) -> None:
        r = self.rows.get(name)
        if r is None:
            r = self.rows[name] = {"model": name, "calls": 0}
        r["calls"] += 1
        _add_usage(r, usage)

    def add(self, entry: Any, kind: Any, message: Any, role: Any) -> None:
        """One entry of the file: its type, and for a `message` entry its message and role."""
        if kind == "message":
            if role == "assistant":
                self.count(f"{message.get('provider', '?')}/{message.get('model', '?')}", message.get("usage"))
            elif role == "toolResult" and isinstance(message.get("usage"), dict):
                self.count("(inside tool results)", message.get("usage"))
        elif kind == "usage":
            self.count(f"{entry.get('provider', '?')}/{entry.get('model', '?')}", entry.get("usage"))
        elif kind in ("compaction", "branch_summary") and isinstance(entry.get("usage"), dict):
            self.count("(compaction summaries)" if kind == "compaction" else "(branch summaries)", entry.get("usage"))

    def table(self) -> list[dict[str, Any]]:
        return sorted(self.rows.values(), key=lambda r: -r.get("cost", 0))


# The meta's keys in page order; `_OWN` are the entries' own facts (`_EntryFacts.columns`).
_KEYS = ("version", "file", "header", "name", "ids", "kinds", "roles", "flags", "previews", "order", "prefix",
         "labels", "branch", "leaf", "dropped", "compactions", "plot", "models")
_OWN = ("ids", "kinds", "roles", "flags", "previews", "order", "prefix", "labels", "models")


@dataclass(slots=True)
class _EntryFacts:
    """What the page shows of each entry on its own, in file order (no branch or projection
    needed): the meta's per-entry columns (`_OWN`: ids, kinds, roles, flags, previews, the tree
    rows, the models table), and for message and custom message entries the length of their
    text and, where it may differ from the preview, the preview `dropped` makes of the whole text.

    `columns` holds the values; after `serialize()` they are in `json` instead, each as the
    page embeds it (what a forked worker sends back: bytes pickle without per-object work)."""

    columns: dict[str, Any]
    chars: dict[int, int]
    whole_previews: dict[int, str]
    json: dict[str, bytes | memoryview] = field(default_factory=dict)
    packed: bytes | memoryview | None = None  # `page.pack` of the lines, when asked for

    def serialize(self) -> None:
        self.json = {key: embedded_json(_plain_dumps(value) if key in _PLAIN else _json.dumps(value))
                     for key, value in self.columns.items()}
        self.columns = {}

    def sent(self) -> _EntryFacts:
        """These facts serialized, as a forked worker returns them: the JSON and the packed lines
        out of band (`parallel.beside` stores them as they are; they come back as memoryviews)."""
        out = {key: cast(Any, pickle.PickleBuffer(value)) for key, value in self.json.items()}
        packed = None if self.packed is None else cast(Any, pickle.PickleBuffer(self.packed))
        return _EntryFacts({}, self.chars, self.whole_previews, out, packed)

    def previews(self) -> list[str]:
        """The previews column, as values (read back from its JSON when serialized)."""
        found: list[str] = self.columns["previews"] if self.columns else _json.loads(self.json["previews"])
        return found

    def set_previews(self, previews: list[str]) -> None:
        if self.columns:
            self.columns["previews"] = previews
        else:
            self.json["previews"] = embedded_json(_plain_dumps(previews))


# Columns of strings and entry positions only: orjson writes them as JSON.stringify does (no
# number format to check); a lone surrogate, which it refuses, takes the exact encoder.
_PLAIN = frozenset({"ids", "kinds", "roles", "flags", "previews", "order", "prefix"})


def _plain_dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return _json.dumps(value)


def _entry_facts(index: EntryIndex, entries: Iterable[Any]) -> _EntryFacts:
    ids: list[str] = []
    kinds: list[str] = []
    roles: list[str] = []
    flags: list[int] = []
    shown: list[str] = []
    chars: dict[int, int] = {}
    whole: dict[int, str] = {}
    models = _ModelsTable()
    count = models.count
    width = PREVIEW_CHARS
    limit = width * 4
    head = width * 2
    after = width + 1
    message: Any
    for i, entry in enumerate(entries):
        if type(entry) is dict:
            kind, entry_id = entry.get("type"), entry.get("id")
            message = entry.get("message") if kind == "message" else None
            role = message.get("role") if type(message) is dict else None
        else:
            kind = entry_id = message = role = None
        ids.append(entry_id if type(entry_id) is str else _json.dumps(entry_id).decode())
        kinds.append(kind if type(kind) is str else str(kind))
        if kind == "message":
            roles.append(role if type(role) is str and role else str(role or ""))
            flags.append(_flags(message) if role == "assistant" else 0)
        else:
            roles.append(_role(entry) if kind == "custom" else "")
            flags.append(0)
        if kind == "message" or kind == "custom_message":
            text = entry_text(entry)
            # `_short`: the start of a long text is enough. one_line(text, width, limit) flattens
            # the first 2 * width characters first: when they fill the width, that is its answer.
            # Its first width + 1 characters without a whitespace run (no whitespace but single
            # spaces inside, and `isprintable` is False for any other whitespace) are the flat
            # text's own: then there is nothing to split.
            start = text[:after]
            if len(start) == after and start.isprintable() and start[0] != " " and start[-1] != " " \
                    and "  " not in start:
                plain = start[: width - 1] + "…"
            else:
                flat = " ".join(text[:head].split())
                plain = flat[: width - 1] + "…" if len(flat) > width else one_line(text, width, limit)
            # Only a system prompt's preview is not its text's (a custom message has no role).
            preview = (_system_preview(entry, text) or plain) if role == "system" or kind != "message" else plain
            chars[i] = len(text)
            # `dropped` previews the whole text: differently where the preview saw only the start
            # of a long text, or is a system prompt's.
            if preview is not plain or (len(text) > limit and not plain.endswith("…")):
                whole[i] = one_line(text)
        else:
            preview = entry_preview(entry)
        shown.append(preview)
        if role == "assistant":  # most calls: counted here, without the table's dispatch
            count(f"{message.get('provider', '?')}/{message.get('model', '?')}", message.get("usage"))
        elif kind == "message":  # the table's rule for other messages: a tool result's usage
            if role == "toolResult" and isinstance(message.get("usage"), dict):
                count("(inside tool results)", message.get("usage"))
        elif kind is not None:
            models.add(entry, kind, message, role)
    order, prefix, labels = _tree_rows(index)
    columns = {"ids": ids, "kinds": _codes(kinds), "roles": _codes(roles), "flags": flags, "previews": shown,
               "order": order, "prefix": prefix, "labels": labels, "models": models.table()}
    return _EntryFacts(columns, chars, whole)


def _ledger(entry: dict[str, Any]) -> dict[str, Any]:
    details = entry.get("details")
    if isinstance(details, dict) and isinstance(details.get("verifiedFacts"), dict):
        return details["verifiedFacts"]
    facts = parse_ledger(entry.get("summary") if isinstance(entry.get("summary"), str) else None)
    return {"lastUserRequest": facts.last_user_request, "modifiedFiles": facts.modified_files,
            "errors": facts.errors}


def _window_lookup(catalog: ModelCatalog | None) -> Callable[[str, str], int | None]:
    cache: dict[tuple[str, str], int | None] = {}

    def window_of(provider: str, model: str) -> int | None:
        key = (provider, model)
        if key not in cache:
            found = catalog.find(provider, model) if catalog is not None else None
            cache[key] = int(found["contextWindow"]) if found and found.get("contextWindow") else None
        return cache[key]

    return window_of


def build_view(file_entries: list[Any], leaf: str | None = None, *, file_name: str = "",
               catalog: ModelCatalog | None = None,
               settings: CompactionSettings | None = None) -> tuple[dict[str, Any], list[bytes]]:
    """`(meta, lines)` for the page; `leaf` picks the branch (default: the session's leaf)."""
    meta, joined = view_data(file_entries, leaf, file_name=file_name, catalog=catalog, settings=settings)
    return meta, joined.split(b"\n") if meta["ids"] else []


def view_data(file_entries: list[Any], leaf: str | None = None, *, file_name: str = "",
              catalog: ModelCatalog | None = None,
              settings: CompactionSettings | None = None) -> tuple[dict[str, Any], bytes]:
    """`build_view` with the lines joined by newlines, as the page embeds them."""
    with gc_paused():  # 100k tree nodes and rows: the collector would rescan every parsed entry each time
        view = _View(file_entries, leaf)
        lines = view.lines()
        own, dropped = view.meta(file_name, catalog, settings)
        facts = _entry_facts(view.index, view.entries())
        own["dropped"] = view.finish(dropped, facts)
        return {key: own[key] if key in own else facts.columns[key] for key in _KEYS}, lines


def page_data(file_entries: list[Any], leaf: str | None = None, *, file_name: str = "",
              catalog: ModelCatalog | None = None, settings: CompactionSettings | None = None,
              parallel: bool | None = None, keep: list[Any] | None = None) -> tuple[bytes, bytes]:
    """`page_parts` with the meta joined."""
    parts, packed = page_parts(file_entries, leaf, file_name=file_name, catalog=catalog, settings=settings,
                               parallel=parallel, keep=keep)
    return b"".join(parts), bytes(packed)


def page_parts(file_entries: list[Any], leaf: str | None = None, *, file_name: str = "",
               catalog: ModelCatalog | None = None, settings: CompactionSettings | None = None,
               parallel: bool | None = None,
               keep: list[Any] | None = None) -> tuple[list[bytes | memoryview], bytes | memoryview]:
    """`(meta, packed lines)` as the export embeds them, the meta in pieces that join into it
    (the export writes them as they are; a forked worker's are views of what it stored):
    `view_data`'s meta as JSON made safe for the page (`page.embedded_json`), and `page.pack` of
    its lines.

    The entries' own facts, serialized, and the packed lines are computed beside the walk along
    the branch: in a forked copy of this process when one can be made (`parallel.beside`; by
    default from `_PARALLEL_FROM` entries when the machine has a core to spare:
    `parallel.spare_core`), else in this one (the packing in a thread beside the walk). The fork
    comes before any entry is parsed: this process parses the branch for the walk and keeps it;
    the worker parses each entry, takes its facts and lets it go (`_View.each_entry`), so it
    neither holds a second parsed session nor copies this one's pages by touching them. With
    `keep`, the parsed entries are appended to it instead of being freed on return (a process
    about to end skips that)."""
    with gc_paused():
        view = _View(file_entries, leaf)
        if parallel is None:
            parallel = len(view.index) >= _PARALLEL_FROM and spare_core()
        # Not forking: the lines are packed in a thread from now on, beside the walk too (a
        # thread started before a fork would stop it: `can_fork`).
        forking = parallel and can_fork()
        packing = None if forking else pack_in_background(view.line_list())

        def own_facts() -> _EntryFacts:
            pack = packing if packing is not None else pack_in_background(view.line_list())
            facts = _entry_facts(view.index, view.each_entry())
            if forking:  # sent back as bytes; in this process, serialized once the previews are final
                facts.serialize()
            facts.packed = pack()
            return facts

        with beside(own_facts, parallel=parallel, sent=_EntryFacts.sent) as facts_of:
            own, dropped = view.meta(file_name, catalog, settings)
            # What does not wait for the facts is written while the worker may still be at them.
            written = {key: embedded_json(_json.dumps(value)) for key, value in own.items()}
            facts = facts_of()
        written["dropped"] = embedded_json(_plain_dumps(view.finish(dropped, facts)))
        if not facts.json:
            facts.serialize()
        assert facts.packed is not None
        if keep is not None:
            keep.append(view)
        parts: list[bytes | memoryview] = [b"{"]
        for key in _KEYS:  # the meta of 100k entries is ~30 MB: left in pieces, written as they are
            parts += (b'"', key.encode(), b'":', facts.json[key] if key in facts.json else written[key], b",")
        parts[-1] = b"}"
        return parts, facts.packed


class _View:
    """A session's entries as the page sees them: the index (as the session manager loads it),
    the leaf and its branch. Entries are parsed on first use; the lines the store read are kept
    as they are for the page."""

    def __init__(self, file_entries: list[Any], leaf: str | None) -> None:
        self.header = file_entries[0] if file_entries and isinstance(file_entries[0], dict) else {}
        if any(field_of(e, "type") == "session" for e in file_entries):  # as the session manager loads them
            migrate_to_current(file_entries)
        index = self.index = EntryIndex()
        index.load(file_entries)
        # The leaf and branch as the session manager has them (get_leaf_id, get_branch).
        if leaf is None:
            last = index.last_id()
            leaf = None if last is UNSET else last
        elif leaf not in index:
            raise EntryNotFound(leaf)
        self.branch_index = path_to(index, leaf) if leaf and leaf in index else []
        # Taken before anything is parsed (parsing replaces a RawLine in the index by its value).
        # (`raw` first: the `line` property's call, for each of 100k lines, only where it is empty)
        self._stored = [(e.raw or e.line) if type(e) is RawLine else None for e in index.entries]

    def entries(self) -> list[Any]:
        """Every entry, parsed, in file order."""
        entry = self.index.entry
        return [entry(i) for i in range(len(self.index))]

    def each_entry(self) -> Iterator[Any]:
        """Every entry, parsed, in file order; one not parsed yet is parsed for the caller only
        (not kept in the index: its memory is reused for the next)."""
        for item in self.index.entries:
            yield item.parse() if type(item) is RawLine else item

    def lines(self) -> bytes:
        """The entries as JSON lines joined by newlines: a line the store kept unparsed as read
        (it parses to the same value), any other entry as JSON.stringify writes it."""
        stored = self._stored
        if stored and not any(stored):
            return _json.dumps_joined_lines(self.entries())
        return b"\n".join(self.line_list())

    def line_list(self) -> list[bytes]:
        """`lines()`, not joined."""
        stored = self._stored
        missing = [i for i, line in enumerate(stored) if not line]
        if missing:
            entry = self.index.entry
            written = _json.dumps_joined_lines([entry(i) for i in missing]).split(b"\n")
            stored = list(stored)
            for i, line in zip(missing, written, strict=True):
                stored[i] = line
        return stored  # type: ignore[return-value]

    def meta(self, file_name: str, catalog: ModelCatalog | None,
             settings: CompactionSettings | None) -> tuple[dict[str, Any], _Dropped]:
        """The meta's values that depend on the branch (every key of `_KEYS` not in `_OWN`), the
        dropped list still without what it takes from the entries' facts (`finish` adds it)."""
        index, branch_index = self.index, self.branch_index
        branch = [index.entry(i) for i in branch_index]
        catalog = catalog if catalog is not None else _safe_catalog()
        # One walk along the branch, over one incremental projection: the plot, each compaction's
        # summarized entries, and the branch's projection that `dropped` reads.
        timeline = build_timeline(branch, _window_lookup(catalog))
        reasons = dropped_reasons(branch, timeline.projection)
        last_model = next((m for m in reversed(branch) if field_of(field_of(m, "message"), "role") == "assistant"),
                          None)
        if settings is None:
            try:
                settings = load_compaction_settings(None, _model_ref(last_model))
            except PicontextError:
                settings = CompactionSettings()
        compactions = _compactions(branch, branch_index, timeline)
        plot_models: dict[str, int] = {}
        plot = {
            "requests": [[branch_index[r.position], r.reported, r.estimate, r.window,
                          plot_models.setdefault(r.model, len(plot_models))] for r in timeline.requests],
            "models": list(plot_models),
            "compactions": [[branch_index[c.position], c.requests_before, c.tokens_before, c.tokens_after,
                             c.overflow] for c in timeline.compactions],
            "overflows": [branch_index[p] for p in timeline.overflows],
            "settings": settings.to_json(),
        }
        ids = index.ids_of(branch_index)
        try:  # id -> position (the last on the branch with that id), built in C
            on_branch: dict[Any, int] = dict(zip(ids, branch_index, strict=True))
        except TypeError:  # an id that cannot be a key (a JSON list or object): leave those out
            on_branch = {k: i for k, i in zip(ids, branch_index, strict=True) if hashable(k)}
        rows: list[list[int]] = []
        at: list[int] = []
        shows: dict[int, int] = {}  # tree row -> the dropped entry whose `dropped` preview it shows
        where = on_branch.get
        for position, _role, why, by in reasons:
            entry_at = branch_index[position]  # the dropped entry itself
            key = ids[position]  # its id, read without touching the entry again (UNSET: none)
            tree_at = where(key if type(key) is str else str(None if key is UNSET else key), -1)
            rows.append([tree_at, _WHY[why], where(by, -1) if by is not None else -1])
            at.append(entry_at)
            shows[tree_at] = entry_at
        header = self.header
        return {
            "version": 1,
            "file": file_name,
            "header": {k: header.get(k) for k in ("id", "version", "timestamp", "cwd", "parentSession") if k in header},
            "name": index.session_name(),
            "branch": branch_index,
            "leaf": branch_index[-1] if branch_index else None,
            "compactions": compactions,
            "plot": plot,
        }, _Dropped(rows, at, shows)

    @staticmethod
    def finish(dropped: _Dropped, facts: _EntryFacts) -> list[list[int]]:
        """The dropped list, each row with its entry's text length from `facts`; `facts`' previews
        corrected where `dropped` shows another."""
        chars, whole = facts.chars, facts.whole_previews
        rows = dropped.rows
        for row, entry_at in zip(rows, dropped.at, strict=True):
            row.append(chars[entry_at])
        # Most entries of a long session are dropped ones: their preview is the one `dropped`
        # makes, the entry's own unless the start of its text was not enough (or a repeated id
        # points the row at another entry).
        shows = {tree_at: at for tree_at, at in dropped.shows.items()
                 if tree_at >= 0 and (tree_at != at or at in whole)}
        if shows:
            previews = facts.previews()
            replaced = {tree_at: whole.get(at, previews[at]) for tree_at, at in shows.items()}
            previews = list(previews)
            for tree_at, preview in replaced.items():
                previews[tree_at] = preview
            facts.set_previews(previews)
        return rows


class _Dropped:
    """The dropped list as the walk finds it: per dropped entry its tree row, why (`_WHY`) and the
    row of the entry that dropped it (`rows`), and its position in the file (`at`), where the
    entries' facts give its text's length; `shows`: tree row -> the dropped entry it shows.
    (A plain class: a dataclass is made by compiling its methods at import, ~2 M instructions.)"""

    __slots__ = ("at", "rows", "shows")

    def __init__(self, rows: list[list[int]], at: list[int], shows: dict[int, int]) -> None:
        self.rows, self.at, self.shows = rows, at, shows


def _tree_rows(index: EntryIndex) -> tuple[list[int], list[str], list[list[Any]]]:
    """Entry positions in display order, their indentation and labels: a linear chain keeps its
    indentation, each branch point indents (as `picontext tree` draws it)."""
    roots, children = tree_positions(index)
    labels = index.labels
    label_at: dict[int, Any] = {}
    if labels and index.ids_unique() and None not in labels:  # each label names at most one entry
        for target, text in labels.items():
            at = index.position_of(target)
            if at is not None and text:
                label_at[at] = text
    elif labels:
        for position in range(len(index)):
            entry = index.entry(position)
            key = entry.get("id") if type(entry) is dict else None
            label = labels.get(key if hashable(key) else None)
            if label:
                label_at[position] = label
    order: list[int] = []
    prefix: list[str] = []
    rows: list[list[Any]] = []
    stack: list[tuple[int, str, str]] = [(r, "", "") for r in reversed(roots)]
    while stack:
        position, pre, child_pre = stack.pop()
        kids = None
        while True:  # down a linear chain without the stack (most of a session)
            order.append(position)
            prefix.append(pre)
            if label_at and (label := label_at.get(position)):
                rows.append([position, label])
            kids = children.get(position)
            if kids is None or len(kids) != 1:
                break
            position, pre = kids[0], child_pre
        if kids is not None:
            for i in range(len(kids) - 1, -1, -1):
                last = i == len(kids) - 1
                stack.append((kids[i], child_pre + ("└─ " if last else "├─ "), child_pre + ("   " if last else "│  ")))
    return order, prefix, rows


def _compactions(branch: list[Any], branch_index: list[int], timeline: Timeline) -> list[dict[str, Any]]:
    """Per compaction of the branch: summary, ledger, cut point and the entries it summarized."""
    if not timeline.compactions:
        return []
    at_of = dict(zip(map(id, branch), branch_index, strict=True))
    out = []
    for mark in timeline.compactions:
        pos, entry = mark.position, branch[mark.position]
        first_kept = entry.get("firstKeptEntryId")
        kept_pos = mark.kept
        kept_at = branch_index[kept_pos] if kept_pos is not None and kept_pos < pos else None
        out.append({"index": branch_index[pos], "summary": str(entry.get("summary") or ""),
                    "tokensBefore": entry.get("tokensBefore"), "firstKept": first_kept,
                    "firstKeptIndex": kept_at, "ledger": _ledger(entry),
                    "summarized": list(map(at_of.__getitem__, map(id, mark.summarized))),
                    "details": entry.get("details") if isinstance(entry.get("details"), dict) else None,
                    "usage": entry.get("usage") if isinstance(entry.get("usage"), dict) else None})
    return out


def _codes(values: list[str]) -> dict[str, Any]:
    """A column of few distinct strings as `{names, codes}` (the page expands it)."""
    names = {name: code for code, name in enumerate(dict.fromkeys(values))}  # in order of first use
    return {"codes": list(map(names.__getitem__, values)), "names": list(names)}


def _model_ref(assistant_entry: Any) -> dict[str, Any] | None:
    message = field_of(assistant_entry, "message")
    if not isinstance(message, dict):
        return None
    return {"provider": message.get("provider"), "id": message.get("model")}


def _safe_catalog() -> ModelCatalog | None:
    try:
        return default_catalog()
    except PicontextError:
        return None

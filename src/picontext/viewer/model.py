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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from msgspec import UNSET

from picontext import _json
from picontext._gc import gc_paused
from picontext.ai.models import ModelCatalog, default_catalog
from picontext.compaction.records import FAILURE_TYPE, failure_line, failure_records
from picontext.compaction.settings import CompactionSettings, load_compaction_settings
from picontext.compaction.verify import parse_ledger
from picontext.errors import EntryNotFound, PicontextError
from picontext.session.dropped import dropped_reasons, entry_text, one_line
from picontext.session.index import EntryIndex, key_of
from picontext.session.migrations import migrate_to_current
from picontext.session.projection import field_of, hashable
from picontext.session.tree import path_to, tree_positions
from picontext.viewer.page import pack_in_background
from picontext.viewer.parallel import beside
from picontext.viewer.timeline import Timeline, build_timeline

__all__ = ["PREVIEW_CHARS", "build_view", "entry_preview", "page_data", "view_data"]

PREVIEW_CHARS = 80
_CONTENT = ("message", "custom_message")
_WHY = ("compacted", "omitted", "replaced")  # DroppedEntry.why, coded by position
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


def _flags(entry: Any) -> int:
    """Bit 1: assistant with only tool calls (Pi's filters hide it); bit 2: error/aborted turn."""
    message = entry.get("message") if isinstance(entry, dict) and entry.get("type") == "message" else None
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return 0
    content = message.get("content")
    has_text = (isinstance(content, str) and content.strip() != "") or (isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "text" and str(b.get("text", "")).strip() for b in content))
    stop = message.get("stopReason")
    failed = bool(stop) and stop not in ("stop", "toolUse")
    return (0 if has_text else 1) | (2 if failed else 0)


def _add_usage(row: dict[str, Any], usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
        value = usage.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            row[key] = row.get(key, 0) + value
    cost = usage.get("cost")
    if isinstance(cost, dict) and isinstance(cost.get("total"), int | float):
        row["cost"] = row.get("cost", 0) + cost["total"]


class _ModelsTable:
    """Tokens and cost per model over the whole file; the extra rows make the total equal `stats`."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def _count(self, name: str, usage: Any) -> None:
        r = self.rows.get(name)
        if r is None:
            r = self.rows[name] = {"model": name, "calls": 0}
        r["calls"] += 1
        _add_usage(r, usage)

    def add(self, entry: Any, kind: Any, message: Any, role: Any) -> None:
        """One entry of the file: its type, and for a `message` entry its message and role."""
        if kind == "message":
            if role == "assistant":
                self._count(f"{message.get('provider', '?')}/{message.get('model', '?')}", message.get("usage"))
            elif role == "toolResult" and isinstance(message.get("usage"), dict):
                self._count("(inside tool results)", message.get("usage"))
        elif kind == "usage":
            self._count(f"{entry.get('provider', '?')}/{entry.get('model', '?')}", entry.get("usage"))
        elif kind in ("compaction", "branch_summary") and isinstance(entry.get("usage"), dict):
            self._count("(compaction summaries)" if kind == "compaction" else "(branch summaries)", entry.get("usage"))

    def table(self) -> list[dict[str, Any]]:
        return sorted(self.rows.values(), key=lambda r: -r.get("cost", 0))


@dataclass(slots=True)
class _EntryFacts:
    """What the page shows of each entry on its own, in file order (no branch or projection
    needed): the meta's per-entry columns, the tree rows, the models table, and for message and
    custom message entries the length of their text and, where it differs from the preview, the
    preview `dropped` makes of the whole text."""

    ids: list[str]
    kinds: dict[str, Any]
    roles: dict[str, Any]
    flags: list[int]
    previews: list[str]
    models: list[dict[str, Any]]
    order: list[int]
    prefix: list[str]
    labels: list[list[Any]]
    chars: dict[int, int]
    whole_previews: dict[int, str]
    packed: bytes | None = None  # `page.pack` of the lines, when asked for


def _entry_facts(index: EntryIndex, entries: list[Any]) -> _EntryFacts:
    ids: list[str] = []
    kinds: list[str] = []
    roles: list[str] = []
    flags: list[int] = []
    shown: list[str] = []
    chars: dict[int, int] = {}
    whole: dict[int, str] = {}
    models = _ModelsTable()
    limit = PREVIEW_CHARS * 4
    for i, entry in enumerate(entries):
        if type(entry) is dict:
            kind, entry_id = entry.get("type"), entry.get("id")
            message = entry.get("message") if kind == "message" else None
            role = message.get("role") if type(message) is dict else None
        else:
            kind = entry_id = message = role = None
        ids.append(entry_id if type(entry_id) is str else _json.dumps(entry_id).decode())
        kinds.append(str(kind))
        roles.append(str(role or "") if kind == "message" else _role(entry) if kind == "custom" else "")
        flags.append(_flags(entry) if role == "assistant" else 0)
        if kind == "message" or kind == "custom_message":
            text = entry_text(entry)
            plain = _short(text)
            preview = _system_preview(entry, text) or plain
            chars[i] = len(text)
            # `dropped` previews the whole text: differently where the preview saw only the start
            # of a long text, or is a system prompt's.
            if preview is not plain or (len(text) > limit and not plain.endswith("…")):
                whole[i] = one_line(text)
        else:
            preview = entry_preview(entry)
        shown.append(preview)
        if kind is not None:
            models.add(entry, kind, message, role)
    order, prefix, labels = _tree_rows(index)
    return _EntryFacts(ids, _codes(kinds), _codes(roles), flags, shown, models.table(), order, prefix, labels,
                       chars, whole)


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
        lines = _json.dumps_joined_lines(view.entries)
        return view.meta(_entry_facts(view.index, view.entries), file_name, catalog, settings)[0], lines


def page_data(file_entries: list[Any], leaf: str | None = None, *, file_name: str = "",
              catalog: ModelCatalog | None = None, settings: CompactionSettings | None = None,
              parallel: bool | None = None) -> tuple[dict[str, Any], bytes]:
    """`(meta, page.pack of the lines)`: what the export embeds. The entries' own facts and the
    packed lines are computed beside the walk along the branch: in a forked copy of this
    process when one can be made (`parallel.beside`; by default from `_PARALLEL_FROM` entries),
    else in this one (the packing in a thread)."""
    with gc_paused():
        view = _View(file_entries, leaf)

        def own_facts() -> _EntryFacts:
            packing = pack_in_background(_json.dumps_joined_lines(view.entries))
            facts = _entry_facts(view.index, view.entries)
            facts.packed = packing()
            return facts

        if parallel is None:
            parallel = len(view.entries) >= _PARALLEL_FROM
        with beside(own_facts, parallel=parallel) as facts_of:
            meta, facts = view.meta(facts_of, file_name, catalog, settings)
        assert facts.packed is not None
        return meta, facts.packed


class _View:
    """A session's entries as the page sees them: the index (as the session manager loads it),
    the leaf and its branch."""

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
        self.entries = [index.entry(i) for i in range(len(index))]

    def meta(self, facts: _EntryFacts | Callable[[], _EntryFacts], file_name: str, catalog: ModelCatalog | None,
             settings: CompactionSettings | None) -> tuple[dict[str, Any], _EntryFacts]:
        """The meta (and the facts it used); `facts` may be a function that gives them, called
        when the branch's part is done."""
        index, entries, branch_index = self.index, self.entries, self.branch_index
        branch = [entries[i] for i in branch_index]
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
        if not isinstance(facts, _EntryFacts):
            facts = facts()

        try:  # id -> position (the last on the branch with that id), built in C
            on_branch: dict[Any, int] = dict(zip(index.ids_of(branch_index), branch_index, strict=True))
        except TypeError:  # an id that cannot be a key (a JSON list or object): leave those out
            on_branch = {k: i for k, i in zip(index.ids_of(branch_index), branch_index, strict=True) if hashable(k)}
        dropped = []
        previews = facts.previews
        replaced: dict[int, str] = {}
        for position, _role, why, by in reasons:
            at = branch_index[position]  # the dropped entry itself
            row = [on_branch.get(str(branch[position].get("id")), -1), _WHY.index(why),
                   on_branch.get(by, -1) if by is not None else -1, facts.chars[at]]
            dropped.append(row)
            # Most entries of a long session are dropped ones: their preview is the one `dropped` makes.
            replaced[row[0]] = facts.whole_previews.get(at, previews[at])
        if replaced:
            previews = list(previews)
            for at, preview in replaced.items():
                if at >= 0:
                    previews[at] = preview
        header = self.header
        return {
            "version": 1,
            "file": file_name,
            "header": {k: header.get(k) for k in ("id", "version", "timestamp", "cwd", "parentSession") if k in header},
            "name": index.session_name(),
            "ids": facts.ids,
            "kinds": facts.kinds,
            "roles": facts.roles,
            "flags": facts.flags,
            "previews": previews,
            "order": facts.order,
            "prefix": facts.prefix,
            "labels": facts.labels,
            "branch": branch_index,
            "leaf": branch_index[-1] if branch_index else None,
            "dropped": dropped,
            "compactions": compactions,
            "plot": plot,
            "models": facts.models,
        }, facts


def _tree_rows(index: EntryIndex) -> tuple[list[int], list[str], list[list[Any]]]:
    """Entry positions in display order, their indentation and labels: a linear chain keeps its
    indentation, each branch point indents (as `picontext tree` draws it)."""
    roots, children = tree_positions(index)
    labels = index.labels
    label_of = (lambda p: labels.get(key_of(field_of(index.entry(p), "id")))) if labels else None
    order: list[int] = []
    prefix: list[str] = []
    rows: list[list[Any]] = []
    stack: list[tuple[int, str, str]] = [(r, "", "") for r in reversed(roots)]
    while stack:
        position, pre, child_pre = stack.pop()
        order.append(position)
        prefix.append(pre)
        if label_of is not None and (label := label_of(position)):
            rows.append([position, label])
        kids = children.get(position)
        if kids is None:
            continue
        if len(kids) == 1:
            stack.append((kids[0], child_pre, child_pre))
        else:
            for i in range(len(kids) - 1, -1, -1):
                last = i == len(kids) - 1
                stack.append((kids[i], child_pre + ("└─ " if last else "├─ "), child_pre + ("   " if last else "│  ")))
    return order, prefix, rows


def _compactions(branch: list[Any], branch_index: list[int], timeline: Timeline) -> list[dict[str, Any]]:
    """Per compaction of the branch: summary, ledger, cut point and the entries it summarized."""
    first_at: dict[Any, int] = {}
    for pos, e in enumerate(branch):
        key = field_of(e, "id")
        if hashable(key):
            first_at.setdefault(key, pos)
    at_of = {id(e): i for e, i in zip(branch, branch_index, strict=True)} if timeline.compactions else {}
    out = []
    for mark in timeline.compactions:
        pos, entry = mark.position, branch[mark.position]
        first_kept = entry.get("firstKeptEntryId")
        kept_pos = first_at.get(first_kept) if hashable(first_kept) else None
        kept_at = branch_index[kept_pos] if kept_pos is not None and kept_pos < pos else None
        out.append({"index": branch_index[pos], "summary": str(entry.get("summary") or ""),
                    "tokensBefore": entry.get("tokensBefore"), "firstKept": first_kept,
                    "firstKeptIndex": kept_at, "ledger": _ledger(entry),
                    "summarized": [at_of[id(e)] for e in mark.summarized],
                    "details": entry.get("details") if isinstance(entry.get("details"), dict) else None,
                    "usage": entry.get("usage") if isinstance(entry.get("usage"), dict) else None})
    return out


def _codes(values: list[str]) -> dict[str, Any]:
    """A column of few distinct strings as `{names, codes}` (the page expands it)."""
    names: dict[str, int] = {}
    return {"codes": [names.setdefault(v, len(names)) for v in values], "names": list(names)}


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

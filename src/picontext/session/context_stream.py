"""The context of one leaf (Pi buildSessionContext) from a session's entry columns, as JSON bytes
written a chunk at a time: what `picontext context FILE --json` prints.

The path is walked on the parent column, the newest compaction, the model and the thinking level
are found on the type and role columns, and only the lines the result is made of are read and
parsed: the compaction, the entries it keeps and those after it, the edits among them, the
entries that set the model and the thinking level. Each message is written as soon as it is
projected and then dropped, so memory holds the context's lines as bytes, not as objects.

The rules are the pipeline's own stages (`projection.fold_bounds`, `folds_away`,
`collect_edits`, `project_context_entry`, `settings_from_end`); what is separate here is only
where entries come from: lines of the file, picked by the columns, parsed one at a time and
dropped once written. Columns exist only for regular files (unique string ids, parents earlier
in the file). `tests/session/test_context_stream.py` holds the output byte-equal to
`_json.dumps(projection.build_session_context(...))` of the whole file, on random sessions and
at random leaves.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Hashable, Iterator
from itertools import chain
from typing import Any

from picontext import _json
from picontext.session.jsonl_columns import ColumnsOutdated, ColumnView
from picontext.session.projection import (
    UNDEFINED,
    ContextSettings,
    LeafArg,
    collect_edits,
    fold_bounds,
    folds_away,
    message_role,
    project_context_entry,
    settings_from_end,
)

_CHUNK_MESSAGES = 256
# Entry types that project to messages; every other type contributes none, edited or not.
_PRODUCING = ("message", "custom_message", "branch_summary", "compaction")


def path_positions(view: ColumnView, leaf: LeafArg) -> list[int]:
    """Positions root -> leaf (tree.path_to on the columns): an unknown or empty leaf id means
    the last entry, None means before the first entry."""
    return list(chain.from_iterable(path_runs(view, leaf)))


def path_runs(view: ColumnView, leaf: LeafArg) -> list[range]:
    """`path_positions` as ranges, walked a range at a time: between two breaks (entries whose
    parent is not the entry before them) the path is a range of positions."""
    if leaf is None:
        return []
    start = view.position_of(leaf) if leaf else None
    if start is None:
        if not len(view):
            return []
        start = len(view) - 1
    parents = view.parents
    breaks = view.breaks()
    runs: list[range] = []
    current = start
    while current >= 0:
        first = breaks[bisect_right(breaks, current) - 1]
        runs.append(range(first, current + 1))
        parent = parents[first]
        if parent >= first:  # regular columns point only backwards; a damaged cache could loop
            raise ColumnsOutdated("the cached parent column is damaged")
        current = parent
    runs.reverse()
    return runs


def context_json(view: ColumnView, leaf: LeafArg) -> Iterator[bytes]:
    """`_json.dumps(build_session_context(entries, leaf))`, in pieces. Every line it needs is
    read before the first piece is produced, so a file that changed under the columns raises
    `ColumnsOutdated` before anything is written."""
    runs = path_runs(view, leaf)
    path = list(chain.from_iterable(runs))
    kinds = view.kinds
    path_kinds = b"".join([kinds[run.start : run.stop] for run in runs])

    def last(kind: str) -> int:
        code = view.kind_code(kind)
        return path_kinds.rfind(code) if code >= 0 else -1

    thinking_at = last("thinking_level_change")
    model_change_at = last("model_change")
    compaction_at = last("compaction")
    settings_at = sorted({path[i] for i in (thinking_at, model_change_at, compaction_at) if i >= 0})
    early = dict(zip(settings_at, map(_json.loads, view.lines(settings_at)), strict=True))
    settings = settings_from_end(thinking_at, model_change_at,
                                 lambda after: _last_assistant(view, path, path_kinds, after, early),
                                 lambda i: early[path[i]])

    kept: list[int] = []
    if compaction_at < 0:
        context = path
    else:
        ids = view.ids
        start, at = fold_bounds([ids[p] for p in path], early[path[compaction_at]])
        kept = path[start:at]  # but its system messages: left out by `_pieces`, which reads their roles
        context = [path[compaction_at], *kept, *path[at + 1 :]]

    producing = {view.kind_code(k) for k in _PRODUCING} - {-1}
    edit_code = view.kind_code("context_edit")
    compaction_code = view.kind_code("compaction")
    # Only a compaction at position 0 projects (project_context_entry): later ones are not read.
    wanted = [p for i, p in enumerate(context)
              if kinds[p] == edit_code or (kinds[p] in producing and (i == 0 or kinds[p] != compaction_code))]
    wanted_sorted = sorted(set(wanted))
    lines = dict(zip(wanted_sorted, view.lines(wanted_sorted), strict=True))
    edits = collect_edits(_json.loads(lines[p]) for p in context if kinds[p] == edit_code) if edit_code >= 0 else {}
    message_code = view.kind_code("message")
    kept_messages = {p for p in kept if kinds[p] == message_code}
    return _pieces(view, context, lines, edits, settings, early, kept_messages)


def _last_assistant(view: ColumnView, path: list[int], path_kinds: bytes, after: int, early: dict[int, Any]) -> int:
    """Index in `path` of the last `message` entry after index `after` whose message is an
    assistant's (-1: none), its parsed entry put in `early`. Message lines are read from the
    leaf back, a few first, then more at a time: the last assistant message is near the leaf."""
    code = view.kind_code("message")
    if code < 0:
        return -1
    high = len(path)
    batch = 4
    while True:
        found: list[int] = []  # path indexes, descending
        while len(found) < batch and (i := path_kinds.rfind(code, after + 1, high)) >= 0:
            found.append(i)
            high = i
        if not found:
            return -1
        lines = view.lines([path[i] for i in reversed(found)])  # ascending file order
        for i, line in zip(found, reversed(lines), strict=True):
            entry = _json.loads(line)
            if message_role(entry) == "assistant":
                early[path[i]] = entry
                return i
        batch = min(batch * 4, 1024)


def _pieces(view: ColumnView, context: list[int], lines: dict[int, memoryview], edits: dict[Hashable, Any],
            settings: ContextSettings, early: dict[int, Any], kept_messages: set[int]) -> Iterator[bytes]:
    kinds = view.kinds
    edit_code = view.kind_code("context_edit")
    loads = _json.loads
    dumps_joined = _json.dumps_joined
    yield b'{"messages":['
    batch: list[Any] = []
    written = False
    for position, p in enumerate(context):
        line = lines.get(p)
        if line is None or kinds[p] == edit_code:
            continue  # projects to nothing (an edit is a message only if it is also a producer: never)
        entry = early[p] if p in early else loads(line)
        del lines[p]
        if p in kept_messages and folds_away("message", message_role(entry)):
            continue  # kept by the compaction, except system messages
        batch.extend(project_context_entry(entry, position, edits))
        if len(batch) >= _CHUNK_MESSAGES:
            yield (b"," if written else b"") + dumps_joined(batch)
            written = True
            batch = []
    if batch:
        yield (b"," if written else b"") + dumps_joined(batch)
    if settings.thinking_level is UNDEFINED:
        rest = _json.dumps({"model": settings.model})
    else:
        rest = _json.dumps({"thinkingLevel": settings.thinking_level, "model": settings.model})
    yield b"]," + rest[1:] + b"\n"

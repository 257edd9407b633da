"""`picontext show | tree | stats FILE`: look inside a session without changing it (`context`: context_cmds.py)."""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from typing import Any

from rich.text import Text

from picontext import _json
from picontext.cli import render
from picontext.cli.loading import LoadedSession, load_session
from picontext.compaction.records import failure_line, failure_records
from picontext.session.projection import build_session_path, collect_edits, field_of, fold_path, hashable, id_key


def _tail(items: list[Any], n: int | None) -> list[Any]:
    return items[-n:] if n is not None and n >= 0 else items


def _write_json(value: Any) -> None:
    sys.stdout.buffer.write(_json.dumps(value) + b"\n")
    sys.stdout.flush()


def _edit_state(session: LoadedSession, path: list[Any]) -> tuple[set[Any], dict[Any, Any]]:
    """Ids summarized away by the newest compaction, and the winning edit per target."""
    context = fold_path(path)
    in_context = {id_key(e) for e in context}
    compacted = {id_key(e) for e in path} - in_context
    return compacted, collect_edits(context)


def cmd_show(args: argparse.Namespace) -> int:
    session = load_session(args.file)
    leaf = session.resolve_leaf(args.leaf)
    path = build_session_path(session.entries, leaf, session.by_id)
    compacted, edits = _edit_state(session, path)
    name = session.manager.get_session_name()
    header = session.header
    with render.paged(render.console(), args.no_pager) as out:
        out.print(Text(f"{name or '(unnamed session)'} · {header.get('id')} · {header.get('cwd')}", style="bold"))
        out.print(Text(f"branch of {len(path)} entries; dim = summarized by a compaction, "
                       "struck = omitted by a context edit", style="dim"))
        shown = _tail(path, args.tail)
        if len(shown) < len(path):
            out.print(Text(f"… {len(path) - len(shown)} earlier entries", style="dim"))
        width = args.width or out.width
        for entry in shown:
            _show_entry(out, entry, compacted, edits, width, args.full)
    return 0


def _show_entry(out: Any, entry: Any, compacted: set[Any], edits: dict[Any, Any], width: int, full: bool) -> None:
    """One entry; a one-line entry fits `width` whole, its marker (`[compacted]`, `[omitted by
    ...]`) included: the text is shortened, never the marker wrapped onto a line of its own."""
    eid = field_of(entry, "id")
    kind = field_of(entry, "type")
    message = entry.get("message") if kind == "message" else None
    role = message.get("role", "?") if isinstance(message, dict) else (kind or "?")
    line = render.role_text(str(role))
    line.append(f" {eid} ", style="dim")
    style = ""
    note = ""
    if id_key(entry) in compacted:
        style, note = "dim", "  [compacted]"
    edit = edits.get(eid) if hashable(eid) else None
    if edit is not None:
        if edit.get("replacement") is None:
            style, note = "strike", f"  [omitted by {edit.get('id')}]"
        else:
            note = f"  [replaced by {edit.get('id')}]"
    if full:
        line.append(note, style="italic red" if note else "")
        out.print(line)
        body = render.message_full(message) if message is not None else render.entry_full(entry)
        if body:
            out.print(Text(body, style=style))
        return
    room = max(20, width - line.cell_len - len(note))
    body = render.message_summary(message, room) if message is not None else render.entry_summary(entry, room)
    line.append(render.short(body, room), style=style)
    line.append(note, style="italic red" if note else "")
    out.print(line)


def _tree_json(node: Any) -> dict[str, Any]:
    """The tree as JSON, iteratively (sessions can be deeper than Python's recursion limit)."""
    root: dict[str, Any] = {}
    stack = [(node, root)]
    while stack:
        current, out = stack.pop()
        entry = current.entry
        out.update({"id": field_of(entry, "id"), "type": field_of(entry, "type"),
                    "summary": render.entry_summary(entry, 120)})
        if current.label:
            out["label"] = current.label
        out["children"] = []
        for child in current.children:
            slot: dict[str, Any] = {}
            out["children"].append(slot)
            stack.append((child, slot))
    return root


def cmd_tree(args: argparse.Namespace) -> int:
    session = load_session(args.file)
    manager = session.manager
    leaf = manager.get_leaf_id()
    roots = manager.get_tree()
    if args.json:
        _write_json({"leafId": leaf, "tree": [_tree_json(r) for r in roots]})
        return 0
    out = render.console()
    width = max(40, out.width - 1)
    lines: list[Text] = []

    def node_line(node: Any, prefix: str) -> Text:
        """Prefix, id, summary, label, leaf mark: the summary is shortened so that the label and
        `<- leaf` always fit the line (a line still too wide is cut at its end by `print`)."""
        entry = node.entry
        eid = field_of(entry, "id")
        text = Text(prefix)
        text.append(f"{eid} ", style="bold yellow" if eid == leaf else "dim")
        kind = field_of(entry, "type")
        style = {"compaction": "bold magenta", "branch_summary": "bold blue", "context_edit": "red"}.get(
            kind if isinstance(kind, str) else "", "")
        marks = Text()
        if node.label:
            marks.append(f"  [{render.short(str(node.label), 40)}]", style="bold cyan")
        if eid == leaf:
            marks.append("  <- leaf", style="bold yellow")
        room = max(20, width - text.cell_len - marks.cell_len)
        text.append(render.short(render.entry_summary(entry, room), room), style=style)
        return text + marks

    # Iterative walk: a linear chain stays at one indentation; each branch point indents.
    stack: list[tuple[Any, str, str]] = [(r, "", "") for r in reversed(roots)]
    while stack:
        node, prefix, child_prefix = stack.pop()
        lines.append(node_line(node, prefix))
        children = node.children
        if len(children) == 1:
            stack.append((children[0], child_prefix, child_prefix))
        else:
            for i in range(len(children) - 1, -1, -1):
                last = i == len(children) - 1
                stack.append((children[i], child_prefix + ("└─ " if last else "├─ "),
                              child_prefix + ("   " if last else "│  ")))
    with render.paged(out, args.no_pager) as paged_out:
        shown = _tail(lines, args.tail)
        if len(shown) < len(lines):
            paged_out.print(Text(f"… {len(lines) - len(shown)} earlier lines", style="dim"))
        for line in shown:
            paged_out.print(line, no_wrap=True, overflow="ellipsis")
    return 0


def _add_usage(total: dict[str, float], usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
        value = usage.get(key)
        if isinstance(value, int | float):
            total[key] = total.get(key, 0) + value
    cost = usage.get("cost")
    if isinstance(cost, dict) and isinstance(cost.get("total"), int | float):
        total["cost"] = total.get("cost", 0) + cost["total"]


def _count(value: float) -> str:
    """A token count with thousands separators; 1e400 in a file is infinity, not a crash."""
    return f"{int(value):,}" if math.isfinite(value) else str(value)


def cmd_stats(args: argparse.Namespace) -> int:
    session = load_session(args.file)
    by_type: Counter[str] = Counter()
    by_role: Counter[str] = Counter()
    buckets: dict[str, dict[str, float]] = {"assistant": {}, "toolNested": {}, "usageEntries": {},
                                            "compaction": {}, "branchSummary": {}}
    compactions: list[dict[str, Any]] = []
    for entry in session.entries:
        kind = str(field_of(entry, "type"))
        by_type[kind] += 1
        if kind == "message" and isinstance(entry.get("message"), dict):
            message = entry["message"]
            by_role[str(message.get("role"))] += 1
            if message.get("role") == "assistant":
                _add_usage(buckets["assistant"], message.get("usage"))
            elif message.get("role") == "toolResult":
                _add_usage(buckets["toolNested"], message.get("usage"))
        elif kind == "usage":
            _add_usage(buckets["usageEntries"], entry.get("usage"))
        elif kind == "compaction":
            _add_usage(buckets["compaction"], entry.get("usage"))
            compactions.append(_compaction_cost(entry))
        elif kind == "branch_summary":
            _add_usage(buckets["branchSummary"], entry.get("usage"))
    total: dict[str, float] = {}
    for bucket in buckets.values():
        for key, value in bucket.items():
            total[key] = total.get(key, 0) + value
    failures = failure_records(session.entries)  # ours: failed summary attempts (compaction/records.py)
    result = {"file": session.path, "entries": len(session.entries), "byType": dict(by_type),
              "messagesByRole": dict(by_role), "usage": buckets, "total": total, "compactions": compactions,
              "compactionFailures": failures}
    if args.json:
        _write_json(result)
        return 0
    out = render.console()
    out.print(Text(f"{session.path}: {len(session.entries)} entries", style="bold"))
    for kind, n in by_type.most_common():
        out.print(f"  {kind:<24}{n:>8}")
    out.print(Text("messages by role", style="bold"))
    for role, n in by_role.most_common():
        out.print(f"  {role:<24}{n:>8}")
    out.print(Text(f"{'usage':<16}{'input':>12}{'output':>10}{'cacheRead':>12}{'cacheWrite':>12}{'cost $':>10}",
                   style="bold"))
    for name, bucket in [*buckets.items(), ("TOTAL", total)]:
        out.print(f"{name:<16}{_count(bucket.get('input', 0)):>12}{_count(bucket.get('output', 0)):>10}"
                  f"{_count(bucket.get('cacheRead', 0)):>12}{_count(bucket.get('cacheWrite', 0)):>12}"
                  f"{bucket.get('cost', 0):>10.4f}")
    if compactions:
        out.print(Text(f"{'compactions':<16}{'input':>12}{'output':>10}{'cacheRead':>12}{'cacheWrite':>12}"
                       f"{'cost $':>10}  summary model", style="bold"))
        for c in compactions:
            out.print(f"{str(c['id'])[:16]:<16}{_count(c['input']):>12}{_count(c['output']):>10}"
                      f"{_count(c['cacheRead']):>12}{_count(c['cacheWrite']):>12}{c['cost']:>10.4f}  "
                      f"{c['summaryModel'] or NO_SUMMARY_MODEL}")
    if failures:
        out.print(Text(f"failed summary attempts: {len(failures)}", style="bold"))
        for record in failures:
            out.print(f"  {str(record['id'])[:16]:<16}{failure_line(record)}", no_wrap=True, overflow="ellipsis")
    return 0


NO_SUMMARY_MODEL = "not recorded (Pi does not record the summary model)"


def _compaction_cost(entry: dict[str, Any]) -> dict[str, Any]:
    """One compaction's summary cost: its `usage` and the model that wrote it (`details.summaryModel`)."""
    bucket: dict[str, float] = {}
    _add_usage(bucket, entry.get("usage"))
    details = entry.get("details")
    model = details.get("summaryModel") if isinstance(details, dict) else None
    return {"id": field_of(entry, "id"), "summaryModel": model if isinstance(model, str) else None,
            **{k: bucket.get(k, 0) for k in ("input", "output", "cacheRead", "cacheWrite", "cost")}}

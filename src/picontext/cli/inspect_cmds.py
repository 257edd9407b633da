"""`picontext context | show | tree | stats FILE`: look inside a session without changing it."""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from typing import Any

from rich.text import Text

from picontext import _json
from picontext.cli import render
from picontext.cli.loading import LoadedSession, load_session, project_file
from picontext.session.projection import build_session_path, build_session_projection, field_of, fold_path


def register(sub: Any) -> None:
    p = sub.add_parser("context", help="what the model sees for a leaf (exactly Pi's buildSessionContext)")
    p.add_argument("file")
    p.add_argument("--leaf", help="entry id to project from (default: the file's last entry)")
    p.add_argument("--json", action="store_true", help="print {messages, thinkingLevel, model} as JSON")
    p.set_defaults(handler=cmd_context)

    p = sub.add_parser("show", help="readable transcript of a branch, marking compacted and edited entries")
    p.add_argument("file")
    p.add_argument("--leaf", help="entry id to show the branch of (default: the file's last entry)")
    p.add_argument("--width", type=int, default=110)
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("tree", help="the entry tree: branches, current leaf, labels, compactions, edits")
    p.add_argument("file")
    p.set_defaults(handler=cmd_tree)

    p = sub.add_parser("stats", help="entries by type, tokens and cost")
    p.add_argument("file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_stats)


def _stream_context(projection: Any) -> None:
    """`_json.dumps(projection.context())` written a few hundred messages at a time, so the whole
    text never exists at once (the context of a long session is tens of megabytes)."""
    context = projection.context()
    messages = context.pop("messages")
    out = sys.stdout.buffer
    out.write(b'{"messages":[')
    dumps = _json.dumps
    for start in range(0, len(messages), 256):
        chunk = b",".join(dumps(m) for m in messages[start : start + 256])
        out.write(chunk if start == 0 else b"," + chunk)
    rest = dumps(context)  # the other keys, in the same order after "messages"
    out.write(b"]" + (b"," + rest[1:] if rest != b"{}" else b"}") + b"\n")
    out.flush()


def _write_json(value: Any) -> None:
    sys.stdout.buffer.write(_json.dumps(value) + b"\n")
    sys.stdout.flush()


def cmd_context(args: argparse.Namespace) -> int:
    if args.json:
        _stream_context(project_file(args.file, args.leaf))
        return 0
    session = load_session(args.file)
    leaf = session.resolve_leaf(args.leaf)
    projection = build_session_projection(session.entries, leaf, session.by_id)
    out = render.console()
    model = projection.model or {}
    out.print(Text(f"{len(projection.messages)} messages · model {model.get('provider', '?')}/"
                   f"{model.get('modelId', '?')} · thinking {projection.thinking_level}", style="bold"))
    for item in projection.entries:
        for message in item.messages:
            role = message.get("role", "?") if isinstance(message, dict) else "?"
            line = render.role_text(role)
            line.append(f" {field_of(item.source_entry, 'id')} ", style="dim")
            line.append(render.message_summary(message, 90))
            out.print(line)
    return 0


def _edit_state(session: LoadedSession, path: list[Any]) -> tuple[set[Any], dict[Any, Any]]:
    """Ids summarized away by the newest compaction, and the winning edit per target."""
    context = fold_path(path)
    in_context = {field_of(e, "id") for e in context}
    compacted = {field_of(e, "id") for e in path} - in_context
    edits: dict[Any, Any] = {}
    for entry in context:
        if field_of(entry, "type") == "context_edit":
            edits[entry.get("targetId")] = entry
    return compacted, edits


def cmd_show(args: argparse.Namespace) -> int:
    session = load_session(args.file)
    leaf = session.resolve_leaf(args.leaf)
    path = build_session_path(session.entries, leaf, session.by_id)
    compacted, edits = _edit_state(session, path)
    out = render.console()
    name = session.manager.get_session_name()
    header = session.header
    out.print(Text(f"{name or '(unnamed session)'} · {header.get('id')} · {header.get('cwd')}", style="bold"))
    out.print(Text(f"branch of {len(path)} entries; dim = summarized by a compaction, "
                   "struck = omitted by a context edit", style="dim"))
    width = max(40, args.width - 30)
    for entry in path:
        eid = field_of(entry, "id")
        kind = field_of(entry, "type")
        message = entry.get("message") if kind == "message" else None
        role = message.get("role", "?") if isinstance(message, dict) else (kind or "?")
        line = render.role_text(str(role))
        line.append(f" {eid} ", style="dim")
        body = render.message_summary(message, width) if message is not None else render.entry_summary(entry, width)
        style = ""
        note = ""
        if eid in compacted:
            style, note = "dim", "  [compacted]"
        edit = edits.get(eid)
        if edit is not None:
            if edit.get("replacement") is None:
                style, note = "strike", f"  [omitted by {edit.get('id')}]"
            else:
                note = f"  [replaced by {edit.get('id')}]"
        line.append(body, style=style)
        line.append(note, style="italic red" if note else "")
        out.print(line)
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    session = load_session(args.file)
    manager = session.manager
    leaf = manager.get_leaf_id()
    out = render.console()
    roots = manager.get_tree()
    lines: list[Text] = []

    def node_line(node: Any, prefix: str) -> Text:
        entry = node.entry
        eid = field_of(entry, "id")
        text = Text(prefix)
        text.append(f"{eid} ", style="bold yellow" if eid == leaf else "dim")
        kind = field_of(entry, "type")
        style = {"compaction": "bold magenta", "branch_summary": "bold blue", "context_edit": "red"}.get(
            kind if isinstance(kind, str) else "", "")
        text.append(render.entry_summary(entry, 80), style=style)
        if node.label:
            text.append(f"  [{node.label}]", style="bold cyan")
        if eid == leaf:
            text.append("  <- leaf", style="bold yellow")
        return text

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
    for line in lines:
        out.print(line)
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
        elif kind == "branch_summary":
            _add_usage(buckets["branchSummary"], entry.get("usage"))
    total: dict[str, float] = {}
    for bucket in buckets.values():
        for key, value in bucket.items():
            total[key] = total.get(key, 0) + value
    result = {"file": session.path, "entries": len(session.entries), "byType": dict(by_type),
              "messagesByRole": dict(by_role), "usage": buckets, "total": total}
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
    return 0

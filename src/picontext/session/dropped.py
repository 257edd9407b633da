"""What left the model's context, and its original text (the `recall` tool, `picontext dropped`).

Compactions and context edits never delete anything: the raw entries stay in the session file.
This module finds, for the current branch of a session, every entry whose content the model no
longer sees as written:

* `compacted` — summarized away by a compaction (it lies before the kept part);
* `omitted`   — hidden by a `context_edit` with `replacement: null` (failed attempts, retries);
* `replaced`  — shown with other content by a `context_edit` (masks, redactions).

    dropped_entries(manager)     -> [DroppedEntry]   newest last
    dropped_on(branch, projection) the same from a branch and its projection (the viewer's walk)
    dropped_reasons(...)         what dropped_on reports, without the texts
    entry_text(entry)            -> the entry's original text, as the model once saw it
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from picontext.session.projection import SessionProjection, collect_edits, field_of, hashable, id_key

__all__ = ["DroppedEntry", "dropped_entries", "dropped_on", "dropped_reasons", "entry_text", "find_dropped",
           "one_line"]

_CONTENT_TYPES = ("message", "custom_message")


def _arguments_encoder() -> Callable[[Any], str]:
    """json.dumps(value, ensure_ascii=False), without building an encoder per call: the C encoder
    that JSONEncoder.encode makes each time, made once (half the time per call; an export
    previews every tool call). No cycle check: parsed JSON has no cycles."""
    make = getattr(json.encoder, "c_make_encoder", None)  # not in the typeshed stubs
    if make is None:  # an interpreter without the C encoder
        return json.JSONEncoder(ensure_ascii=False).encode
    encode = make(None, json.JSONEncoder().default, json.encoder.encode_basestring, None, ": ", ", ",
                  False, False, True)
    return lambda value: "".join(encode(value, 0))


_ARGUMENTS = _arguments_encoder()


@dataclass(frozen=True, slots=True)
class DroppedEntry:
    """One entry that is no longer in the context as written; `by` is the compaction or edit id."""

    entry_id: str
    role: str
    why: str
    by: str | None
    chars: int
    preview: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.entry_id, "role": self.role, "why": self.why, "by": self.by, "chars": self.chars,
                "preview": self.preview}


def _role(entry: Any) -> str:
    if field_of(entry, "type") == "custom_message":
        return "custom"
    return str(field_of(entry.get("message"), "role") or "?")


def _blocks_text(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text", "")
            out.append(text if type(text) is str else str(text))
        elif kind == "thinking":
            out.append(f"[thinking] {block.get('thinking', '')}")
        elif kind == "toolCall":
            out.append(f"[tool call {block.get('name')} {block.get('id', '')}] "
                       f"{_ARGUMENTS(block.get('arguments'))}")
        elif kind == "image":
            out.append("[image]")
    return out


def entry_text(entry: Any) -> str:
    """The original content of a message or custom message entry, as plain text."""
    if not isinstance(entry, dict):
        return ""
    if entry.get("type") == "custom_message":
        return "\n".join(_blocks_text(entry.get("content")))
    message = entry.get("message")
    if not isinstance(message, dict):
        return ""
    role = message.get("role")
    content = message.get("content")
    if role == "user" and type(content) is str:  # the commonest shapes first
        return content
    if role == "bashExecution":
        return f"$ {message.get('command', '')}\n{message.get('output', '')}"
    parts = _blocks_text(content)
    if role == "toolResult":
        head = f"[result of {message.get('toolName', '?')} {message.get('toolCallId', '')}]"
        if message.get("isError"):
            head += " (error)"
        parts.insert(0, head)
    if role == "assistant" and message.get("errorMessage"):
        parts.append(f"[error] {message['errorMessage']}")
    return "\n".join(parts)


def one_line(text: str, width: int = 80, limit: int | None = None) -> str:
    """`text` (its first `limit` characters; None: all) on one line, whitespace runs made one
    space, cut to `width` with "…"."""
    # The flattened start of a text is the start of the flattened text: flatten a short start
    # first and more only while what is flattened still fits (a tool result need not be split whole).
    end = len(text) if limit is None else min(limit, len(text))
    n = min(end, 2 * width)
    while True:
        flat = " ".join(text[:n].split())
        if len(flat) > width:
            return flat[: width - 1] + "…"
        if n >= end:
            return flat
        n = min(end, 4 * n)


def dropped_entries(manager: Any) -> list[DroppedEntry]:
    """Entries of the current branch that the model no longer sees as written, oldest first."""
    return dropped_on(manager.get_branch(), manager.build_session_projection())


def dropped_on(branch: Sequence[Any], projection: SessionProjection) -> list[DroppedEntry]:
    """`dropped_entries` of a root-first `branch` whose projection is `projection`."""
    out: list[DroppedEntry] = []
    for position, role, why, by in dropped_reasons(branch, projection):
        entry = branch[position]
        text = entry_text(entry)
        out.append(DroppedEntry(str(entry.get("id")), role, why, by, len(text), one_line(text)))
    return out


def dropped_reasons(branch: Sequence[Any], projection: SessionProjection) -> list[tuple[int, str, str, Any]]:
    """What `dropped_on` reports, without the texts: `(position on the branch, role, why, by)`."""
    visible = set()
    for item in projection.entries:  # {id_key(source) of each item with messages}, the usual id inline
        if item.messages:
            source = item.source_entry
            source_id = source.get("id") if type(source) is dict else None
            visible.add(source_id if type(source_id) is str else id_key(source))
    edits = collect_edits(branch)
    latest_compaction = next((e for e in reversed(branch) if field_of(e, "type") == "compaction"), None)
    out: list[tuple[int, str, str, Any]] = []
    # `_role` and `id_key` inline for the usual entry (a dict message with a string role and id):
    # this runs over every entry of the branch.
    for position, entry in enumerate(branch):
        if type(entry) is not dict:
            continue
        kind = entry.get("type")
        if kind == "message":
            message = entry.get("message")
            role = message.get("role") if type(message) is dict else None
            if type(role) is not str or not role:
                role = _role(entry)
        elif kind == "custom_message":
            role = "custom"
        else:
            continue
        if role == "system":
            continue
        entry_id = entry.get("id")
        key: Hashable
        if type(entry_id) is str:
            edit = edits.get(entry_id) if edits else None
            key = entry_id
        else:
            edit = edits.get(entry_id) if hashable(entry_id) else None
            key = id_key(entry)
        if key not in visible:
            if edit is not None and edit.get("replacement") is None:
                why, by = "omitted", edit.get("id")
            elif latest_compaction is not None:
                why, by = "compacted", latest_compaction.get("id")
            else:
                continue
        elif edit is not None and edit.get("replacement") is not None:
            why, by = "replaced", edit.get("id")
        else:
            continue
        out.append((position, role, why, by))
    return out


def find_dropped(manager: Any, entry_id: str) -> tuple[Any, DroppedEntry | None]:
    """The entry with `entry_id` (any branch) and its dropped record on the current branch (or None)."""
    entry = manager.get_entry(entry_id)
    if entry is None:
        return None, None
    record = next((d for d in dropped_entries(manager) if d.entry_id == entry_id), None)
    return entry, record

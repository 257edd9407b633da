"""Masking old tool results: compaction without a model (issue 3 §5b, `--strategy mask`).

Tool results older than the keep window are replaced, through ordinary `context_edit` entries,
by a one-line placeholder that names the tool, its arguments, the original size and the entry
that still holds the original:

    [tool result masked by picontext: read(path="src/app.py") returned 48213 characters; the original is entry 3f2a9c1d]

It is append-only and branch-relative like every context edit: the original stays in the
file, other branches are untouched, and branching from before the edits undoes them. Pi reads
the result unchanged (it applies context edits the same way).

`plan_masks` is pure (projection in, edits out); `apply_masks` appends them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from picontext.compaction.serialize import json_text, utf16_len
from picontext.compaction.tokens import estimate_tokens
from picontext.session.projection import SessionProjection, field_of

__all__ = ["MASK_PREFIX", "MaskEdit", "apply_masks", "mask_placeholder", "plan_kept_masks", "plan_masks"]

MASK_PREFIX = "[tool result masked by picontext: "
MAX_ARGS_CHARS = 160


@dataclass(frozen=True, slots=True)
class MaskEdit:
    """One planned replacement: the tool-result entry, its placeholder and what it saves."""

    target_id: str
    placeholder: str
    original_chars: int
    tokens_saved: int


def _arguments_text(arguments: Any) -> str:
    if not isinstance(arguments, dict):
        return ""
    text = ", ".join(f"{k}={json_text(v)}" for k, v in arguments.items())
    text = " ".join(text.split())  # one line
    return text if len(text) <= MAX_ARGS_CHARS else text[: MAX_ARGS_CHARS - 3] + "..."


def mask_placeholder(tool: str, arguments: Any, original_chars: int, entry_id: str) -> str:
    """The one-line text that stands in for a masked tool result."""
    return (f"{MASK_PREFIX}{tool}({_arguments_text(arguments)}) returned {original_chars} characters; "
            f"the original is entry {entry_id}]")


def _result_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
                   and isinstance(b.get("text"), str))


def _tool_calls(messages: Sequence[Any]) -> dict[str, dict[str, Any]]:
    calls: dict[str, dict[str, Any]] = {}
    for message in messages:
        if field_of(message, "role") != "assistant" or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if isinstance(block, dict) and block.get("type") == "toolCall" and isinstance(block.get("id"), str):
                calls[block["id"]] = block
    return calls


def _keep_start(projection: SessionProjection, keep_recent_tokens: int) -> int:
    """Index of the oldest projected entry inside the keep window (newest entries up to the budget)."""
    total = 0
    for index in range(len(projection.entries) - 1, -1, -1):
        total += sum(estimate_tokens(m) for m in projection.entries[index].messages)
        if total >= keep_recent_tokens:
            return index
    return 0


def plan_masks(projection: SessionProjection, keep_recent_tokens: int) -> list[MaskEdit]:
    """Tool results older than the keep window that a placeholder would shrink, oldest first.

    Already edited entries (masked, replaced or omitted) are left alone, so planning twice
    gives nothing the second time.
    """
    calls = _tool_calls(projection.messages)
    edits = []
    for item in projection.entries[: _keep_start(projection, keep_recent_tokens)]:
        entry = item.source_entry
        if field_of(entry, "type") != "message" or len(item.messages) != 1:
            continue
        message = item.messages[0]
        raw = entry.get("message")
        if field_of(message, "role") != "toolResult" or not isinstance(raw, dict):
            continue
        if message.get("content") != raw.get("content"):
            continue  # an earlier context edit already changed it
        text = _result_text(message)
        call_id = message.get("toolCallId")
        call = calls.get(call_id, {}) if isinstance(call_id, str) else {}
        tool = call.get("name") or message.get("toolName") or "tool"
        placeholder = mask_placeholder(str(tool), call.get("arguments"), utf16_len(text), str(entry.get("id")))
        masked = {**message, "content": [{"type": "text", "text": placeholder}]}
        saved = estimate_tokens(message) - estimate_tokens(masked)
        if saved > 0:
            edits.append(MaskEdit(str(entry.get("id")), placeholder, utf16_len(text), saved))
    return edits


def apply_masks(manager: Any, edits: Sequence[MaskEdit]) -> list[str]:
    """Append one `context_edit` per planned mask at the manager's leaf, all in one write (all or
    none: a full disk leaves no mask behind); returns the new entry ids."""
    return list(manager.append_context_edits(
        [(e.target_id, {"content": [{"type": "text", "text": e.placeholder}]}) for e in edits]))


KEPT_EXCERPT_CHARS = 2000
"""What an oversized kept tool result still shows: its beginning, as much as Pi's summarizer reads."""
KEPT_MASK_MIN_TOKENS = 1000
"""Kept tool results smaller than this are never shortened: they cannot be what overflows."""


def plan_kept_masks(projection: SessionProjection, first_kept_index: int, tokens_to_free: int) -> list[MaskEdit]:
    """Ours: shorten the largest tool results of the kept part (entries from `first_kept_index`)
    until `tokens_to_free` are freed, or [] when even all of them would not free that much.

    For a kept part that no cut can make small enough: a tool output of megabytes in the newest
    turn, with no cut point after it. Each becomes its first `KEPT_EXCERPT_CHARS` characters
    under a line naming the tool, the original size and the entry that still holds it all.
    """
    calls = _tool_calls(projection.messages)
    candidates: list[MaskEdit] = []
    for item in projection.entries[first_kept_index:]:
        entry = item.source_entry
        if field_of(entry, "type") != "message" or len(item.messages) != 1:
            continue
        message, raw = item.messages[0], entry.get("message")
        if field_of(message, "role") != "toolResult" or not isinstance(raw, dict):
            continue
        if message.get("content") != raw.get("content") or estimate_tokens(message) < KEPT_MASK_MIN_TOKENS:
            continue
        text = _result_text(message)
        call = calls.get(message.get("toolCallId")) or {}
        tool = str(call.get("name") or message.get("toolName") or "tool")
        length = utf16_len(text)
        head = (f"[tool result shortened by picontext: {tool}({_arguments_text(call.get('arguments'))}) returned "
                f"{length} characters, more than the context window holds; its first {KEPT_EXCERPT_CHARS} follow, "
                f"the original is entry {entry.get('id')}]\n")
        replacement = head + text[:KEPT_EXCERPT_CHARS]
        shortened = {**message, "content": [{"type": "text", "text": replacement}]}
        saved = estimate_tokens(message) - estimate_tokens(shortened)
        if saved > 0:
            candidates.append(MaskEdit(str(entry.get("id")), replacement, length, saved))
    chosen: list[MaskEdit] = []
    freed = 0
    for edit in sorted(candidates, key=lambda e: e.tokens_saved, reverse=True):
        if freed >= tokens_to_free:
            break
        chosen.append(edit)
        freed += edit.tokens_saved
    return chosen if freed >= tokens_to_free else []

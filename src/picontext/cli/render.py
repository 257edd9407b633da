"""Text renderings of entries and messages for the terminal (the only module that knows rich).

It is also the one place where session text meets the terminal. Session files are untrusted
input: a message can hold ESC sequences that set the window title or clear the screen, BEL, CR
that overwrites a line, the 8-bit CSI (U+009B), or lone surrogates (JavaScript string slicing
makes them) that the UTF-8 encoder refuses. `terminal.neutralize` makes all of these visible and
harmless; `SafeConsole` applies it to the text rich prints (its own colour codes are left alone)
and `terminal.safe_output` wraps stdout/stderr for everything written with `print`. JSON written to
`sys.stdout.buffer` bypasses both and stays byte-exact.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import orjson
from rich.console import Console
from rich.segment import Segment
from rich.text import Text

from picontext.ai.types import content_text
from picontext.cli.terminal import neutralize, raw


class SafeConsole(Console):
    """A rich Console that neutralizes the text it renders (not its own style codes)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(neutralize(segment.text), segment.style, segment.control)
            for segment in buffer
        )


def console() -> Console:
    out = SafeConsole(highlight=False, soft_wrap=True, file=raw(sys.stdout))
    if not out.is_terminal:
        # Piped output has no width to respect: don't squeeze tables into 80 columns.
        out = SafeConsole(highlight=False, soft_wrap=True, width=200, file=raw(sys.stdout))
    return out


def short(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):  # nested deeper than orjson goes, or not JSON
        return "…"


def _args(arguments: Any) -> str:
    if isinstance(arguments, dict):
        return ", ".join(f"{k}={short(v if isinstance(v, str) else _json_text(v), 40)}"
                         for k, v in arguments.items())
    return short(_json_text(arguments), 60)


def message_summary(message: Any, width: int = 100) -> str:
    """One line describing a message: role-specific, content shortened."""
    if not isinstance(message, dict):
        return short(repr(message), width)
    role = message.get("role")
    content = message.get("content")
    if role == "assistant" and isinstance(content, list):
        parts = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                text = block.get("text", "")
                parts.append(text if isinstance(text, str) else _json_text(text))
            elif block.get("type") == "thinking":
                parts.append(f"(thinking: {short(str(block.get('thinking', '')), 30)})")
            elif block.get("type") == "toolCall":
                parts.append(f"{block.get('name')}({_args(block.get('arguments'))})")
        text = " ".join(parts)
        if message.get("stopReason") in ("error", "aborted"):
            text = f"[{message['stopReason']}: {message.get('errorMessage', '')}] " + text
        return short(text, width)
    if role == "toolResult":
        mark = " ERROR" if message.get("isError") else ""
        return short(f"{message.get('toolName')}{mark}: {content_text(content)}", width)
    if role == "bashExecution":
        return short(f"$ {message.get('command')} -> {message.get('output', '')}", width)
    if role in ("compactionSummary", "branchSummary"):
        return short(str(message.get("summary", "")), width)
    if role == "system":
        sections = ", ".join((message.get("sections") or {}).keys())
        tools = [t.get("name") for t in message.get("toolsAdded") or [] if isinstance(t, dict)]
        bits = [short(content_text(content), 40) if content_text(content) else ""]
        if sections:
            bits.append(f"sections: {sections}")
        if tools:
            bits.append(f"+tools: {', '.join(map(str, tools))}")
        if message.get("toolsRemoved"):
            bits.append(f"-tools: {', '.join(str(t.get('name')) for t in message['toolsRemoved'])}")
        return short("; ".join(b for b in bits if b), width)
    return short(content_text(content), width)


def entry_summary(entry: Any, width: int = 90) -> str:
    """One line describing any entry."""
    if not isinstance(entry, dict):
        return short(repr(entry), width)
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        role = message.get("role") if isinstance(message, dict) else "?"
        return f"{role}: {message_summary(message, width)}"
    if kind == "compaction":
        return (f"compaction (kept from {entry.get('firstKeptEntryId')}, "
                f"{entry.get('tokensBefore')} tokens before): {short(str(entry.get('summary', '')), width - 40)}")
    if kind == "branch_summary":
        return f"branch summary (from {entry.get('fromId')}): {short(str(entry.get('summary', '')), width - 30)}"
    if kind == "context_edit":
        rep = entry.get("replacement")
        new_text = content_text(rep.get("content")) if isinstance(rep, dict) else ""
        what = "omit" if rep is None else f"replace with {short(new_text, 40)!r}"
        return f"context edit: {what} {entry.get('targetId')}"
    if kind == "model_change":
        return f"model -> {entry.get('provider')}/{entry.get('modelId')}"
    if kind == "thinking_level_change":
        return f"thinking -> {entry.get('thinkingLevel')}"
    if kind == "label":
        return f"label {entry.get('targetId')} = {entry.get('label', '(cleared)')!r}"
    if kind == "session_info":
        return f"name = {entry.get('name')!r}"
    if kind == "custom_message":
        return f"custom message [{entry.get('customType')}]: {short(content_text(entry.get('content')), width)}"
    if kind == "custom":
        return f"custom [{entry.get('customType')}]"
    if kind == "usage":
        usage = entry.get("usage") or {}
        model = f"{entry.get('provider')}/{entry.get('model')}"
        return f"usage [{entry.get('kind')}] {model}: {usage.get('totalTokens')} tokens"
    return f"{kind} (unknown type)"


ROLE_STYLES = {
    "user": "bold cyan", "assistant": "bold green", "toolResult": "yellow", "system": "magenta",
    "compactionSummary": "bold magenta", "branchSummary": "bold blue", "custom": "cyan", "bashExecution": "yellow",
}


def role_text(role: Any) -> Text:
    """The role column; a role that is not a string (hostile files) is shown as its JSON."""
    if not isinstance(role, str):
        role = _json_text(role)
    return Text(f"{role:>17}", style=ROLE_STYLES.get(role, "white"))

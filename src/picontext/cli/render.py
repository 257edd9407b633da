"""Text renderings of entries and messages for the terminal, with rich (the commands and the chat
render entries through it; a few build their own rich tables and panels).

It is also the one place where session text meets the terminal. Session files are untrusted
input: a message can hold ESC sequences that set the window title or clear the screen, BEL, CR
that overwrites a line, the 8-bit CSI (U+009B), or lone surrogates (JavaScript string slicing
makes them) that the UTF-8 encoder refuses. `terminal.neutralize` makes all of these visible and
harmless; `SafeConsole` applies it to the text rich prints (its own colour codes are left alone)
and `terminal.safe_output` wraps stdout/stderr for everything written with `print`. JSON written to
`sys.stdout.buffer` bypasses both and stays byte-exact.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
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
    """On a terminal: its width, long lines wrapped by rich (never by the terminal mid-word)."""
    out = SafeConsole(highlight=False, file=raw(sys.stdout))
    if not out.is_terminal:
        # Piped output has no width to respect: don't squeeze tables into 80 columns.
        out = SafeConsole(highlight=False, soft_wrap=True, width=200, file=raw(sys.stdout))
    return out


def short(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def short_line(line: str, width: int = 100) -> str:
    """One line of output cut to `width`, its indentation kept."""
    line = line.expandtabs(4).rstrip()
    return line if len(line) <= width else line[: width - 1] + "…"


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
        found = message.get("sections")
        sections = ", ".join(map(str, found)) if isinstance(found, dict) else ""
        tools = [t.get("name") for t in _list(message.get("toolsAdded")) if isinstance(t, dict)]
        removed = [t.get("name") for t in _list(message.get("toolsRemoved")) if isinstance(t, dict)]
        bits = [short(content_text(content), 40) if content_text(content) else ""]
        if sections:
            bits.append(f"sections: {sections}")
        if tools:
            bits.append(f"+tools: {', '.join(map(str, tools))}")
        if removed:
            bits.append(f"-tools: {', '.join(map(str, removed))}")
        return short("; ".join(b for b in bits if b), width)
    return short(content_text(content), width)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


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
        usage = entry.get("usage")
        model = f"{entry.get('provider')}/{entry.get('model')}"
        tokens = usage.get("totalTokens") if isinstance(usage, dict) else None
        return f"usage [{entry.get('kind')}] {model}: {tokens} tokens"
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


@contextlib.contextmanager
def paged(out: Console, no_pager: bool = False) -> Iterator[Console]:
    """Print into `out`; on a terminal, output taller than the screen goes through $PAGER
    (default `less -FRX`: colours kept, quits at once when it fits)."""
    if no_pager or not out.is_terminal or not sys.stdin.isatty():
        yield out
        return
    with out.capture() as capture:
        yield out
    text = capture.get()
    if text.count("\n") < out.height - 1:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    pager = os.environ.get("PAGER") or "less -FRX"
    try:
        proc = subprocess.Popen(pager, shell=True, stdin=subprocess.PIPE)  # $PAGER is a shell command line
    except OSError:
        sys.stdout.write(text)
        return
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(text.encode())
        proc.stdin.close()
    with contextlib.suppress(KeyboardInterrupt):
        proc.wait()


def message_full(message: Any) -> str:
    """A whole message as text, line breaks kept (show --full)."""
    if not isinstance(message, dict):
        return repr(message)
    role = message.get("role")
    content = message.get("content")
    if role in ("compactionSummary", "branchSummary"):
        return str(message.get("summary", ""))
    if role == "bashExecution":
        return f"$ {message.get('command')}\n{message.get('output', '')}"
    if not isinstance(content, list):
        return content_text(content)
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "thinking":
            parts.append(f"(thinking) {block.get('thinking', '')}")
        elif kind == "toolCall":
            arguments = orjson.dumps(block.get("arguments"), option=orjson.OPT_INDENT_2).decode()
            parts.append(f"→ {block.get('name')} {arguments}")
        elif kind == "image":
            parts.append(f"[image {block.get('mimeType', '')}]")
    if message.get("stopReason") in ("error", "aborted"):
        parts.append(f"[{message['stopReason']}: {message.get('errorMessage', '')}]")
    return "\n".join(p for p in parts if p)


def entry_full(entry: Any) -> str:
    """A non-message entry in full (show --full): summaries whole, others as their one line."""
    if isinstance(entry, dict) and entry.get("type") in ("compaction", "branch_summary"):
        return f"{entry_summary(entry, 60)}\n{entry.get('summary', '')}"
    return entry_summary(entry, 200)

"""A conversation as plain text, so the summarizer reads it instead of continuing it.

Mirrors Pi `serializeConversation` (compaction/utils.ts), spec 02 §7.1: one part per message,
parts joined by a blank line; `[User]:`, `[Assistant thinking]:`, `[Assistant]:`,
`[Assistant tool calls]:` and `[Tool result]:` labels; tool results cut at 2000 UTF-16 code units
with a `[... N more characters truncated]` marker. Checked byte for byte against the reference in
tests/differential/test_serialize_vs_pi.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from picontext import _json
from picontext.session.convert import convert_to_llm

__all__ = [
    "TOOL_RESULT_MAX_CHARS",
    "json_text",
    "serialize_conversation",
    "serialize_messages",
    "truncate_utf16",
    "utf16_len",
]

TOOL_RESULT_MAX_CHARS = 2000


def utf16_len(text: str) -> int:
    """JavaScript's `text.length`: UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def truncate_utf16(text: str, limit: int) -> str:
    """`text.slice(0, limit)` in JavaScript (may end in half a surrogate pair, as JS does)."""
    if text.isascii():
        return text[:limit]
    return text.encode("utf-16-le", "surrogatepass")[: 2 * limit].decode("utf-16-le", "surrogatepass")


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text" and isinstance(
        b.get("text"), str)]


def json_text(value: Any) -> str:
    """`value` as one line of JSON text, the way a summary shows tool arguments."""
    return _json.dumps_line(value)[:-1].decode("utf-8", "surrogatepass")


def _tool_call_text(call: dict[str, Any]) -> str:
    args = call.get("arguments")
    pairs = ", ".join(f"{k}={json_text(v)}" for k, v in args.items()) if isinstance(args, dict) else ""
    return f"{call.get('name')}({pairs})"


def _assistant_parts(content: Any) -> list[str]:
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    thinking = [b.get("thinking") for b in blocks if b.get("type") == "thinking"]
    texts = [b.get("text") for b in blocks if b.get("type") == "text"]
    calls = [_tool_call_text(b) for b in blocks if b.get("type") == "toolCall"]
    parts = []
    # Pi: always thinking, then text, then calls, whatever the block order.
    if thinking:
        parts.append("[Assistant thinking]: " + "\n".join(str(t) for t in thinking))
    if texts:
        parts.append("[Assistant]: " + "\n".join(str(t) for t in texts))
    if calls:
        parts.append("[Assistant tool calls]: " + "; ".join(calls))
    return parts


def _tool_result_text(content: Any) -> str:
    text = "".join(_texts(content))
    length = utf16_len(text)
    if length <= TOOL_RESULT_MAX_CHARS:
        return text
    rest = length - TOOL_RESULT_MAX_CHARS
    return f"{truncate_utf16(text, TOOL_RESULT_MAX_CHARS)}\n\n[... {rest} more characters truncated]"


def serialize_conversation(messages: Iterable[Any]) -> str:
    """Plain text of provider messages (system/user/assistant/toolResult); others add nothing.

    Example:
        >>> serialize_conversation([{"role": "user", "content": "Fix the bug"}])
        '[User]: Fix the bug'
    """
    parts: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            text = "".join(_texts(content))
            if text:
                parts.append("[User]: " + text)
        elif role == "assistant":
            parts.extend(_assistant_parts(content))
        elif role == "toolResult":
            text = _tool_result_text(content)
            if text:
                parts.append("[Tool result]: " + text)
    return "\n\n".join(parts)


def serialize_messages(messages: Sequence[Any]) -> str:
    """Session messages (any role) as summarizer text: `convert_to_llm`, then serialize."""
    return serialize_conversation(convert_to_llm(messages))

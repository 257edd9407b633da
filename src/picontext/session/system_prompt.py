"""System prompt replay: the prompt and tool loadout are folded from the system messages of a
context (Pi transcript.ts `getCurrentTools`, `getCurrentSystemMessage`, `collapseSystemMessages`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from picontext.ai.types import content_text
from picontext.session.projection import hashable


def _system_messages(messages: Iterable[Any]) -> Iterable[dict[str, Any]]:
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "system":
            yield message


def get_current_tools(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """Tool declarations after replaying every toolsRemoved/toolsAdded in order."""
    tools: dict[Any, dict[str, Any]] = {}
    for message in _system_messages(messages):
        for ref in _list(message.get("toolsRemoved")):
            tools.pop(_name(ref), None)
        for tool in _list(message.get("toolsAdded")):
            tools[_name(tool)] = tool
    return list(tools.values())


def _list(value: Any) -> list[Any]:
    """A list field; anything else (a number, an object in a hostile file) holds nothing."""
    return value if isinstance(value, list) else []


def _name(tool: Any) -> Hashable:
    """A tool's name as a key; a name that is a list or an object matches only itself."""
    name = tool.get("name") if isinstance(tool, dict) else None
    return name if hashable(name) else (None, id(name))


def apply_sections(sections: dict[str, str], update: Mapping[str, Any] | None) -> None:
    """Fold a `sections` delta in: None deletes a name, a string (re)sets it at the end if new."""
    for name, value in (update or {}).items():
        if value is None:
            sections.pop(name, None)
        elif isinstance(value, str):
            sections[name] = value


def get_current_system_message(messages: Iterable[Any]) -> dict[str, Any] | None:
    """The replayed system message (content, sections, tools, first timestamp), or None."""
    messages = list(messages)
    texts: list[str] = []
    sections: dict[str, str] = {}
    timestamp: Any = None
    for message in _system_messages(messages):
        if timestamp is None and message.get("timestamp") is not None:
            timestamp = message["timestamp"]
        text = content_text(message.get("content"))
        if text:
            texts.append(text)
        sections_update = message.get("sections")
        if isinstance(sections_update, dict):
            apply_sections(sections, sections_update)
    tools = get_current_tools(messages)
    if timestamp is None and not tools:
        return None
    result: dict[str, Any] = {"role": "system", "content": "\n\n".join(texts)}
    if sections:
        result["sections"] = sections
    if tools:
        result["toolsAdded"] = tools
    result["timestamp"] = 0 if timestamp is None else timestamp
    return result


def system_message_text(message: Mapping[str, Any]) -> str:
    """The prompt a provider sees for a leading system message: content, then each section."""
    parts = [content_text(message.get("content"))]
    sections = message.get("sections")
    parts.extend(v for v in (sections.values() if isinstance(sections, dict) else ()) if isinstance(v, str))
    return "\n\n".join(p for p in parts if p)


def collapse_system_messages(messages: list[Any]) -> list[Any]:
    """One leading replayed system message, then every non-system message in order."""
    head = get_current_system_message(messages)
    rest = [m for m in messages if not (isinstance(m, dict) and m.get("role") == "system")]
    return [head, *rest] if head is not None else rest


def diff_sections(old: Mapping[str, str], new: Mapping[str, str]) -> dict[str, str | None] | None:
    """The `sections` delta turning `old` into `new`, or None when nothing changed."""
    delta: dict[str, str | None] = {name: text for name, text in new.items() if old.get(name) != text}
    delta.update({name: None for name in old if name not in new})
    return delta or None

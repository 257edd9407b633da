"""Hand-made messages and preparations for the compaction tests (no prepare.py needed)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from picontext.compaction.file_ops import FileOperations

_ids = itertools.count(1)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


def assistant(text: str = "", calls: list[tuple[str, dict[str, Any]]] | None = None,
              usage: dict[str, Any] | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for name, args in calls or []:
        content.append({"type": "toolCall", "id": f"call_{name}_{next(_ids)}", "name": name, "arguments": args})
    message = {"role": "assistant", "content": content, "api": "x", "provider": "p", "model": "m",
               "usage": usage or {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                                  "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
               "stopReason": "toolUse" if calls else "stop", "timestamp": 1}
    return message


def tool_result(text: str, call_id: str = "call_1", name: str = "read", is_error: bool = False) -> dict[str, Any]:
    return {"role": "toolResult", "toolCallId": call_id, "toolName": name,
            "content": [{"type": "text", "text": text}], "isError": is_error, "timestamp": 1}


@dataclass
class Prep:
    messages_to_summarize: list[Any] = field(default_factory=list)
    turn_prefix_messages: list[Any] = field(default_factory=list)
    is_split_turn: bool = False
    previous_summary: str | None = None
    first_kept_entry_id: str = "kept01"
    tokens_before: int = 1000
    file_ops: FileOperations = field(default_factory=FileOperations)


def tool_session(tmp_path: Any, turns: int = 8, result_chars: int = 4000, *, persist: bool = True) -> Any:
    """A persisted session of `turns` read turns with big tool results; returns the manager."""
    from picontext.session.manager import SessionManager

    manager = (SessionManager.create(str(tmp_path), str(tmp_path / "sessions")) if persist
               else SessionManager.in_memory(str(tmp_path)))
    for i in range(turns):
        manager.append_message(user(f"please read file {i}"))
        call = assistant("", [("read", {"path": f"src/f{i}.py"})])
        manager.append_message(call)
        manager.append_message(tool_result(f"content of f{i} " + "x" * result_chars, call["content"][0]["id"]))
        manager.append_message(assistant(f"file {i} looks fine"))
    return manager

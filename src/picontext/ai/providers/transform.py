"""Cross-provider normalisation of a message list before wire mapping (Pi `transformMessages`).

Pure. Rules, as in Pi transform-messages.ts:

* assistant messages that ended in `error` or `aborted` are dropped (never replayed);
* thinking from another model becomes plain text (empty thinking is dropped); redacted thinking
  survives only for the same model; tool-call `thoughtSignature`s from other models are removed;
* tool-call ids from other models go through `normalize_id`, and their results follow;
* a tool call without a result gets a synthetic error result "No result provided" before the
  next assistant/user message, so every API sees call/result pairs;
* images become a placeholder text for models without image input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from picontext.ai.models import Model
from picontext.ai.types import Message

NormalizeId = Callable[[str, Model, dict[str, Any]], str]

_USER_IMAGE_PLACEHOLDER = "(image omitted: model does not support images)"
_TOOL_IMAGE_PLACEHOLDER = "(tool image omitted: model does not support images)"


def _replace_images(content: list[dict[str, Any]], placeholder: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    prev_placeholder = False
    for block in content:
        if block.get("type") == "image":
            if not prev_placeholder:
                out.append({"type": "text", "text": placeholder})
            prev_placeholder = True
            continue
        out.append(block)
        prev_placeholder = block.get("text") == placeholder
    return out


def _same_model(msg: dict[str, Any], model: Model) -> bool:
    return (
        msg.get("provider") == model["provider"] and msg.get("api") == model["api"] and msg.get("model") == model["id"]
    )


def _transform_assistant(
    msg: dict[str, Any], model: Model, normalize_id: NormalizeId | None, id_map: dict[str, str]
) -> dict[str, Any]:
    same = _same_model(msg, model)
    content: list[dict[str, Any]] = []
    for block in msg.get("content") or []:
        kind = block.get("type")
        if kind == "thinking":
            if block.get("redacted"):
                if same:
                    content.append(block)
                continue
            if same and block.get("thinkingSignature"):
                content.append(block)
                continue
            if not (block.get("thinking") or "").strip():
                continue
            content.append(block if same else {"type": "text", "text": block["thinking"]})
        elif kind == "text":
            content.append(block if same else {"type": "text", "text": block.get("text", "")})
        elif kind == "toolCall":
            call = block
            if not same and "thoughtSignature" in call:
                call = {k: v for k, v in call.items() if k != "thoughtSignature"}
            if not same and normalize_id is not None:
                new_id = normalize_id(call["id"], model, msg)
                if new_id != call["id"]:
                    id_map[call["id"]] = new_id
                    call = {**call, "id": new_id}
            content.append(call)
        else:
            content.append(block)
    return {**msg, "content": content}


def transform_messages(
    messages: list[Message], model: Model, normalize_id: NormalizeId | None = None
) -> list[dict[str, Any]]:
    """A new list, ready for a provider's converter (see module docstring); the input is untouched."""
    vision = "image" in model["input"]
    id_map: dict[str, str] = {}
    staged: list[dict[str, Any]] = []
    for raw in messages:
        msg: dict[str, Any] = dict(raw)
        if msg.get("content") is None:
            msg["content"] = []
        role = msg["role"]
        if not vision and role in ("user", "toolResult") and isinstance(msg["content"], list):
            placeholder = _USER_IMAGE_PLACEHOLDER if role == "user" else _TOOL_IMAGE_PLACEHOLDER
            msg["content"] = _replace_images(msg["content"], placeholder)
        if role == "toolResult":
            new_id = id_map.get(msg["toolCallId"])
            if new_id:
                msg["toolCallId"] = new_id
        elif role == "assistant":
            msg = _transform_assistant(msg, model, normalize_id, id_map)
        staged.append(msg)

    result: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    seen: set[str] = set()
    held_system: list[dict[str, Any]] = []

    def close_pending() -> None:
        nonlocal pending, seen
        for call in pending:
            if call["id"] not in seen:
                result.append(
                    {
                        "role": "toolResult",
                        "toolCallId": call["id"],
                        "toolName": call["name"],
                        "content": [{"type": "text", "text": "No result provided"}],
                        "isError": True,
                        "timestamp": 0,
                    }
                )
        pending, seen = [], set()
        result.extend(held_system)
        held_system.clear()

    for msg in staged:
        role = msg["role"]
        if role == "assistant":
            close_pending()
            if msg.get("stopReason") in ("error", "aborted"):
                continue
            calls = [b for b in msg["content"] if b.get("type") == "toolCall"]
            if calls:
                pending, seen = calls, set()
            result.append(msg)
        elif role == "toolResult":
            seen.add(msg["toolCallId"])
            result.append(msg)
        elif role == "system" and pending:
            held_system.append(msg)
        elif role == "user":
            close_pending()
            result.append(msg)
        else:
            result.append(msg)
    close_pending()
    return result


def tool_result_text(content: list[dict[str, Any]]) -> tuple[str, bool]:
    """(joined text of a tool result, has images)."""
    text = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
    return text, any(b.get("type") == "image" for b in content)

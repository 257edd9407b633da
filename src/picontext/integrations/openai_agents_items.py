"""OpenAI Agents SDK input items <-> Pi messages (pure dicts: no SDK import).

SDK items (the Responses API input shapes) map onto Pi messages the way picontext's own
`openai-responses` provider does, so a session written through the SDK can be continued by
`picontext -r ID` on an OpenAI model with its reasoning replayed:

=====================================  =============================================================
SDK item                               Pi
=====================================  =============================================================
user message (string or parts)         `user` (string, or text/image blocks)
assistant `message` (output_text)      `text` block of an `assistant` message; `textSignature`
                                       `{"v":1,"id":...}` keeps the item id
`reasoning`                            `thinking` block; `thinkingSignature` holds the whole item
`function_call`                        `toolCall` block, id `call_id|item id`, arguments parsed
`function_call_output`                 `toolResult` (text, images)
system / developer message             `custom` message `openai-agents.instructions` (Pi shows
                                       it to the model as a user message)
anything else (hosted tools, computer  `custom` entry `openai-agents.item` holding the item: kept
calls, SDK compaction items, ...)      in the file, never sent again (Pi has no place for it)
=====================================  =============================================================

Consecutive reasoning/message/function_call items form one assistant message (one model
response); a reasoning item after text or a tool call starts the next one.

What does not survive the trip: `provider_data`, `annotations` and `logprobs` of output text,
the SDK's placeholder id `__fake_id__`, the `detail` of an image (always "auto" back), images
given by URL or file id and `input_file` parts (kept as a text line naming them), refusals
(kept as text), the formatting of tool-call arguments (re-serialized JSON), `isError` of a tool
result (the SDK has no such flag: always False). Thinking without a signature (written by
another provider) is not replayed, as in picontext's own Responses provider.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from picontext.session.convert import convert_message

__all__ = [
    "INSTRUCTIONS_TYPE",
    "ITEM_TYPE",
    "items_to_messages",
    "message_to_items",
    "messages_to_items",
]

INSTRUCTIONS_TYPE = "openai-agents.instructions"
ITEM_TYPE = "openai-agents.item"
FAKE_ID = "__fake_id__"  # the SDK's id for items of APIs without ids (Chat Completions)
_ASSISTANT_ITEMS = ("message", "reasoning", "function_call")

ToolLookup = Callable[[str], "tuple[str, str] | None"]
"""call_id -> (Pi toolCall id, tool name) for a call stored earlier."""


def _now_ms() -> int:
    return int(time.time() * 1000)


def _kind(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return str(kind)


def _data_url(url: str) -> tuple[str, str] | None:
    """(mimeType, base64 data) of a base64 data URL."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    head, data = url[5:].split(";base64,", 1)
    return head or "application/octet-stream", data


def _part_to_block(part: Any) -> dict[str, Any]:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text"):
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "refusal":
        return {"type": "text", "text": str(part.get("refusal", ""))}
    if kind == "input_image":
        url = part.get("image_url")
        decoded = _data_url(url) if isinstance(url, str) else None
        if decoded is not None:
            return {"type": "image", "data": decoded[1], "mimeType": decoded[0]}
        return {"type": "text", "text": f"[image: {url or part.get('file_id')}]"}
    if kind == "input_file":
        name = part.get("filename") or part.get("file_id") or part.get("file_url")
        return {"type": "text", "text": f"[file: {name}]"}
    return {"type": "text", "text": json.dumps(part, ensure_ascii=False)}


def _content_blocks(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [_part_to_block(p) for p in content or []]


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except ValueError:
        return {"__raw_arguments": raw}  # not JSON: kept verbatim, given back verbatim
    return parsed if isinstance(parsed, dict) else {"__raw_arguments": raw}


def items_to_messages(items: Iterable[dict[str, Any]], *, tools: ToolLookup | None = None) -> list[dict[str, Any]]:
    """SDK input items as Pi messages (and custom entries for what Pi cannot hold), in order."""
    out: list[dict[str, Any]] = []
    group: dict[str, Any] | None = None
    calls: dict[str, tuple[str, str]] = {}
    for item in items:
        if not isinstance(item, dict):  # a pydantic item the caller built
            item = item.model_dump(exclude_unset=True) if hasattr(item, "model_dump") else dict(item)
        kind = _kind(item)
        role = item.get("role")
        if kind in _ASSISTANT_ITEMS and (kind != "message" or role == "assistant"):
            blocks = group["content"] if group is not None else []
            if group is None or (kind == "reasoning" and any(b["type"] != "thinking" for b in blocks)):
                group = {"role": "assistant", "content": [], "timestamp": _now_ms()}
                response_id = (item.get("provider_data") or {}).get("response_id")
                if isinstance(response_id, str):
                    group["responseId"] = response_id
                out.append(group)
            group["content"].extend(_assistant_blocks(item, kind, calls))
            continue
        group = None
        if kind == "message" and role == "user":
            out.append({"role": "user", "content": _content_blocks(item.get("content")), "timestamp": _now_ms()})
        elif kind == "message" and role in ("system", "developer"):
            out.append({"role": "custom", "customType": INSTRUCTIONS_TYPE,
                        "content": _content_blocks(item.get("content")), "display": False,
                        "details": {"role": role}, "timestamp": _now_ms()})
        elif kind == "function_call_output":
            call_id = str(item.get("call_id", ""))
            known = calls.get(call_id) or (tools(call_id) if tools is not None else None)
            output = item.get("output")
            content = _content_blocks(output)
            out.append({"role": "toolResult", "toolCallId": known[0] if known else call_id,
                        "toolName": known[1] if known else "",
                        "content": [{"type": "text", "text": content}] if isinstance(content, str) else content,
                        "isError": False, "timestamp": _now_ms()})
        else:
            out.append({"type": "custom", "customType": ITEM_TYPE, "data": item})
    return out


def _assistant_blocks(item: dict[str, Any], kind: str, calls: dict[str, tuple[str, str]]) -> list[dict[str, Any]]:
    item_id = item.get("id")
    real_id = isinstance(item_id, str) and item_id and item_id != FAKE_ID
    if kind == "reasoning":
        parts = item.get("summary") or item.get("content") or []
        text = "\n\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
        return [{"type": "thinking", "thinking": text,
                 "thinkingSignature": json.dumps(item, separators=(",", ":"), ensure_ascii=False)}]
    if kind == "function_call":
        call_id = str(item.get("call_id", ""))
        block_id = f"{call_id}|{item_id}" if real_id else call_id
        name = str(item.get("name", ""))
        calls[call_id] = (block_id, name)
        return [{"type": "toolCall", "id": block_id, "name": name, "arguments": _arguments(item.get("arguments"))}]
    content = item.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    text = "".join(b.get("text", "") for b in map(_part_to_block, content or []) if b["type"] == "text")
    block: dict[str, Any] = {"type": "text", "text": text}
    if real_id:
        signature: dict[str, Any] = {"v": 1, "id": item_id}
        if item.get("phase"):
            signature["phase"] = item["phase"]
        block["textSignature"] = json.dumps(signature, separators=(",", ":"))
    return [block]


def _parts(content: Any, *, output: bool = False) -> Any:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for block in content or []:
        if block.get("type") == "text":
            parts.append({"type": "input_text", "text": block.get("text", "")})
        elif block.get("type") == "image":
            url = f"data:{block.get('mimeType')};base64,{block.get('data')}"
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
    if output and len(parts) == 1 and parts[0]["type"] == "input_text":
        return parts[0]["text"]
    return parts


def message_to_items(message: dict[str, Any]) -> list[dict[str, Any]]:
    """One projected Pi message as SDK input items (none for what never reaches a model)."""
    if message.get("role") == "custom" and message.get("customType") == INSTRUCTIONS_TYPE:
        role = (message.get("details") or {}).get("role", "developer")
        return [{"role": role, "content": _parts(message.get("content"))}]
    converted = convert_message(message)
    if converted is None:
        return []
    role = converted.get("role")
    if role == "user" and message.get("role") != "user":
        # A summary or custom message: plain text, which every chat template takes.
        return [{"role": "user", "content": _text_of(converted.get("content"))}]
    if role in ("user", "system"):
        return [{"role": role, "content": _parts(converted.get("content"))}]
    if role == "toolResult":
        return [{"type": "function_call_output", "call_id": str(converted.get("toolCallId", "")).split("|")[0],
                 "output": _parts(converted.get("content"), output=True)}]
    if role != "assistant":
        return []
    items: list[dict[str, Any]] = []
    for block in converted.get("content") or []:
        kind = block.get("type")
        if kind == "thinking":
            replay = _signature_item(block.get("thinkingSignature"))
            if replay is not None:
                items.append(replay)
        elif kind == "text":
            item_id = _text_id(block.get("textSignature"))
            if item_id is None:
                items.append({"role": "assistant", "content": block.get("text", "")})
            else:
                items.append({"id": item_id, "type": "message", "role": "assistant", "status": "completed",
                              "content": [{"type": "output_text", "text": block.get("text", ""), "annotations": []}]})
        elif kind == "toolCall":
            call_id, _, item_id = str(block.get("id", "")).partition("|")
            args = block.get("arguments") or {}
            raw = args.get("__raw_arguments") if isinstance(args, dict) and len(args) == 1 else None
            entry: dict[str, Any] = {"type": "function_call", "call_id": call_id, "name": block.get("name", ""),
                                     "arguments": raw if isinstance(raw, str) else json.dumps(args, ensure_ascii=False)}
            if item_id:
                entry["id"] = item_id.split("|")[0]
            items.append(entry)
    return items


def _text_of(content: Any) -> Any:
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "\n".join(str(b.get("text", "")) for b in content)
    return _parts(content)


def messages_to_items(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A projection's messages as the SDK's input items, in order."""
    return [item for message in messages for item in message_to_items(message)]


def _signature_item(signature: Any) -> dict[str, Any] | None:
    if not isinstance(signature, str) or not signature.startswith("{"):
        return None
    try:
        item = json.loads(signature)
    except ValueError:
        return None
    return item if isinstance(item, dict) and item.get("type") == "reasoning" else None


def _text_id(signature: Any) -> str | None:
    if not isinstance(signature, str) or not signature:
        return None
    if signature.startswith("{"):
        try:
            parsed = json.loads(signature)
        except ValueError:
            return None
        return parsed.get("id") if isinstance(parsed, dict) and isinstance(parsed.get("id"), str) else None
    return signature

"""LangChain messages <-> Pi session messages (`picontext[langchain]`).

Both directions go through LangChain's standard content blocks (`_blocks(message)`), so a
message from any LangChain chat model (OpenAI, Anthropic, Gemini, DeepSeek...) is read the same
way, and the messages built for a model are ones every LangChain chat model accepts.

=========================  ======================================================================
LangChain                  Pi
=========================  ======================================================================
HumanMessage               user: a string stays a string, a list stays a list of blocks
AIMessage                  assistant: text, thinking (`reasoning` blocks, `reasoning_content`),
                           tool calls; usage from `usage_metadata`; stop reason from
                           `finish_reason`/`stop_reason`
ToolMessage                toolResult: `status="error"` is `isError`; a JSON `artifact` is
                           `details`
SystemMessage              system (text only)
ChatMessage                by its role; an unknown role becomes a `custom` message
=========================  ======================================================================

What cannot be represented (each documented in docs/integrations.md and tested):

* Pi keeps images as base64 data only. An image given by URL (`http...`) or by provider file id is
  kept as a text block naming it; files, audio and video blocks as a text block naming their kind.
* A message's `name`, `id`, `additional_kwargs` and `response_metadata` other than the few fields
  above, text annotations (citations) and a tool call's `thoughtSignature`/`textSignature` have no
  Pi field and are not kept; a non-JSON `artifact` is dropped.
* An invalid tool call (arguments that are not a JSON object) is stored as a call with the raw
  text under `arguments["_raw"]`.
* Towards LangChain, user and tool-result content made only of text is one string (text blocks
  joined by a newline): OpenAI-compatible servers such as llama.cpp's refuse a list of parts.
* Towards LangChain, a Pi system message's tool declarations (`toolsAdded`) are dropped: the
  agent's tools are bound to the model, not carried in messages. Custom roles, shell executions,
  branch and compaction summaries become HumanMessages, as Pi turns them into user messages.
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict, cast

import orjson
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from picontext._clock import SystemClock
from picontext.ai.types import empty_usage
from picontext.session.convert import convert_message

__all__ = ["Origin", "from_langchain", "from_langchain_messages", "to_langchain", "to_langchain_messages"]


class Origin(TypedDict):
    """Who answered: the `api`, `provider` and `model` written on assistant messages (Pi needs all
    three; LangChain messages carry at most a model name)."""

    api: str
    provider: str
    model: str


_UNKNOWN_ORIGIN: Origin = {"api": "langchain", "provider": "langchain", "model": "unknown"}
_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?:;[^,;]*)*;base64,(?P<data>.*)$", re.DOTALL)
_STOP_REASONS = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "STOP": "stop",
    "length": "length",
    "max_tokens": "length",
    "MAX_TOKENS": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
    "tool_use": "toolUse",
}
_FINISH_REASONS = {"stop": "stop", "length": "length", "toolUse": "tool_calls"}
_CLOCK = SystemClock()


# -- LangChain -> Pi -------------------------------------------------------------------------------


def from_langchain_messages(
    messages: Iterable[BaseMessage],
    *,
    origin: Origin | None = None,
    tool_names: Mapping[str, str] | None = None,
    now_ms: int | None = None,
) -> list[dict[str, Any]]:
    """Pi messages for LangChain messages, in order. `tool_names` (tool call id -> tool name) names
    results whose ToolMessage has no `name`; calls made in `messages` themselves are looked up too.
    `RemoveMessage` (a state operation, not a message) is skipped."""
    names = dict(tool_names or {})
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, RemoveMessage):
            continue
        pi = from_langchain(message, origin=origin, tool_names=names, now_ms=now_ms)
        if pi["role"] == "assistant":
            for block in pi["content"]:
                if block.get("type") == "toolCall":
                    names[block["id"]] = block["name"]
        out.append(pi)
    return out


def from_langchain(
    message: BaseMessage,
    *,
    origin: Origin | None = None,
    tool_names: Mapping[str, str] | None = None,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """One LangChain message as a Pi message (see the module docstring for what is lost)."""
    ts = now_ms if now_ms is not None else _CLOCK.now_ms()
    if isinstance(message, AIMessage):
        return _assistant(message, origin or _UNKNOWN_ORIGIN, ts)
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": _user_content(message), "timestamp": ts}
    if isinstance(message, ToolMessage):
        return _tool_result(message, tool_names or {}, ts)
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": _system_content(message), "timestamp": ts}
    if isinstance(message, ChatMessage):
        role = message.role.lower()
        if role in ("user", "human"):
            return {"role": "user", "content": _user_content(message), "timestamp": ts}
        if role in ("assistant", "ai"):
            return _assistant(message, origin or _UNKNOWN_ORIGIN, ts)
        if role in ("system", "developer"):
            return {"role": "system", "content": _system_content(message), "timestamp": ts}
        return _custom(message.role, message, ts)
    return _custom(message.type, message, ts)


def _blocks(message: BaseMessage) -> list[dict[str, Any]]:
    # LangChain types them as a union of TypedDicts; read as plain mappings, any key may be absent.
    return cast("list[dict[str, Any]]", message.content_blocks)


def _custom(kind: str, message: BaseMessage, ts: int) -> dict[str, Any]:
    # Pi turns a custom message into a user message for the model: nothing the framework sent is lost.
    return {"role": "custom", "customType": f"langchain:{kind}", "content": _user_content(message),
            "display": True, "timestamp": ts}


def _user_content(message: BaseMessage) -> str | list[dict[str, Any]]:
    if isinstance(message.content, str):
        return message.content
    out: list[dict[str, Any]] = []
    for block in _blocks(message):
        out.extend(_user_block(block))
    return out


def _system_content(message: BaseMessage) -> str | list[dict[str, Any]]:
    if isinstance(message.content, str):
        return message.content
    return [{"type": "text", "text": t} for t in (_block_text(b) for b in _blocks(message)) if t is not None]


def _block_text(block: Mapping[str, Any]) -> str | None:
    if block.get("type") in ("text", "text-plain") and isinstance(block.get("text"), str):
        return str(block["text"])
    return None


def _user_block(block: Mapping[str, Any]) -> list[dict[str, Any]]:
    kind = block.get("type")
    text = _block_text(block)
    if text is not None:
        return [{"type": "text", "text": text}]
    if kind == "image":
        image = _image(block)
        if image is not None:
            return [image]
        where = block.get("url") or block.get("file_id") or block.get("id") or "unknown source"
        return [{"type": "text", "text": f"[image not stored: {where}]"}]
    if kind in ("file", "audio", "video"):
        mime = block.get("mime_type") or "unknown type"
        return [{"type": "text", "text": f"[{kind} not stored: {mime}]"}]
    if kind == "non_standard":
        inner = block.get("value")
        inner_kind = inner.get("type") if isinstance(inner, Mapping) else None
        return [{"type": "text", "text": f"[{inner_kind or 'unknown'} content not stored]"}]
    return [{"type": "text", "text": f"[{kind} content not stored]"}]


def _image(block: Mapping[str, Any]) -> dict[str, Any] | None:
    data = block.get("base64")
    mime = block.get("mime_type")
    if not isinstance(data, str):
        url = block.get("url")
        match = _DATA_URL.match(url) if isinstance(url, str) else None
        if match is None:
            return None
        data, mime = match["data"], mime or match["mime"]
    if not isinstance(mime, str) or not mime:
        mime = _sniff_image(data)
    return {"type": "image", "data": data, "mimeType": mime}


def _sniff_image(data: str) -> str:
    try:
        head = base64.b64decode(data[:24] + "=" * (-len(data[:24]) % 4))
    except (binascii.Error, ValueError):
        return "application/octet-stream"
    for magic, mime in ((b"\x89PNG", "image/png"), (b"\xff\xd8", "image/jpeg"), (b"GIF8", "image/gif")):
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"


def _assistant(message: BaseMessage, origin: Origin, ts: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    seen_calls: set[str] = set()
    for block in _blocks(message):
        kind = block.get("type")
        if kind == "text":
            if block.get("text"):
                content.append({"type": "text", "text": block["text"]})
        elif kind == "reasoning":
            thinking: dict[str, Any] = {"type": "thinking", "thinking": block.get("reasoning") or ""}
            signature = (block.get("extras") or {}).get("signature")
            if isinstance(signature, str):
                thinking["thinkingSignature"] = signature
            content.append(thinking)
        elif kind == "tool_call":
            call_id = block.get("id") or _new_call_id()
            seen_calls.add(call_id)
            content.append({"type": "toolCall", "id": call_id, "name": block["name"],
                            "arguments": dict(block.get("args") or {})})
        elif kind == "non_standard" and _redacted(block.get("value")):
            content.append({"type": "thinking", "thinking": "", "thinkingSignature": block["value"]["data"],
                            "redacted": True})
        elif kind in ("tool_call_chunk", "invalid_tool_call"):
            continue  # taken from the message's own lists below, with their ids
        else:
            content.append(_verbatim(block))
    calls = message.tool_calls if isinstance(message, AIMessage) else []
    for call in calls:
        if call.get("id") and call["id"] in seen_calls:
            continue
        content.append({"type": "toolCall", "id": call.get("id") or _new_call_id(), "name": call["name"],
                        "arguments": dict(call.get("args") or {})})
    invalid = message.invalid_tool_calls if isinstance(message, AIMessage) else []
    for bad in invalid:
        content.append({"type": "toolCall", "id": bad.get("id") or _new_call_id(), "name": bad.get("name") or "",
                        "arguments": {"_raw": bad.get("args") or ""}})
    metadata = message.response_metadata or {}
    has_calls = any(b["type"] == "toolCall" for b in content)
    raw_stop = metadata.get("finish_reason") or metadata.get("stop_reason")
    stop = "toolUse" if has_calls else _STOP_REASONS.get(str(raw_stop), "stop") if raw_stop else "stop"
    out: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "api": origin["api"],
        "provider": origin["provider"],
        "model": origin["model"],
    }
    response_model = metadata.get("model_name") or metadata.get("model")
    if isinstance(response_model, str) and response_model and response_model != origin["model"]:
        out["responseModel"] = response_model
    response_id = metadata.get("id")
    if isinstance(response_id, str) and response_id:
        out["responseId"] = response_id
    out["usage"] = _usage(message.usage_metadata if isinstance(message, AIMessage) else None)
    out["stopReason"] = stop
    out["timestamp"] = ts
    return out


def _redacted(value: object) -> bool:
    return isinstance(value, Mapping) and value.get("type") == "redacted_thinking" and isinstance(
        value.get("data"), str)


def _verbatim(block: Mapping[str, Any]) -> dict[str, Any]:
    """A block Pi has no type for, kept as it is (the session layer stores unknown blocks
    untouched and gives them back to LangChain the same way)."""
    return dict(block)


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def _usage(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    usage: dict[str, Any] = dict(empty_usage())
    if not meta:
        return usage
    details = meta.get("input_token_details") or {}
    cache_read = int(details.get("cache_read") or 0)
    cache_write = int(details.get("cache_creation") or 0)
    total_input = int(meta.get("input_tokens") or 0)
    usage["input"] = max(0, total_input - cache_read - cache_write)
    usage["output"] = int(meta.get("output_tokens") or 0)
    usage["cacheRead"] = cache_read
    usage["cacheWrite"] = cache_write
    usage["totalTokens"] = int(meta.get("total_tokens") or (total_input + usage["output"]))
    reasoning = (meta.get("output_token_details") or {}).get("reasoning")
    if reasoning:
        usage["reasoning"] = int(reasoning)
    return usage


def _tool_result(message: ToolMessage, tool_names: Mapping[str, str], ts: int) -> dict[str, Any]:
    content = _user_content(message)
    out: dict[str, Any] = {
        "role": "toolResult",
        "toolCallId": message.tool_call_id,
        "toolName": message.name or tool_names.get(message.tool_call_id, ""),
        "content": [{"type": "text", "text": content}] if isinstance(content, str) else content,
        "isError": message.status == "error",
        "timestamp": ts,
    }
    if message.artifact is not None:
        try:
            out["details"] = orjson.loads(orjson.dumps(message.artifact))
        except TypeError:
            pass  # not JSON: Pi's `details` must be, and the artifact never reaches the model anyway
    return out


# -- Pi -> LangChain -------------------------------------------------------------------------------


def to_langchain_messages(messages: Iterable[Mapping[str, Any]]) -> list[BaseMessage]:
    """LangChain messages for Pi messages (a projection), in order; messages that never reach a
    model (a shell command run with `!!`) are left out."""
    out: list[BaseMessage] = []
    for message in messages:
        converted = to_langchain(message)
        if converted is not None:
            out.append(converted)
    return out


def to_langchain(message: Mapping[str, Any]) -> BaseMessage | None:
    """One Pi message as a LangChain message; None for one that never reaches a model."""
    llm = convert_message(message)
    if llm is None:
        return None
    role = llm.get("role")
    if role == "user":
        return HumanMessage(content=_plain_if_text(_lc_content(llm.get("content"))))
    if role == "assistant":
        return _ai(llm)
    if role == "toolResult":
        content = _lc_content(llm.get("content"))
        return ToolMessage(
            content=_plain_if_text(content),
            tool_call_id=str(llm.get("toolCallId", "")),
            name=llm.get("toolName") or None,
            status="error" if llm.get("isError") else "success",
            **({"artifact": llm["details"]} if llm.get("details") is not None else {}),
        )
    if role == "system":
        return SystemMessage(content=_system_text(llm))
    return None


def _system_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    parts = [content if isinstance(content, str) else "\n".join(
        str(b.get("text", "")) for b in content or [] if isinstance(b, Mapping) and b.get("type") == "text")]
    sections = message.get("sections")
    if isinstance(sections, Mapping):
        parts.extend(v for v in sections.values() if isinstance(v, str))
    return "\n\n".join(p for p in parts if p)


def _lc_content(content: Any) -> str | list[str | dict[str, Any]]:
    if isinstance(content, str):
        return content
    out: list[str | dict[str, Any]] = []
    for block in content or []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            out.append({"type": "text", "text": block.get("text", "")})
        elif kind == "image":
            out.append({"type": "image", "base64": block.get("data", ""), "mime_type": block.get("mimeType", "")})
        else:
            out.append(dict(block))
    return out


def _plain_if_text(content: str | list[str | dict[str, Any]]) -> str | list[str | dict[str, Any]]:
    """Text-only content as one string: the form every chat API takes (llama.cpp's server and
    other OpenAI-compatible ones refuse a list of text parts in a user or tool message)."""
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return content


def _collapse_single_text(content: str | list[str | dict[str, Any]]) -> str | list[str | dict[str, Any]]:
    """A lone text block as a plain string: what tools return and every chat model accepts."""
    if isinstance(content, list) and len(content) == 1:
        block = content[0]
        if isinstance(block, dict) and block.get("type") == "text":
            return str(block.get("text", ""))
    if isinstance(content, list) and not content:
        return ""
    return content


def _ai(message: Mapping[str, Any]) -> AIMessage:
    blocks: list[str | dict[str, Any]] = []
    tool_calls: list[dict[str, Any]] = []
    for block in message.get("content") or []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            blocks.append({"type": "text", "text": block.get("text", "")})
        elif kind == "thinking":
            if block.get("redacted"):
                blocks.append({"type": "non_standard",
                               "value": {"type": "redacted_thinking", "data": block.get("thinkingSignature", "")}})
                continue
            reasoning: dict[str, Any] = {"type": "reasoning", "reasoning": block.get("thinking", "")}
            if block.get("thinkingSignature"):
                reasoning["extras"] = {"signature": block["thinkingSignature"]}
            blocks.append(reasoning)
        elif kind == "toolCall":
            arguments = block.get("arguments")
            tool_calls.append({"type": "tool_call", "id": block.get("id"), "name": block.get("name", ""),
                               "args": dict(arguments) if isinstance(arguments, Mapping) else {}})
        else:
            blocks.append(dict(block))
    usage = message.get("usage") or {}
    cache_read = int(usage.get("cacheRead") or 0)
    cache_write = int(usage.get("cacheWrite") or 0)
    input_tokens = int(usage.get("input") or 0) + cache_read + cache_write
    output_tokens = int(usage.get("output") or 0)
    usage_metadata: dict[str, Any] = {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": int(usage.get("totalTokens") or input_tokens + output_tokens),
    }
    if cache_read or cache_write:
        usage_metadata["input_token_details"] = {"cache_read": cache_read, "cache_creation": cache_write}
    content = _collapse_single_text(blocks)
    metadata: dict[str, Any] = {"model_name": message.get("responseModel") or message.get("model")}
    if isinstance(content, list):
        # The blocks are LangChain's standard (v1) ones: this tells the chat model integrations,
        # which translate v1 blocks into their provider's format, to read them so.
        metadata["output_version"] = "v1"
    finish = _FINISH_REASONS.get(str(message.get("stopReason")))
    if finish:
        metadata["finish_reason"] = finish
    if message.get("responseId"):
        metadata["id"] = message["responseId"]
    return AIMessage(
        content=content,
        tool_calls=tool_calls,
        usage_metadata=usage_metadata,
        response_metadata=metadata,
    )


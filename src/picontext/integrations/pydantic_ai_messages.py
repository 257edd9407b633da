"""pydantic-ai messages <-> Pi messages, both ways.

`to_pi(messages)` turns pydantic-ai `ModelMessage`s into Pi AgentMessages (what a session file
holds); `from_pi(messages)` turns a Pi message list (a projection: compaction and branch
summaries, custom and bash messages included) back into `ModelMessage`s for the model.

| pydantic-ai                                   | Pi                                                        |
|-----------------------------------------------|-----------------------------------------------------------|
| `SystemPromptPart` (conversation scope)       | `system` message, section `system_prompt`                 |
| `UserPromptPart` str / text                   | `user` message, string / text blocks                      |
| `BinaryContent` image, `ImageUrl` data: URL   | `image` block (base64 + mimeType)                         |
| `ToolReturnPart`                              | `toolResult` (model-visible text, images; `isError` for   |
|                                               | `failed`/`retried`; a non-text value and the outcome in   |
|                                               | `details.pydantic_ai`)                                    |
| `RetryFeedbackPart`, legacy `RetryPromptPart` | `custom` message `pydantic_ai.retry_feedback` (the model  |
| without a tool                                | sees its text as a user message; the part is in `details`)|
| `TextPart`, `ThinkingPart`, `ToolCallPart`    | `text`, `thinking` (+ signature), `toolCall` blocks       |
| `ModelResponse` usage, finish reason, ids     | `usage` (Pi counts input without cached tokens),          |
|                                               | `stopReason`, `responseModel`, `responseId`               |

What Pi cannot hold, and so does not come back: request-scoped system prompts (a per-request
nudge; pydantic-ai re-sends it when it is due), `CachePoint` markers, the framework's
bookkeeping parts (instruction, tool-availability, capability and settings deltas, which
pydantic-ai recomputes each request), non-image files (audio, video, documents, uploaded files,
non-data URLs: kept as a one-line text placeholder naming them), files a model returns
(`FilePart`), provider-native tool calls and their returns (web search and the like), provider
compaction items, part ids and `provider_details`, and `ToolCallPart.args` given as a JSON
string (it comes back as the parsed object). Timestamps keep millisecond precision.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import pydantic
from pydantic_ai import messages as pm
from pydantic_ai.usage import RequestUsage

from picontext.integrations.memory import head, starts_with
from picontext.session.convert import convert_message
from picontext.session.system_prompt import get_current_system_message, system_message_text

__all__ = ["RETRY_FEEDBACK", "SYSTEM_PROMPT_SECTION", "from_pi", "pi_usage", "system_prompt_of", "to_pi"]

SYSTEM_PROMPT_SECTION = "system_prompt"
"""The Pi system-message section holding the agent's (conversation-scoped) system prompt."""
RETRY_FEEDBACK = "pydantic_ai.retry_feedback"
"""customType of the custom message that carries a `RetryFeedbackPart`."""
_DETAILS_KEY = "pydantic_ai"

_REQUEST_PART: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(pm.ModelRequestPart)
_STOP = {"stop": "stop", "length": "length", "tool_call": "toolUse", "content_filter": "stop", "error": "error"}
_FINISH = {"stop": "stop", "length": "length", "toolUse": "tool_call", "error": "error", "aborted": "error"}
_OUTCOMES: dict[Any, Literal["success", "failed", "denied", "interrupted", "retried"]] = {
    "success": "success", "failed": "failed", "denied": "denied", "interrupted": "interrupted", "retried": "retried"}
_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def _ms(when: datetime | None) -> int:
    if when is None:
        return 0
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _dt(ms: Any) -> datetime:
    value = ms if isinstance(ms, int | float) and not isinstance(ms, bool) else 0
    return datetime.fromtimestamp(value / 1000, tz=UTC)


# -- pydantic-ai -> Pi ---------------------------------------------------------------------------------


def system_prompt_of(message: pm.ModelRequest) -> str | None:
    """The conversation-scoped system prompt text of a request (its `SystemPromptPart`s joined by
    a blank line), None when it has none."""
    texts = [p.content for p in message.parts if isinstance(p, pm.SystemPromptPart) and p.scope != "request"]
    return "\n\n".join(texts) if texts else None


def _image_block(data: bytes | str, media_type: str) -> dict[str, Any]:
    encoded = data if isinstance(data, str) else base64.b64encode(data).decode("ascii")
    return {"type": "image", "data": encoded, "mimeType": media_type}


def _data_url_image(url: str) -> dict[str, Any] | None:
    head, sep, payload = url.partition(",")
    if not (sep and head.startswith("data:image/") and head.endswith(";base64")):
        return None
    return _image_block(payload, head[len("data:"):-len(";base64")])


def _placeholder(item: Any) -> dict[str, Any]:
    """A file Pi cannot hold, named in one line so the conversation still says it was there."""
    kind = getattr(item, "kind", type(item).__name__)
    where = getattr(item, "url", None) or getattr(item, "file_id", None) or getattr(item, "media_type", "")
    return {"type": "text", "text": f"[{kind}: {where}]"}


def _content_block(item: Any) -> dict[str, Any] | None:
    if isinstance(item, str):
        return {"type": "text", "text": item}
    if isinstance(item, pm.TextContent):
        return {"type": "text", "text": item.content}
    if isinstance(item, pm.CachePoint):
        return None
    if isinstance(item, pm.BinaryContent) and item.media_type in _IMAGE_TYPES:
        return _image_block(item.data, item.media_type)
    if isinstance(item, pm.ImageUrl):
        return _data_url_image(item.url) or _placeholder(item)
    return _placeholder(item)


def _user(part: pm.UserPromptPart) -> dict[str, Any]:
    content: str | list[dict[str, Any]]
    if isinstance(part.content, str):
        content = part.content
    else:
        content = [b for b in map(_content_block, part.content) if b is not None]
    return {"role": "user", "content": content, "timestamp": _ms(part.timestamp)}


def _json_value(value: Any) -> Any:
    return pm.tool_return_ta.dump_python(value, mode="json", by_alias=True)


def _data_of(content: Any) -> Any:
    """A tool's return value without its files (they travel as image blocks or placeholders)."""
    if pm.is_multi_modal_content(content):
        return None
    if isinstance(content, list):
        data = [item for item in content if not pm.is_multi_modal_content(item)]
        if len(data) == len(content):
            return content
        return data[0] if len(data) == 1 else (data or None)
    return content


def _tool_result(part: pm.ToolReturnPart) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": part.model_response_str(wrap_if_error=False)}]
    for item in part.files:
        block = _content_block(item)
        if block is not None:
            content.append(block)
    extra: dict[str, Any] = {}
    data = _data_of(part.content)
    if data is not None and not isinstance(data, str):
        extra["content"] = _json_value(data)
    if part.outcome != "success":
        extra["outcome"] = part.outcome
    if part.retry is not None:
        extra["retry"] = dataclasses.asdict(part.retry)
    if part.metadata is not None:
        extra["metadata"] = _json_value(part.metadata)
    message: dict[str, Any] = {
        "role": "toolResult",
        "toolCallId": part.tool_call_id,
        "toolName": part.tool_name,
        "content": content,
        "isError": part.outcome in ("failed", "retried"),
        "timestamp": _ms(part.timestamp),
    }
    if extra:
        message["details"] = {_DETAILS_KEY: extra}
    return message


def _retry_feedback(part: pm.RetryFeedbackPart) -> dict[str, Any]:
    return {
        "role": "custom",
        "customType": RETRY_FEEDBACK,
        "content": part.model_response(),
        "display": False,
        "details": {_DETAILS_KEY: {"part": _REQUEST_PART.dump_python(part, mode="json")}},
        "timestamp": _ms(part.timestamp),
    }


def _legacy_retry(part: Any, stamp: int) -> dict[str, Any]:
    """A `RetryPromptPart` built by hand (loading a stored history translates it already)."""
    text = part.model_response()
    if part.tool_name:
        return {"role": "toolResult", "toolCallId": part.tool_call_id, "toolName": part.tool_name,
                "content": [{"type": "text", "text": text}], "isError": True,
                "details": {_DETAILS_KEY: {"outcome": "retried"}}, "timestamp": stamp}
    return {"role": "custom", "customType": RETRY_FEEDBACK, "content": text, "display": False, "timestamp": stamp}


def _request(message: pm.ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    prompt = system_prompt_of(message)
    if prompt is not None:
        stamp = next(_ms(p.timestamp) for p in message.parts if isinstance(p, pm.SystemPromptPart))
        out.append({"role": "system", "content": "", "sections": {SYSTEM_PROMPT_SECTION: prompt}, "timestamp": stamp})
    for part in message.parts:
        if isinstance(part, pm.UserPromptPart):
            out.append(_user(part))
        elif isinstance(part, pm.ToolReturnPart):
            out.append(_tool_result(part))
        elif isinstance(part, pm.RetryFeedbackPart):
            out.append(_retry_feedback(part))
        elif isinstance(part, pm.RetryPromptPart):  # deprecated, still constructible by hand
            out.append(_legacy_retry(part, _ms(part.timestamp)))
    return out


def pi_usage(usage: RequestUsage) -> dict[str, Any]:
    """Pi's usage record of a response (Pi's `input` leaves out cached tokens; no cost here: the
    memory prices it from its model)."""
    cache_read = usage.cache_read_tokens
    cache_write = usage.cache_write_tokens
    fresh = max(0, usage.input_tokens - cache_read - cache_write)
    return {
        "input": fresh,
        "output": usage.output_tokens,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "totalTokens": fresh + cache_read + cache_write + usage.output_tokens,
    }


def _arguments(part: pm.ToolCallPart) -> dict[str, Any]:
    try:
        return dict(part.args_as_dict())
    except (ValueError, TypeError, AssertionError):
        return {"_raw": part.args if isinstance(part.args, str) else repr(part.args)}


def _response(message: pm.ModelResponse) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, pm.TextPart):
            content.append({"type": "text", "text": part.content})
        elif isinstance(part, pm.ThinkingPart):
            block: dict[str, Any] = {"type": "thinking", "thinking": part.content}
            if part.signature:
                block["thinkingSignature"] = part.signature
            content.append(block)
        elif isinstance(part, pm.ToolCallPart):
            content.append({"type": "toolCall", "id": part.tool_call_id, "name": part.tool_name,
                            "arguments": _arguments(part)})
    calls = any(b["type"] == "toolCall" for b in content)
    stop = _STOP.get(message.finish_reason or "", "toolUse" if calls else "stop")
    if calls and stop == "stop":
        stop = "toolUse"
    out: dict[str, Any] = {"role": "assistant", "content": content, "usage": pi_usage(message.usage),
                           "stopReason": stop, "timestamp": _ms(message.timestamp)}
    if message.model_name:
        out["responseModel"] = message.model_name
    if message.provider_response_id:
        out["responseId"] = message.provider_response_id
    return out


def to_pi(messages: Sequence[pm.ModelMessage]) -> list[dict[str, Any]]:
    """Pi AgentMessages for pydantic-ai messages, in order (a request becomes one Pi message per
    part it holds; its system prompt, if any, comes first as a `system` message)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, pm.ModelRequest):
            out.extend(_request(message))
        else:
            out.append(_response(message))
    return out


# -- Pi -> pydantic-ai ---------------------------------------------------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _user_item(block: dict[str, Any]) -> pm.UserContent | None:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "image":
        try:
            data = base64.b64decode(str(block.get("data", "")), validate=True)
        except (binascii.Error, ValueError):
            return "[image: unreadable data]"
        return pm.BinaryContent(data=data, media_type=str(block.get("mimeType") or "image/png"))
    return None


def _user_part(message: dict[str, Any]) -> pm.UserPromptPart:
    content = message.get("content")
    stamp = _dt(message.get("timestamp"))
    if isinstance(content, str):
        return pm.UserPromptPart(content, timestamp=stamp)
    items = [i for i in map(_user_item, _blocks(content)) if i is not None]
    return pm.UserPromptPart(items, timestamp=stamp)


def _tool_return(message: dict[str, Any]) -> pm.ToolReturnPart:
    blocks = _blocks(message.get("content"))
    extra = (message.get("details") or {}).get(_DETAILS_KEY) if isinstance(message.get("details"), dict) else None
    extra = extra if isinstance(extra, dict) else {}
    text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    files = [i for i in (_user_item(b) for b in blocks if b.get("type") == "image") if i is not None]
    value: Any = extra["content"] if "content" in extra else text
    content: Any = [value, *files] if files else value
    outcome = _OUTCOMES.get(extra.get("outcome"), "failed" if message.get("isError") else "success")
    retry = extra.get("retry")
    return pm.ToolReturnPart(
        tool_name=str(message.get("toolName") or ""),
        content=content,
        tool_call_id=str(message.get("toolCallId") or ""),
        outcome=outcome,
        retry=pm.RetryInfo(**retry) if isinstance(retry, dict) else None,
        metadata=extra.get("metadata"),
        timestamp=_dt(message.get("timestamp")),
    )


def _request_parts(message: dict[str, Any]) -> list[pm.ModelRequestPart]:
    role = message.get("role")
    if role == "user":
        return [_user_part(message)]
    if role == "toolResult":
        return [_tool_return(message)]
    if role == "custom" and message.get("customType") == RETRY_FEEDBACK:
        details = message.get("details")
        stored = details.get(_DETAILS_KEY, {}).get("part") if isinstance(details, dict) else None
        if stored is not None:
            try:
                return [_REQUEST_PART.validate_python(stored)]
            except pydantic.ValidationError:
                pass  # a hand-edited file: the text the model saw still goes to it
    converted = convert_message(message)  # custom, summaries, bash: the user message Pi sends
    if converted is None:
        return []
    blocks = _blocks(converted.get("content"))
    if all(b.get("type") == "text" for b in blocks):  # plain text reads best as one string
        converted = {**converted, "content": "".join(str(b.get("text", "")) for b in blocks)}
    return [_user_part(converted)]


def _response_part(block: dict[str, Any]) -> pm.ModelResponsePart | None:
    kind = block.get("type")
    if kind == "text":
        return pm.TextPart(str(block.get("text", "")))
    if kind == "thinking":
        return pm.ThinkingPart(str(block.get("thinking", "")), signature=block.get("thinkingSignature"))
    if kind == "toolCall":
        arguments = block.get("arguments")
        return pm.ToolCallPart(str(block.get("name", "")), arguments if isinstance(arguments, dict) else {},
                               tool_call_id=str(block.get("id", "")))
    return None


def _model_response(message: dict[str, Any]) -> pm.ModelResponse:
    parts = [p for p in map(_response_part, _blocks(message.get("content"))) if p is not None]
    recorded = message.get("usage")
    usage: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    cache_read = int(usage.get("cacheRead") or 0)
    cache_write = int(usage.get("cacheWrite") or 0)
    return pm.ModelResponse(
        parts=parts,
        usage=RequestUsage(input_tokens=int(usage.get("input") or 0) + cache_read + cache_write,
                           output_tokens=int(usage.get("output") or 0),
                           cache_read_tokens=cache_read, cache_write_tokens=cache_write),
        model_name=message.get("responseModel") or message.get("model"),
        timestamp=_dt(message.get("timestamp")),
        provider_response_id=message.get("responseId"),
        finish_reason=_FINISH.get(str(message.get("stopReason")), None),  # type: ignore[arg-type]
    )


def from_pi(messages: Sequence[dict[str, Any]]) -> list[pm.ModelMessage]:
    """pydantic-ai messages for a Pi message list (a session's projection): consecutive user,
    tool-result and custom messages share one `ModelRequest`, each assistant message is one
    `ModelResponse`. The system messages fold (Pi's replay) into one `SystemPromptPart` at the head
    of the first request; summaries, custom and bash messages become the user text Pi sends."""
    out: list[pm.ModelMessage] = []
    pending: list[pm.ModelRequestPart] = []
    system = get_current_system_message(messages)
    if system is not None:
        text = system_message_text(system)
        if text:
            pending.append(pm.SystemPromptPart(text, timestamp=_dt(system.get("timestamp"))))
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        if role == "system" or role is None:
            continue
        if role == "assistant":
            if pending:
                out.append(pm.ModelRequest(parts=pending))
                pending = []
            out.append(_model_response(message))
        else:
            pending.extend(_request_parts(message))
    if pending:
        out.append(pm.ModelRequest(parts=pending))
    return out




def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None


class ProjectionConverter:
    """`from_pi` for a projection that grows at its end between requests: the messages up to its
    last assistant message are converted once and reused while the projection still starts with
    them (the same objects: known in O(1) for the session's projection views, see
    `memory.starts_with`). A compaction, a context edit or a new system prompt changes that
    start, and everything is converted again. Reused messages are shared between requests, as
    pydantic-ai shares a run's history between steps."""

    def __init__(self) -> None:
        self._source: Sequence[Any] = []  # the Pi messages already converted
        self._converted: list[pm.ModelMessage] = []  # their conversion

    def __call__(self, messages: Sequence[dict[str, Any]]) -> list[pm.ModelMessage]:
        start = len(self._source)
        if not start or not starts_with(messages, self._source) or any(
                _role(m) == "system" for m in messages[start:]):
            start = 0
            self._source, self._converted = [], []
        closed = start
        for index in range(len(messages) - 1, start - 1, -1):
            if _role(messages[index]) == "assistant":
                closed = index + 1
                break
        if not start and any(_role(m) == "system" for m in messages[closed:]):
            return from_pi(messages)  # the head's system prompt depends on the tail: nothing to keep
        self._converted.extend(from_pi(messages[start:closed]))
        self._source = head(messages, closed)
        return self._converted + from_pi(messages[closed:])

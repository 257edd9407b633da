"""Anthropic Messages (`POST {baseUrl}/v1/messages`), with extended thinking and prompt caching.

Wire facts ported from Pi api/anthropic-messages.ts: system prompt as a text block with
`cache_control`; cache breakpoints on the system block, the last tool and the last user block
(`{"type": "ephemeral"}`, `"ttl": "1h"` for long retention, none at all for retention "none");
consecutive tool results grouped into one user message; thinking replayed with its signature
(unsigned thinking becomes text); usage from `message_start` then `message_delta`
(`totalTokens` = input + output + cacheRead + cacheWrite); stop reasons end_turn/pause_turn/
stop_sequence → stop, max_tokens → length, tool_use → toolUse, refusal/sensitive → error.
"""

from __future__ import annotations

import json
from typing import Any, cast

from picontext.ai._http import ProviderRequest, SseEvent, join_url
from picontext.ai.event_stream import AssistantMessageStream
from picontext.ai.events import AssistantMessageEvent
from picontext.ai.models import Model, calculate_cost
from picontext.ai.providers._base import (
    Context,
    StreamOptions,
    StreamProtocolError,
    block_index,
    context_tools,
    parse_streaming_json,
    split_system,
    start_http_stream,
)
from picontext.ai.providers.simple_options import (
    adjust_max_tokens_for_thinking,
    base_max_tokens,
    clamp_max_tokens_to_context,
    clamp_reasoning,
    level_map,
    requested_level,
)
from picontext.ai.providers.transform import transform_messages
from picontext.ai.types import AssistantMessage

API = "anthropic-messages"
ANTHROPIC_VERSION = "2023-06-01"
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
FINE_GRAINED_TOOL_STREAMING_BETA = "fine-grained-tool-streaming-2025-05-14"
_MESSAGE_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    }
)


def _compat(model: Model) -> dict[str, Any]:
    """Pi getAnthropicCompat: defaults, overridden by `model["compat"]`."""
    openrouter = model["provider"] == "openrouter" or "openrouter.ai" in model["baseUrl"]
    compat: dict[str, Any] = {
        "supportsEagerToolInputStreaming": True,
        "supportsLongCacheRetention": True,
        "sendSessionAffinityHeaders": openrouter,
        "sessionAffinityFormat": "openrouter" if openrouter else None,
        "supportsCacheControlOnTools": True,
        "supportsTemperature": True,
        "allowEmptySignature": False,
        "forceAdaptiveThinking": False,
    }
    for key, value in (model.get("compat") or {}).items():
        if value is not None:
            compat[key] = value
    return compat


def cache_control(options: StreamOptions, model: Model | None = None) -> dict[str, Any] | None:
    """The `cache_control` marker for the retention, or None ("none": no cache writes)."""
    if options.cache_retention == "none":
        return None
    if options.cache_retention == "long" and (model is None or _compat(model)["supportsLongCacheRetention"]):
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


def _effort(model: Model, level: str) -> str:
    mapped = level_map(model).get(level)
    if isinstance(mapped, str):
        return mapped
    return {"minimal": "low", "low": "low", "medium": "medium"}.get(level, "high")


def _normalize_id(call_id: str, _model: Model, _source: dict[str, Any]) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in call_id)[:64]


def _content_blocks(content: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if not any(b.get("type") == "image" for b in content):
        return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
    blocks: list[dict[str, Any]] = []
    for b in content:
        if b.get("type") == "text":
            blocks.append({"type": "text", "text": b["text"]})
        elif b.get("type") == "image":
            blocks.append(
                {"type": "image", "source": {"type": "base64", "media_type": b["mimeType"], "data": b["data"]}}
            )
    if not any(b["type"] == "text" for b in blocks):
        blocks.insert(0, {"type": "text", "text": "(see attached image)"})
    return blocks


def _assistant_blocks(msg: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for b in msg["content"]:
        kind = b.get("type")
        if kind == "text":
            if b["text"].strip():
                blocks.append({"type": "text", "text": b["text"]})
        elif kind == "thinking":
            if b.get("redacted"):
                blocks.append({"type": "redacted_thinking", "data": b.get("thinkingSignature", "")})
                continue
            sig = (b.get("thinkingSignature") or "").strip()
            if not b["thinking"].strip() and not sig:
                continue
            if sig:
                blocks.append({"type": "thinking", "thinking": b["thinking"], "signature": b["thinkingSignature"]})
            else:  # e.g. from an aborted stream: unsigned thinking cannot be replayed as thinking
                blocks.append({"type": "text", "text": b["thinking"]})
        elif kind == "toolCall":
            blocks.append({"type": "tool_use", "id": b["id"], "name": b["name"], "input": b.get("arguments") or {}})
    return blocks


def convert_messages(model: Model, messages: list[Any], cache: dict[str, Any] | None, *,
                     before_last: bool = False) -> list[dict[str, Any]]:
    """Pure: the `messages` array (no system messages in `messages`). The message breakpoint is
    on the last user message, or with `before_last` on the message before the last one."""
    out: list[dict[str, Any]] = []
    msgs = transform_messages(messages, model, _normalize_id)
    i = 0
    while i < len(msgs):
        msg = msgs[i]
        role = msg["role"]
        if role == "user":
            if isinstance(msg["content"], str):
                if msg["content"].strip():
                    out.append({"role": "user", "content": msg["content"]})
            else:
                blocks = []
                for item in msg["content"]:
                    if item.get("type") == "text" and item["text"].strip():
                        blocks.append({"type": "text", "text": item["text"]})
                    elif item.get("type") == "image":
                        blocks.append(
                            {
                                "type": "image",
                                "source": {"type": "base64", "media_type": item["mimeType"], "data": item["data"]},
                            }
                        )
                if blocks:
                    out.append({"role": "user", "content": blocks})
        elif role == "assistant":
            blocks = _assistant_blocks(msg)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        elif role == "toolResult":
            results = []
            while i < len(msgs) and msgs[i]["role"] == "toolResult":
                tr = msgs[i]
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": tr["toolCallId"],
                        "content": _content_blocks(tr["content"]),
                        "is_error": bool(tr.get("isError")),
                    }
                )
                i += 1
            out.append({"role": "user", "content": results})
            continue
        i += 1
    if cache and before_last:
        if len(out) >= 2:
            _mark_last_block(out[-2], cache)
    elif cache and out and out[-1]["role"] == "user":
        _mark_last_block(out[-1], cache)
    return out


def _mark_last_block(message: dict[str, Any], cache: dict[str, Any]) -> None:
    """Breakpoint on the message's last block that may carry one (thinking blocks may not)."""
    if isinstance(message["content"], str):
        message["content"] = [{"type": "text", "text": message["content"], "cache_control": cache}]
        return
    for block in reversed(message["content"]):
        if block.get("type") not in ("thinking", "redacted_thinking"):
            block["cache_control"] = cache
            return


def build_body(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """Pure: the JSON body of a streaming Messages request (Pi streamSimple + buildParams)."""
    compat = _compat(model)
    cache = cache_control(options, model)
    system, rest = split_system(context)
    level = requested_level(options.reasoning)
    max_tokens = base_max_tokens(model, context, options.max_tokens)
    budget = 0
    if level is not None and not compat["forceAdaptiveThinking"]:
        custom = {clamp_reasoning(level): options.thinking_budget_tokens} if options.thinking_budget_tokens else None
        raised, budget = adjust_max_tokens_for_thinking(max_tokens, model["maxTokens"], level, custom)
        max_tokens = clamp_max_tokens_to_context(model, context, raised)
        budget = min(budget, max(0, max_tokens - 1024))
    body: dict[str, Any] = {
        "model": model["id"],
        "messages": convert_messages(model, rest, cache, before_last=options.cache_before_last),
        "max_tokens": max_tokens,
        "stream": True,
    }
    if system:
        block: dict[str, Any] = {"type": "text", "text": system}
        if cache:
            block["cache_control"] = cache
        body["system"] = [block]
    if options.temperature is not None and level is None and compat["supportsTemperature"]:
        body["temperature"] = options.temperature  # incompatible with extended thinking
    tools = context_tools(context)
    if tools:
        converted = []
        for n, t in enumerate(tools):
            schema = t["parameters"] or {}
            entry: dict[str, Any] = {"name": t["name"], "description": t["description"]}
            if compat["supportsEagerToolInputStreaming"]:
                entry["eager_input_streaming"] = True
            entry["input_schema"] = {
                "type": "object",
                "properties": schema.get("properties", {}),
                "required": schema.get("required", []),
            }
            if cache and compat["supportsCacheControlOnTools"] and n == len(tools) - 1:
                entry["cache_control"] = cache
            converted.append(entry)
        body["tools"] = converted
    if model["reasoning"]:
        if level is not None and compat["forceAdaptiveThinking"]:
            body["thinking"] = {"type": "adaptive", "display": "summarized"}
            body["output_config"] = {"effort": _effort(model, level)}
        elif level is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget or 1024, "display": "summarized"}
        elif not ("off" in level_map(model) and level_map(model)["off"] is None):
            body["thinking"] = {"type": "disabled"}
    if options.tool_choice:
        body["tool_choice"] = (
            {"type": options.tool_choice} if isinstance(options.tool_choice, str) else options.tool_choice
        )
    return body


def build_request(model: Model, context: Context, options: StreamOptions, api_key: str) -> ProviderRequest:
    """Pure: URL, headers and body. The key only goes into `x-api-key`."""
    body = build_body(model, context, options)
    compat = _compat(model)
    betas = []
    if "tools" in body and not compat["supportsEagerToolInputStreaming"]:
        betas.append(FINE_GRAINED_TOOL_STREAMING_BETA)
    if body.get("thinking", {}).get("type") == "enabled":
        betas.append(INTERLEAVED_THINKING_BETA)
    headers = {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "anthropic-version": ANTHROPIC_VERSION,
    }
    if api_key:
        headers["x-api-key"] = api_key
    if betas:
        headers["anthropic-beta"] = ",".join(betas)
    headers.update(model.get("headers") or {})
    headers.update(options.headers)
    return ProviderRequest("POST", join_url(model["baseUrl"], "v1/messages"), headers, body)


def map_stop_reason(reason: str, details: dict[str, Any] | None = None) -> tuple[str, str | None]:
    """(stopReason, errorMessage) for an Anthropic `stop_reason` (Pi mapStopReason)."""
    if reason in ("end_turn", "pause_turn", "stop_sequence"):
        return "stop", None
    if reason == "max_tokens":
        return "length", None
    if reason == "tool_use":
        return "toolUse", None
    if reason == "refusal":
        return "error", (details or {}).get("explanation") or "The model refused to complete the request"
    if reason == "sensitive":
        return "error", "Provider stopped with: sensitive"
    raise StreamProtocolError(f"Unhandled stop reason: {reason}")


class AnthropicParser:
    """Folds Anthropic SSE events into `output`; blocks are matched by the event `index`."""

    def __init__(self, model: Model, output: AssistantMessage) -> None:
        self.model = model
        self.out = output
        self.by_index: dict[int, dict[str, Any]] = {}
        self.partial_json: dict[int, str] = {}
        self.saw_start = False
        self.saw_stop = False

    def _usage_total(self) -> None:
        u = self.out["usage"]
        u["totalTokens"] = u["input"] + u["output"] + u["cacheRead"] + u["cacheWrite"]
        calculate_cost(self.model, u)

    def feed(self, sse: SseEvent) -> list[AssistantMessageEvent]:
        if sse.event == "error":
            raise StreamProtocolError(sse.data)
        if sse.event not in _MESSAGE_EVENTS and sse.event is not None:
            return []  # ping and future event types
        if not sse.data.strip():
            return []
        ev = json.loads(sse.data)
        kind = ev.get("type")
        if kind == "error":
            raise StreamProtocolError(sse.data)
        p = self.out
        if kind == "message_start":
            self.saw_start = True
            msg = ev.get("message") or {}
            if msg.get("id"):
                p["responseId"] = msg["id"]
            if msg.get("model") and msg["model"] != self.model["id"]:
                p["responseModel"] = msg["model"]
            u = msg.get("usage") or {}
            p["usage"]["input"] = u.get("input_tokens") or 0
            p["usage"]["output"] = u.get("output_tokens") or 0
            p["usage"]["cacheRead"] = u.get("cache_read_input_tokens") or 0
            p["usage"]["cacheWrite"] = u.get("cache_creation_input_tokens") or 0
            p["usage"]["cacheWrite1h"] = (u.get("cache_creation") or {}).get("ephemeral_1h_input_tokens") or 0
            self._usage_total()
            return []
        if kind == "content_block_start":
            return self._block_start(ev["index"], ev.get("content_block") or {})
        if kind == "content_block_delta":
            return self._block_delta(ev["index"], ev.get("delta") or {})
        if kind == "content_block_stop":
            return self._block_stop(ev["index"])
        if kind == "message_delta":
            delta = ev.get("delta") or {}
            if delta.get("stop_reason"):
                p["rawStopReason"] = delta["stop_reason"]
                stop, err = map_stop_reason(delta["stop_reason"], delta.get("stop_details"))
                p["stopReason"] = stop  # type: ignore[typeddict-item]
                if err:
                    p["errorMessage"] = err
            u = ev.get("usage") or {}
            for src, dst in (
                ("input_tokens", "input"),
                ("output_tokens", "output"),
                ("cache_read_input_tokens", "cacheRead"),
                ("cache_creation_input_tokens", "cacheWrite"),
            ):
                if u.get(src) is not None:
                    p["usage"][dst] = u[src]  # type: ignore[literal-required]
            self._usage_total()
            return []
        if kind == "message_stop":
            self.saw_stop = True
        return []

    def _block_start(self, index: int, cb: dict[str, Any]) -> list[AssistantMessageEvent]:
        kind = cb.get("type")
        if kind == "text":
            block: dict[str, Any] = {"type": "text", "text": cb.get("text") or ""}
            ev_type = "text_start"
        elif kind == "thinking":
            block = {
                "type": "thinking",
                "thinking": cb.get("thinking") or "",
                "thinkingSignature": cb.get("signature") or "",
            }
            ev_type = "thinking_start"
        elif kind == "redacted_thinking":
            block = {
                "type": "thinking",
                "thinking": "[Reasoning redacted]",
                "thinkingSignature": cb.get("data", ""),
                "redacted": True,
            }
            ev_type = "thinking_start"
        elif kind == "tool_use":
            block = {
                "type": "toolCall",
                "id": cb.get("id", ""),
                "name": cb.get("name", ""),
                "arguments": cb.get("input") or {},
            }
            self.partial_json[index] = ""
            ev_type = "toolcall_start"
        else:
            return []
        self.by_index[index] = block
        self.out["content"].append(block)  # type: ignore[arg-type]
        return [cast(AssistantMessageEvent, {"type": ev_type, "contentIndex": len(self.out["content"]) - 1,
                                             "partial": self.out})]

    def _block_delta(self, index: int, delta: dict[str, Any]) -> list[AssistantMessageEvent]:
        block = self.by_index.get(index)
        if block is None:
            return []
        pos = block_index(self.out, block)
        kind = delta.get("type")
        if kind == "text_delta" and block["type"] == "text":
            block["text"] += delta["text"]
            return [{"type": "text_delta", "contentIndex": pos, "delta": delta["text"], "partial": self.out}]
        if kind == "thinking_delta" and block["type"] == "thinking":
            block["thinking"] += delta["thinking"]
            return [{"type": "thinking_delta", "contentIndex": pos, "delta": delta["thinking"], "partial": self.out}]
        if kind == "input_json_delta" and block["type"] == "toolCall":
            self.partial_json[index] += delta["partial_json"]
            block["arguments"] = parse_streaming_json(self.partial_json[index])
            return [
                {"type": "toolcall_delta", "contentIndex": pos, "delta": delta["partial_json"], "partial": self.out}
            ]
        if kind == "signature_delta" and block["type"] == "thinking":
            block["thinkingSignature"] = (block.get("thinkingSignature") or "") + delta["signature"]
        return []

    def _block_stop(self, index: int) -> list[AssistantMessageEvent]:
        block = self.by_index.pop(index, None)
        if block is None:
            return []
        pos = block_index(self.out, block)
        if block["type"] == "text":
            return [{"type": "text_end", "contentIndex": pos, "content": block["text"], "partial": self.out}]
        if block["type"] == "thinking":
            return [{"type": "thinking_end", "contentIndex": pos, "content": block["thinking"], "partial": self.out}]
        if index in self.partial_json:
            block["arguments"] = parse_streaming_json(self.partial_json.pop(index)) or block["arguments"]
        return [{"type": "toolcall_end", "contentIndex": pos, "toolCall": block, "partial": self.out}]  # type: ignore[typeddict-item]

    def finish(self) -> list[AssistantMessageEvent]:
        if self.saw_start and not self.saw_stop:
            raise StreamProtocolError("Anthropic stream ended before message_stop")
        if self.out["stopReason"] == "pending":
            raise StreamProtocolError("Anthropic stream ended without a stop reason")
        return []


def stream_anthropic_messages(model: Model, context: Context, options: StreamOptions) -> AssistantMessageStream:
    """Start a streamed Messages call; returns an `AssistantMessageStream`."""
    return start_http_stream(model, context, options, build_request=build_request, parser_factory=AnthropicParser)

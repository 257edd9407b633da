"""OpenAI Chat Completions (`POST {baseUrl}/chat/completions`), also the route for every
OpenAI-compatible server (Ollama, llama.cpp, vLLM, LM Studio, Groq, Together, OpenRouter,
DeepSeek, Mistral, xAI, Cerebras): only `baseUrl` and the key differ.

Wire facts ported from Pi api/openai-completions.ts: `stream_options.include_usage`,
`max_completion_tokens` (or `max_tokens` for servers that want it), reasoning arrives in
`reasoning_content` / `reasoning` / `reasoning_text`, parallel tool calls are keyed by `index`,
usage `prompt_tokens` includes cached tokens (subtracted into `cacheRead`), finish reasons map
stop/end → stop, length → length, tool_calls/function_call → toolUse, anything else → error
"Provider finish_reason: <reason>".
"""

from __future__ import annotations

import json
from typing import Any

from picontext.ai._http import ProviderRequest, SseEvent, join_url
from picontext.ai.event_stream import AssistantMessageStream
from picontext.ai.events import AssistantMessageEvent
from picontext.ai.models import Model, calculate_cost
from picontext.ai.providers._base import (
    Context,
    StreamOptions,
    StreamProtocolError,
    context_tools,
    parse_streaming_json,
    split_system,
    start_http_stream,
)
from picontext.ai.providers.transform import tool_result_text, transform_messages
from picontext.ai.types import AssistantMessage, Usage

API = "openai-completions"
_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
# Servers that reject `max_completion_tokens` / the `developer` role / `store` (Pi detectCompat).
_MAX_TOKENS_HOSTS = ("deepseek.com", "moonshot.", "together.", "chutes.ai", "nvidia.com", "z.ai", "bigmodel.cn")
_NON_STANDARD_HOSTS = (*_MAX_TOKENS_HOSTS, "cerebras.ai", "api.x.ai", "opencode.ai")


def _compat(model: Model) -> dict[str, Any]:
    base = model["baseUrl"]
    non_standard = any(h in base for h in _NON_STANDARD_HOSTS) or model["provider"] in (
        "cerebras",
        "xai",
        "deepseek",
        "together",
        "zai",
        "moonshotai",
    )
    openrouter = model["provider"] == "openrouter" or "openrouter.ai" in base
    compat: dict[str, Any] = {
        "supportsStore": not non_standard and "api.openai.com" in base,
        "supportsDeveloperRole": not non_standard and not openrouter and "api.openai.com" in base,
        "maxTokensField": "max_tokens" if any(h in base for h in _MAX_TOKENS_HOSTS) else "max_completion_tokens",
        "supportsUsageInStreaming": True,
        "supportsReasoningEffort": model["provider"] not in ("xai", "zai", "moonshotai", "together"),
    }
    compat.update(model.get("compat") or {})
    return compat


def _normalize_id(call_id: str, model: Model, _source: dict[str, Any]) -> str:
    if "|" in call_id:  # OpenAI Responses ids are "call|item"
        call, _, item = call_id.partition("|")
        clean = lambda s: "".join(c if c.isalnum() or c in "_-" else "_" for c in s)  # noqa: E731
        combined = f"{clean(call)}_{clean(item)}" if item else clean(call)
        return combined[:40]
    return call_id[:40] if model["provider"] == "openai" else call_id


def convert_messages(model: Model, context: Context) -> list[dict[str, Any]]:
    """Pure: the `messages` array (system prompt first)."""
    compat = _compat(model)
    system, rest = split_system(context)
    out: list[dict[str, Any]] = []
    if system:
        role = "developer" if model["reasoning"] and compat["supportsDeveloperRole"] else "system"
        out.append({"role": role, "content": system})
    for msg in transform_messages(rest, model, _normalize_id):
        role = msg["role"]
        if role == "user":
            if isinstance(msg["content"], str):
                out.append({"role": "user", "content": msg["content"]})
                continue
            parts = []
            for item in msg["content"]:
                if item.get("type") == "text":
                    if item["text"]:
                        parts.append({"type": "text", "text": item["text"]})
                elif item.get("type") == "image":
                    parts.append(
                        {"type": "image_url", "image_url": {"url": f"data:{item['mimeType']};base64,{item['data']}"}}
                    )
            if parts:
                out.append({"role": "user", "content": parts})
        elif role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": None}
            text = "".join(b["text"] for b in msg["content"] if b.get("type") == "text" and b["text"].strip())
            thinking = [b for b in msg["content"] if b.get("type") == "thinking" and b["thinking"].strip()]
            if text:
                entry["content"] = text
            if thinking:
                sig = thinking[0].get("thinkingSignature")
                if sig in _REASONING_FIELDS:  # replay reasoning in the field it came from
                    entry[sig] = "\n".join(b["thinking"] for b in thinking)
            calls = [b for b in msg["content"] if b.get("type") == "toolCall"]
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {})},
                    }
                    for c in calls
                ]
            if entry["content"] is None and not calls:
                continue
            out.append(entry)
        elif role == "toolResult":
            text, has_images = tool_result_text(msg["content"])
            out.append(
                {
                    "role": "tool",
                    "content": text or ("(see attached image)" if has_images else "(no tool output)"),
                    "tool_call_id": msg["toolCallId"],
                }
            )
    return out


def build_body(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """Pure: the JSON body of a streaming chat completion."""
    compat = _compat(model)
    body: dict[str, Any] = {"model": model["id"], "messages": convert_messages(model, context), "stream": True}
    if options.cache_session_id and "api.openai.com" in model["baseUrl"]:
        body["prompt_cache_key"] = options.cache_session_id[:64]
    if options.cache_retention == "long" and "api.openai.com" in model["baseUrl"]:
        body["prompt_cache_retention"] = "24h"
    if compat["supportsUsageInStreaming"]:
        body["stream_options"] = {"include_usage": True}
    if compat["supportsStore"]:
        body["store"] = False
    if options.max_tokens:
        body[compat["maxTokensField"]] = options.max_tokens
    if options.temperature is not None:
        body["temperature"] = options.temperature
    tools = context_tools(context)
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t["name"], "description": t["description"], "parameters": t["parameters"]},
            }
            for t in tools
        ]
    elif any(m["role"] == "toolResult" for m in context["messages"]):
        body["tools"] = []  # proxies in front of Anthropic need it when history has tool calls
    if options.tool_choice is not None:
        body["tool_choice"] = options.tool_choice
    if model["reasoning"] and options.thinking and compat["supportsReasoningEffort"]:
        body["reasoning_effort"] = "high" if options.thinking == "xhigh" else options.thinking
    return body


def build_request(model: Model, context: Context, options: StreamOptions, api_key: str) -> ProviderRequest:
    """Pure: URL, headers and body. The key only goes into the Authorization header."""
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    if options.cache_session_id and (model["provider"] == "openrouter" or "openrouter.ai" in model["baseUrl"]):
        headers["x-session-id"] = options.cache_session_id
    headers.update(model.get("headers") or {})
    headers.update(options.headers)
    return ProviderRequest(
        "POST", join_url(model["baseUrl"], "chat/completions"), headers, build_body(model, context, options)
    )


def map_stop_reason(reason: str | None) -> tuple[str, str | None]:
    """(stopReason, errorMessage) for a `finish_reason` (Pi mapStopReason)."""
    if reason is None or reason in ("stop", "end"):
        return "stop", None
    if reason == "length":
        return "length", None
    if reason in ("function_call", "tool_calls"):
        return "toolUse", None
    return "error", f"Provider finish_reason: {reason}"


def parse_usage(raw: dict[str, Any], model: Model) -> Usage:
    """Usage from an OpenAI-style `usage` object; cached tokens are split out of the input."""
    prompt = raw.get("prompt_tokens") or 0
    details = raw.get("prompt_tokens_details") or {}
    cache_read = details.get("cached_tokens")
    if cache_read is None:
        cache_read = raw.get("prompt_cache_hit_tokens", raw.get("cached_tokens", 0)) or 0
    cache_write = details.get("cache_write_tokens") or 0
    inp = max(0, prompt - cache_read - cache_write)
    out = raw.get("completion_tokens") or 0
    usage: Usage = {
        "input": inp,
        "output": out,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "totalTokens": inp + out + cache_read + cache_write,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        "reasoning": (raw.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0,
    }
    calculate_cost(model, usage)
    return usage


class ChatCompletionsParser:
    """Folds `chat.completion.chunk` SSE events into `output`, emitting events as it goes."""

    def __init__(self, model: Model, output: AssistantMessage) -> None:
        self.model = model
        self.out = output
        self.text_block: dict[str, Any] | None = None
        self.thinking_block: dict[str, Any] | None = None
        self.calls_by_index: dict[int, dict[str, Any]] = {}
        self.partial_args: dict[int, str] = {}  # id(block) -> raw argument text
        self.has_finish = False
        self.saw_done = False

    def _index(self, block: dict[str, Any]) -> int:
        return next(i for i, b in enumerate(self.out["content"]) if b is block)

    def feed(self, sse: SseEvent) -> list[AssistantMessageEvent]:
        data = sse.data.strip()
        if not data:
            return []
        if data == "[DONE]":
            self.saw_done = True
            return []
        chunk = json.loads(data)
        if not isinstance(chunk, dict):
            return []
        if isinstance(chunk.get("error"), dict):  # some servers stream an error object
            err = chunk["error"]
            raise StreamProtocolError(str(err.get("message") or json.dumps(err)))
        evs: list[AssistantMessageEvent] = []
        out, p = self.out, self.out
        if chunk.get("id") and "responseId" not in out:
            out["responseId"] = chunk["id"]
        if isinstance(chunk.get("model"), str) and chunk["model"] and chunk["model"] != self.model["id"]:
            out.setdefault("responseModel", chunk["model"])
        if chunk.get("usage"):
            out["usage"] = parse_usage(chunk["usage"], self.model)
        choices = chunk.get("choices") or []
        if not choices:
            return evs
        choice = choices[0]
        if not chunk.get("usage") and choice.get("usage"):
            out["usage"] = parse_usage(choice["usage"], self.model)
        if choice.get("finish_reason"):
            out["rawStopReason"] = choice["finish_reason"]
            stop, err = map_stop_reason(choice["finish_reason"])
            out["stopReason"] = stop  # type: ignore[typeddict-item]
            if err:
                out["errorMessage"] = err
            self.has_finish = True
        delta = choice.get("delta") or {}
        content = delta.get("content")
        if content:
            if self.text_block is None:
                self.text_block = {"type": "text", "text": ""}
                out["content"].append(self.text_block)  # type: ignore[arg-type]
                evs.append({"type": "text_start", "contentIndex": self._index(self.text_block), "partial": p})
            self.text_block["text"] += content
            evs.append(
                {"type": "text_delta", "contentIndex": self._index(self.text_block), "delta": content, "partial": p}
            )
        field = next((f for f in _REASONING_FIELDS if isinstance(delta.get(f), str) and delta[f]), None)
        if field:
            if self.thinking_block is None:
                self.thinking_block = {"type": "thinking", "thinking": "", "thinkingSignature": field}
                out["content"].append(self.thinking_block)  # type: ignore[arg-type]
                evs.append({"type": "thinking_start", "contentIndex": self._index(self.thinking_block), "partial": p})
            self.thinking_block["thinking"] += delta[field]
            evs.append(
                {
                    "type": "thinking_delta",
                    "contentIndex": self._index(self.thinking_block),
                    "delta": delta[field],
                    "partial": p,
                }
            )
        for tc in delta.get("tool_calls") or []:
            evs.extend(self._tool_delta(tc))
        return evs

    def _tool_delta(self, tc: dict[str, Any]) -> list[AssistantMessageEvent]:
        evs: list[AssistantMessageEvent] = []
        index = tc.get("index", len(self.calls_by_index))
        fn = tc.get("function") or {}
        block = self.calls_by_index.get(index)
        if block is None and tc.get("id"):
            block = next((b for b in self.calls_by_index.values() if b["id"] == tc["id"]), None)
        if block is None:
            block = {"type": "toolCall", "id": tc.get("id") or "", "name": fn.get("name") or "", "arguments": {}}
            self.calls_by_index[index] = block
            self.partial_args[id(block)] = ""
            self.out["content"].append(block)  # type: ignore[arg-type]
            evs.append({"type": "toolcall_start", "contentIndex": self._index(block), "partial": self.out})
        if not block["id"] and tc.get("id"):
            block["id"] = tc["id"]
        if not block["name"] and fn.get("name"):
            block["name"] = fn["name"]
        piece = fn.get("arguments") or ""
        if piece:
            self.partial_args[id(block)] += piece
            block["arguments"] = parse_streaming_json(self.partial_args[id(block)])
        evs.append({"type": "toolcall_delta", "contentIndex": self._index(block), "delta": piece, "partial": self.out})
        return evs

    def finish(self) -> list[AssistantMessageEvent]:
        evs: list[AssistantMessageEvent] = []
        for i, block in enumerate(self.out["content"]):
            if block["type"] == "text":
                evs.append({"type": "text_end", "contentIndex": i, "content": block["text"], "partial": self.out})
            elif block["type"] == "thinking":
                evs.append(
                    {"type": "thinking_end", "contentIndex": i, "content": block["thinking"], "partial": self.out}
                )
            elif block["type"] == "toolCall":
                block["arguments"] = parse_streaming_json(self.partial_args.get(id(block), ""))
                evs.append({"type": "toolcall_end", "contentIndex": i, "toolCall": block, "partial": self.out})
        if self.out["stopReason"] == "error":
            self.out.setdefault("errorMessage", "Provider returned an error stop reason")
        elif not self.has_finish:
            self.out["stopReason"] = "error"
            self.out["errorMessage"] = "Stream ended without finish_reason"
        return evs


def stream_openai_completions(model: Model, context: Context, options: StreamOptions) -> AssistantMessageStream:
    """Start a streamed chat completion; returns an `AssistantMessageStream`."""
    return start_http_stream(model, context, options, build_request=build_request, parser_factory=ChatCompletionsParser)

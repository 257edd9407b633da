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
import re
from typing import Any

from picontext.ai._http import ProviderRequest, SseEvent, join_url
from picontext.ai.event_stream import AssistantMessageStream
from picontext.ai.events import AssistantMessageEvent
from picontext.ai.models import Model, calculate_cost, is_local_base_url
from picontext.ai.providers._base import (
    Context,
    StreamOptions,
    StreamProtocolError,
    context_tools,
    parse_streaming_json,
    split_system,
    start_http_stream,
)
from picontext.ai.providers.simple_options import (
    base_max_tokens,
    clamp_budget_to_answer_room,
    clamped_effort,
    js_json,
    level_map,
    short_hash,
    thinking_budget_for_level,
)
from picontext.ai.providers.transform import tool_result_text, transform_messages
from picontext.ai.types import AssistantMessage, Tool, Usage

API = "openai-completions"
_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
_REASONING_DETAIL_TYPES = {"reasoning.summary": "summary", "reasoning.encrypted": "data", "reasoning.text": "text"}


def _compat(model: Model) -> dict[str, Any]:
    """Pi detectCompat: settings from the provider name and baseUrl; `model["compat"]` wins."""
    provider, base, mid = model["provider"], model["baseUrl"], model["id"]
    zai = provider in ("zai", "zai-coding-cn") or "api.z.ai" in base or "open.bigmodel.cn" in base
    together = provider == "together" or "api.together.ai" in base or "api.together.xyz" in base
    moonshot = provider in ("moonshotai", "moonshotai-cn") or "api.moonshot." in base
    openrouter = provider == "openrouter" or "openrouter.ai" in base
    cf_workers = provider == "cloudflare-workers-ai" or "api.cloudflare.com" in base
    cf_gateway = provider == "cloudflare-ai-gateway" or "gateway.ai.cloudflare.com" in base
    nvidia = provider == "nvidia" or "integrate.api.nvidia.com" in base
    ant_ling = provider == "ant-ling" or "api.ant-ling.com" in base
    cerebras = provider == "cerebras" or "cerebras.ai" in base
    deepseek = provider == "deepseek" or "deepseek.com" in base.lower()
    grok = provider == "xai" or "api.x.ai" in base
    non_standard = (
        nvidia
        or cerebras
        or grok
        or together
        or "chutes.ai" in base
        or deepseek
        or zai
        or moonshot
        or provider == "opencode"
        or "opencode.ai" in base
        or cf_workers
        or cf_gateway
        or ant_ling
    )
    # Ours: a server on this machine (llama.cpp, Ollama, LM Studio, vLLM) reads `max_tokens`;
    # llama-cpp-python ignores `max_completion_tokens` and generates until its window is full.
    local = is_local_base_url(base)
    use_max_tokens = (
        "chutes.ai" in base or deepseek or moonshot or cf_gateway or together or nvidia or ant_ling or zai or local
    )
    thinking_format = (
        "deepseek"
        if deepseek
        else "zai"
        if zai
        else "together"
        if together
        else "ant-ling"
        if ant_ling
        else "openrouter"
        if openrouter
        else "openai"
    )
    compat: dict[str, Any] = {
        "supportsStore": not non_standard,
        "supportsDeveloperRole": (openrouter and mid.startswith(("anthropic/", "openai/")))
        or (not non_standard and not openrouter),
        "supportsReasoningEffort": not (grok or zai or moonshot or together or cf_gateway or nvidia or ant_ling),
        "supportsUsageInStreaming": True,
        "supportsFinishReason": True,
        "maxTokensField": "max_tokens" if use_max_tokens else "max_completion_tokens",
        "requiresToolResultName": False,
        "requiresAssistantAfterToolResult": False,
        "requiresThinkingAsText": False,
        "requiresReasoningContentOnAssistantMessages": deepseek,
        "thinkingFormat": thinking_format,
        "supportsThinkingTokenBudget": False,
        "thinkingTokenBudgetField": None,
        "supportsStrictMode": False,
        "cacheControlFormat": "anthropic" if provider == "openrouter" and mid.startswith("anthropic/") else None,
        "sendSessionAffinityHeaders": openrouter,
        "sessionAffinityFormat": "openrouter" if openrouter else "openai",
        "supportsLongCacheRetention": not (together or cf_workers or cf_gateway or nvidia or ant_ling),
        "chatTemplateKwargs": {},
        "userTextAsString": True,  # ours, see _user_content
    }
    for key, value in (model.get("compat") or {}).items():
        if value is not None:
            compat[key] = value
    return compat


def _clean(part: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_-]", "_", part)


def _normalize_id(call_id: str, model: Model, _source: dict[str, Any]) -> str:
    if "|" in call_id:  # OpenAI Responses ids are "call|item"
        call, _, item = call_id.partition("|")
        combined = f"{_clean(call)}_{_clean(item)}" if item else _clean(call)
        if len(combined) <= 40:
            return combined
        digest = short_hash(call_id)[:8]
        return f"{_clean(call)[: max(1, 40 - len(digest) - 1)]}_{digest}"
    return call_id[:40] if model["provider"] == "openai" else call_id


def _reasoning_details(signature: Any) -> list[dict[str, Any]] | None:
    """A `thinkingSignature` holding OpenRouter-style `reasoning_details`, parsed; else None."""
    if not isinstance(signature, str) or not signature:
        return None
    try:
        parsed = json.loads(signature)
    except ValueError:
        return None
    if not isinstance(parsed, list) or not parsed:
        return None
    for d in parsed:
        field_name = _REASONING_DETAIL_TYPES.get(str(d.get("type"))) if isinstance(d, dict) else None
        if field_name is None or not isinstance(d.get(field_name), str):
            return None
    return parsed


def _user_parts(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": item.get("text", "")}
        if item.get("type") == "text"
        else {"type": "image_url", "image_url": {"url": f"data:{item['mimeType']};base64,{item['data']}"}}
        for item in content
    ]


def _user_content(content: list[dict[str, Any]], compat: dict[str, Any]) -> str | list[dict[str, Any]]:
    """Text-only content as one string (ours, `compat.userTextAsString`, default on): every
    OpenAI-compatible server takes a string, while some chat templates (llama.cpp's server) fail
    on, or silently drop, an array of text parts. Content with an image stays an array."""
    if compat.get("userTextAsString") and all(item.get("type") == "text" for item in content):
        return "\n".join(item.get("text", "") for item in content)
    return _user_parts(content)


def convert_messages(model: Model, context: Context, compat: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Pure: the `messages` array (system prompt first)."""
    compat = compat or _compat(model)
    system, rest = split_system(context)
    out: list[dict[str, Any]] = []
    if system:
        role = "developer" if model["reasoning"] and compat["supportsDeveloperRole"] else "system"
        out.append({"role": role, "content": system})
    msgs = transform_messages(rest, model, _normalize_id)
    last_role: str | None = None
    i = 0
    while i < len(msgs):
        msg = msgs[i]
        role = msg["role"]
        if compat["requiresAssistantAfterToolResult"] and last_role == "toolResult" and role == "user":
            out.append({"role": "assistant", "content": "I have processed the tool results."})
        if role == "user":
            if isinstance(msg["content"], str):
                out.append({"role": "user", "content": msg["content"]})
            elif msg["content"]:
                out.append({"role": "user", "content": _user_content(msg["content"], compat)})
            else:
                i += 1
                continue  # Pi skips an empty user message without updating the last role
        elif role == "assistant":
            entry = _assistant_entry(model, msg, compat)
            if entry is None:
                i += 1
                continue
            out.append(entry)
        elif role == "toolResult":
            images: list[dict[str, Any]] = []
            while i < len(msgs) and msgs[i]["role"] == "toolResult":
                tr = msgs[i]
                text, has_images = tool_result_text(tr["content"])
                item: dict[str, Any] = {
                    "role": "tool",
                    "content": text or ("(see attached image)" if has_images else "(no tool output)"),
                    "tool_call_id": tr["toolCallId"],
                }
                if compat["requiresToolResultName"] and tr.get("toolName"):
                    item["name"] = tr["toolName"]
                out.append(item)
                if has_images and "image" in model["input"]:
                    images += _user_parts([b for b in tr["content"] if b.get("type") == "image"])
                i += 1
            if images:
                if compat["requiresAssistantAfterToolResult"]:
                    out.append({"role": "assistant", "content": "I have processed the tool results."})
                intro = {"type": "text", "text": "Attached image(s) from tool result:"}
                out.append({"role": "user", "content": [intro, *images]})
                last_role = "user"
            else:
                last_role = "toolResult"
            continue
        last_role = role
        i += 1
    return out


def _assistant_entry(model: Model, msg: dict[str, Any], compat: dict[str, Any]) -> dict[str, Any] | None:
    entry: dict[str, Any] = {"role": "assistant", "content": "" if compat["requiresAssistantAfterToolResult"] else None}
    texts = [b["text"] for b in msg["content"] if b.get("type") == "text" and b["text"].strip()]
    text = "".join(texts)
    thinking = [b for b in msg["content"] if b.get("type") == "thinking"]
    calls = [b for b in msg["content"] if b.get("type") == "toolCall"]
    details = next((d for d in (_reasoning_details(b.get("thinkingSignature")) for b in thinking) if d), None)
    if details is None:
        legacy = []
        for c in calls:
            d = _reasoning_details(f"[{c['thoughtSignature']}]") if c.get("thoughtSignature") else None
            if d and d[0]["type"] == "reasoning.encrypted" and d[0].get("id") and d[0]["data"]:
                legacy.append(d[0])
        details = legacy or None
    non_empty = [b for b in thinking if b["thinking"].strip()]
    if non_empty and compat["requiresThinkingAsText"]:
        entry["content"] = [
            {"type": "text", "text": "\n\n".join(b["thinking"] for b in non_empty)},
            *({"type": "text", "text": t} for t in texts),
        ]
    else:
        if text:
            entry["content"] = text
        if non_empty and details is None:
            sig = non_empty[0].get("thinkingSignature")
            if model["provider"] == "opencode-go" and sig == "reasoning":
                sig = "reasoning_content"
            if sig in _REASONING_FIELDS:  # replay reasoning in the field it came from
                entry[sig] = "\n".join(b["thinking"] for b in non_empty)
    if calls:
        entry["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": js_json(c["arguments"])}}
            for c in calls
        ]
    if details:
        entry["reasoning_details"] = details
    needs_reasoning = compat["requiresReasoningContentOnAssistantMessages"] and model["reasoning"]
    if needs_reasoning and "reasoning_content" not in entry:
        entry["reasoning_content"] = ""
    if not entry["content"] and not calls:
        return None
    return entry


def _has_tool_history(messages: list[Any]) -> bool:
    return any(
        m["role"] == "toolResult"
        or (m["role"] == "assistant" and any(b.get("type") == "toolCall" for b in m.get("content") or []))
        for m in messages
    )


def _apply_cache_control(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, cc: dict[str, Any],
    before_last: bool = False,
) -> None:
    """OpenRouter's Anthropic models: breakpoints on the system prompt, the last tool, the last
    message (with `before_last`: the last one before the request's own final message)."""

    def mark(message: dict[str, Any]) -> bool:
        content = message.get("content")
        if isinstance(content, str):
            if not content:
                return False
            message["content"] = [{"type": "text", "text": content, "cache_control": cc}]
            return True
        if isinstance(content, list):
            for part in reversed(content):
                if part.get("type") == "text":
                    part["cache_control"] = cc
                    return True
        return False

    for m in messages:
        if m["role"] in ("system", "developer"):
            mark(m)
            break
    if tools:
        tools[-1]["cache_control"] = cc
    for m in reversed(messages[:-1] if before_last else messages):
        if m["role"] in ("user", "assistant", "tool") and mark(m):
            break


def build_body(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """Pure: the JSON body of a streaming chat completion (Pi streamSimple + buildParams)."""
    compat = _compat(model)
    retention = options.cache_retention
    messages = convert_messages(model, context, compat)
    body: dict[str, Any] = {"model": model["id"], "messages": messages, "stream": True}
    long_cache = retention == "long" and compat["supportsLongCacheRetention"]
    if options.session_id and (("api.openai.com" in model["baseUrl"] and retention != "none") or long_cache):
        body["prompt_cache_key"] = options.session_id[:64]
    if long_cache:
        body["prompt_cache_retention"] = "24h"
    if compat["supportsUsageInStreaming"] is not False:
        body["stream_options"] = {"include_usage": True}
    if compat["supportsStore"]:
        body["store"] = False
    max_tokens = base_max_tokens(model, context, options.max_tokens)
    if max_tokens:
        body[compat["maxTokensField"]] = max_tokens
    if options.temperature is not None:
        body["temperature"] = options.temperature
    if options.seed is not None:  # ours: OpenAI, llama.cpp, vLLM, Ollama's /v1 all take it
        body["seed"] = options.seed
    tools = context_tools(context)
    if tools:
        body["tools"] = [_tool(t, compat) for t in tools]
        if compat.get("zaiToolStream"):
            body["tool_stream"] = True
    elif _has_tool_history(context["messages"]):
        body["tools"] = []  # proxies in front of Anthropic need it when history has tool calls
    if compat["cacheControlFormat"] == "anthropic" and retention != "none":
        cc: dict[str, Any] = {"type": "ephemeral", **({"ttl": "1h"} if long_cache else {})}
        _apply_cache_control(messages, body.get("tools"), cc, options.cache_before_last)
    if options.tool_choice:
        body["tool_choice"] = options.tool_choice
    if compat.get("vllmPriority") is not None:
        body["priority"] = compat["vllmPriority"]
    _apply_reasoning(model, options, compat, body)
    if compat.get("openRouterRouting"):
        body["provider"] = compat["openRouterRouting"]
    return body


def _tool(t: Tool, compat: dict[str, Any]) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": t["name"], "description": t["description"], "parameters": t["parameters"]}
    if compat["supportsStrictMode"] is not False:
        fn["strict"] = False
    return {"type": "function", "function": fn}


def _apply_reasoning(model: Model, options: StreamOptions, compat: dict[str, Any], body: dict[str, Any]) -> None:
    """The reasoning parameters in the server's dialect (`compat.thinkingFormat`), on or off."""
    effort = clamped_effort(model, options.reasoning)
    mapping = level_map(model)
    fmt = compat["thinkingFormat"]
    reasoning = model["reasoning"]
    supports_effort = compat["supportsReasoningEffort"]
    mapped = mapping.get(effort, effort) if effort else None
    off_value = mapping.get("off", "<unset>")
    if not reasoning:
        pass
    elif fmt == "zai":
        body["thinking"] = {"type": "enabled", "clear_thinking": False} if effort else {"type": "disabled"}
        if effort and supports_effort and isinstance(mapped, str):
            body["reasoning_effort"] = mapped
    elif fmt == "qwen":
        body["enable_thinking"] = bool(effort)
        if effort and supports_effort and isinstance(mapped, str):
            body["reasoning_effort"] = mapped
    elif fmt == "qwen-chat-template":
        body["chat_template_kwargs"] = {"enable_thinking": bool(effort), "preserve_thinking": True}
    elif fmt == "deepseek":
        if effort:
            body["thinking"] = {"type": "enabled"}
        elif off_value is not None:
            body["thinking"] = {"type": "disabled"}
        if effort and supports_effort:
            body["reasoning_effort"] = mapped
    elif fmt == "openrouter":
        if effort:
            body["reasoning"] = {"effort": mapped}
        elif off_value is not None:
            body["reasoning"] = {"effort": "none" if off_value == "<unset>" else off_value}
    elif fmt == "ant-ling":
        if effort and isinstance(mapping.get(effort), str):
            body["reasoning"] = {"effort": mapping[effort]}
    elif fmt == "together":
        body["reasoning"] = {"enabled": bool(effort)}
        if effort and supports_effort:
            body["reasoning_effort"] = mapped
    elif fmt == "string-thinking":
        if effort:
            body["thinking"] = mapped
        elif off_value is not None:
            body["thinking"] = "none" if off_value == "<unset>" else off_value
    elif effort and supports_effort:
        body["reasoning_effort"] = mapped
    elif not effort and supports_effort and isinstance(off_value, str) and off_value != "<unset>":
        body["reasoning_effort"] = off_value
    budget_field = compat.get("thinkingTokenBudgetField") or (
        "thinking_token_budget" if compat.get("supportsThinkingTokenBudget") else None
    )
    if budget_field and effort and reasoning:
        ceiling = body.get("max_tokens") or body.get("max_completion_tokens") or model["maxTokens"]
        custom = {effort: options.thinking_budget_tokens} if options.thinking_budget_tokens else None
        budget = clamp_budget_to_answer_room(thinking_budget_for_level(effort, custom), ceiling)
        if budget > 0:
            body[budget_field] = budget


def build_request(model: Model, context: Context, options: StreamOptions, api_key: str) -> ProviderRequest:
    """Pure: URL, headers and body. The key only goes into the Authorization header."""
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    compat = _compat(model)
    session = options.cache_session_id
    if session and compat["sendSessionAffinityHeaders"]:
        if compat["sessionAffinityFormat"] == "openrouter":
            headers["x-session-id"] = session
        else:
            if compat["sessionAffinityFormat"] == "openai":
                headers["session_id"] = session
            headers["x-client-request-id"] = session
            headers["x-session-affinity"] = session
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
    return start_http_stream(
        model, context, options, build_request=build_request, parser_factory=ChatCompletionsParser, resolve_silent=True
    )

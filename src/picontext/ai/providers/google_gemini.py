"""Google Gemini (`POST {baseUrl}/models/{id}:streamGenerateContent?alt=sse`).

Wire facts ported from Pi api/google-generative-ai.ts and google-shared.ts: roles user/model;
`systemInstruction`; tool results as `functionResponse` parts (`{"output": ...}` or
`{"error": ...}`) grouped into one user turn; parts with `thought: true` are thinking; function
calls arrive whole (one start/delta/end triple each), ids generated when missing or duplicated;
usage from `usageMetadata` (`promptTokenCount` includes cached tokens, output = candidates +
thoughts); finishReason STOP → stop (toolUse when a call was made), MAX_TOKENS → length,
anything else → error "Provider stopped with: <reason>".
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any, cast

from picontext.ai._http import ProviderRequest, SseEvent, join_url
from picontext.ai.event_stream import AssistantMessageStream
from picontext.ai.events import AssistantMessageEvent
from picontext.ai.models import Model, calculate_cost
from picontext.ai.providers._base import (
    Context,
    StreamOptions,
    StreamProtocolError,
    context_tools,
    split_system,
    start_http_stream,
)
from picontext.ai.providers.simple_options import base_max_tokens, clamp_thinking_level, clamped_effort, level_map
from picontext.ai.providers.transform import tool_result_text, transform_messages
from picontext.ai.types import AssistantMessage

API = "google-generative-ai"
_BASE64_SIGNATURE = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
_THINKING_LEVEL_MODEL = re.compile(r"gemini-3(?:\.\d+)?-(?:pro|flash)|gemma-?4")
_GEMINI_MAJOR = re.compile(r"^gemini(?:-live)?-(\d+)")
_ids = itertools.count(1)


def _requires_call_id(model_id: str) -> bool:
    m = _GEMINI_MAJOR.match(model_id.lower())
    return model_id.startswith(("claude-", "gpt-oss-")) or (m is not None and int(m.group(1)) >= 3)


def _gemini_major(model_id: str) -> int | None:
    m = _GEMINI_MAJOR.match(model_id.lower())
    return int(m.group(1)) if m else None


def _multimodal_function_response(model_id: str) -> bool:
    major = _gemini_major(model_id)
    return major is None or major >= 3


def _signature(same: bool, sig: Any) -> str | None:
    """A thought signature worth replaying: same model, valid base64 (Pi resolveThoughtSignature)."""
    if same and isinstance(sig, str) and sig and len(sig) % 4 == 0 and _BASE64_SIGNATURE.match(sig):
        return sig
    return None


def uses_thinking_level(model: Model) -> bool:
    """Gemini 3 / Gemma 4 take a `thinkingLevel`; older models a token budget."""
    mid = model["id"].lower()
    return bool(_THINKING_LEVEL_MODEL.search(mid)) or mid in ("gemini-flash-latest", "gemini-flash-lite-latest")


def _google_level(model: Model, level: str) -> str:
    mapped = level_map(model).get(level)
    resolved = mapped.lower() if isinstance(mapped, str) else level
    if resolved not in ("minimal", "low", "medium", "high"):
        raise ValueError(
            f"Unsupported Google thinking level mapping for {model['provider']}/{model['id']}: {level} -> {mapped}"
        )
    return resolved


def thinking_budget(model: Model, level: str, custom: int | None = None) -> int:
    """Pi getGoogleBudget: per-family budgets for Gemini 2.5, else -1 (dynamic)."""
    if custom is not None:
        return custom
    mid = model["id"]
    if "2.5-pro" in mid:
        return {"minimal": 128, "low": 2048, "medium": 8192, "high": 32768}[level]
    if "2.5-flash-lite" in mid:
        return {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576}[level]
    if "2.5-flash" in mid:
        return {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576}[level]
    return -1


def thinking_config(model: Model, options: StreamOptions) -> dict[str, Any] | None:
    """`generationConfig.thinkingConfig`: on at the clamped level, or explicitly off."""
    if not model["reasoning"]:
        return None
    effort = clamped_effort(model, options.reasoning)
    if effort is None:
        if not uses_thinking_level(model) or clamp_thinking_level(model, "off") == "off":
            return {"thinkingBudget": 0}
        return {"thinkingLevel": _google_level(model, clamp_thinking_level(model, "off")).upper()}
    level = _google_level(model, effort)
    if uses_thinking_level(model):
        return {"includeThoughts": True, "thinkingLevel": level.upper()}
    return {"includeThoughts": True, "thinkingBudget": thinking_budget(model, level, options.thinking_budget_tokens)}


def _normalize_id(call_id: str, model: Model, _source: dict[str, Any]) -> str:
    if not _requires_call_id(model["id"]):
        return call_id
    return re.sub(r"[^a-zA-Z0-9_-]", "_", call_id)[:64]


def _inline(block: dict[str, Any]) -> dict[str, Any]:
    return {"inlineData": {"mimeType": block["mimeType"], "data": block["data"]}}


def convert_contents(model: Model, messages: list[Any]) -> list[dict[str, Any]]:
    """Pure: the `contents` array (no system messages)."""
    contents: list[dict[str, Any]] = []
    with_id = _requires_call_id(model["id"])
    for msg in transform_messages(messages, model, _normalize_id):
        role = msg["role"]
        if role == "user":
            if isinstance(msg["content"], str):
                contents.append({"role": "user", "parts": [{"text": msg["content"]}]})
                continue
            parts = [{"text": it.get("text", "")} if it.get("type") == "text" else _inline(it) for it in msg["content"]]
            if parts:
                contents.append({"role": "user", "parts": parts})
        elif role == "assistant":
            same = msg.get("provider") == model["provider"] and msg.get("model") == model["id"]
            parts = []
            for b in msg["content"]:
                kind = b.get("type")
                if kind == "text":
                    sig = _signature(same, b.get("textSignature"))
                    if not b["text"].strip() and not sig:
                        continue
                    parts.append({"text": b["text"], **({"thoughtSignature": sig} if sig else {})})
                elif kind == "thinking":
                    if same:
                        sig = _signature(same, b.get("thinkingSignature"))
                        if not b["thinking"].strip() and not sig:
                            continue
                        parts.append(
                            {"thought": True, "text": b["thinking"], **({"thoughtSignature": sig} if sig else {})}
                        )
                    elif b["thinking"].strip():
                        parts.append({"text": b["thinking"]})
                elif kind == "toolCall":
                    call: dict[str, Any] = {"name": b["name"], "args": b.get("arguments") or {}}
                    if with_id:
                        call["id"] = b["id"]
                    part: dict[str, Any] = {"functionCall": call}
                    sig = _signature(same, b.get("thoughtSignature"))
                    if sig:
                        part["thoughtSignature"] = sig
                    parts.append(part)
            if parts:
                contents.append({"role": "model", "parts": parts})
        elif role == "toolResult":
            text, _ = tool_result_text(msg["content"])
            images = [b for b in msg["content"] if b.get("type") == "image"] if "image" in model["input"] else []
            multimodal = _multimodal_function_response(model["id"])
            value = text or ("(see attached image)" if images else "")
            response: dict[str, Any] = {
                "name": msg["toolName"],
                "response": {"error": value} if msg.get("isError") else {"output": value},
            }
            if images and multimodal:
                response["parts"] = [_inline(b) for b in images]
            if with_id:
                response["id"] = msg["toolCallId"]
            fr = {"functionResponse": response}
            last = contents[-1] if contents else None
            if last and last["role"] == "user" and any("functionResponse" in p for p in last["parts"]):
                last["parts"].append(fr)
            else:
                contents.append({"role": "user", "parts": [fr]})
            if images and not multimodal:
                contents.append(
                    {"role": "user", "parts": [{"text": "Tool result image:"}, *(_inline(b) for b in images)]}
                )
    return contents


_TOOL_CHOICE_MODES = {"auto": "AUTO", "none": "NONE", "any": "ANY"}


def build_body(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """Pure: the JSON body of a streamGenerateContent request (Pi streamSimple + buildParams, as
    the @google/genai SDK serialises it)."""
    system, rest = split_system(context)
    body: dict[str, Any] = {"contents": convert_contents(model, rest)}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}], "role": "user"}
    gen: dict[str, Any] = {}
    if options.temperature is not None:
        gen["temperature"] = options.temperature
    if options.seed is not None:
        gen["seed"] = options.seed
    gen["maxOutputTokens"] = base_max_tokens(model, context, options.max_tokens)
    thinking = thinking_config(model, options)
    if thinking is not None:
        gen["thinkingConfig"] = thinking
    body["generationConfig"] = gen
    tools = context_tools(context)
    if tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {"name": t["name"], "description": t["description"], "parametersJsonSchema": t["parameters"]}
                    for t in tools
                ]
            }
        ]
        if options.tool_choice:
            mode = _TOOL_CHOICE_MODES.get(options.tool_choice, "AUTO")
            body["toolConfig"] = {"functionCallingConfig": {"mode": mode}}
    return body


def build_request(model: Model, context: Context, options: StreamOptions, api_key: str) -> ProviderRequest:
    """Pure: URL, headers and body. The key goes into `x-goog-api-key`, never the URL."""
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if api_key:
        headers["x-goog-api-key"] = api_key
    headers.update(model.get("headers") or {})
    headers.update(options.headers)
    url = join_url(model["baseUrl"], f"models/{model['id']}:streamGenerateContent?alt=sse")
    return ProviderRequest("POST", url, headers, build_body(model, context, options))


def map_stop_reason(reason: str) -> str:
    """Pi mapStopReasonString."""
    if reason == "STOP":
        return "stop"
    if reason == "MAX_TOKENS":
        return "length"
    return "error"


class GeminiParser:
    """Folds `GenerateContentResponse` chunks into `output`."""

    def __init__(self, model: Model, output: AssistantMessage) -> None:
        self.model = model
        self.out = output
        self.current: dict[str, Any] | None = None

    def _close_current(self) -> list[AssistantMessageEvent]:
        block, self.current = self.current, None
        if block is None:
            return []
        pos = len(self.out["content"]) - 1
        if block["type"] == "text":
            return [{"type": "text_end", "contentIndex": pos, "content": block["text"], "partial": self.out}]
        return [{"type": "thinking_end", "contentIndex": pos, "content": block["thinking"], "partial": self.out}]

    def feed(self, sse: SseEvent) -> list[AssistantMessageEvent]:
        if not sse.data.strip():
            return []
        chunk = json.loads(sse.data)
        if isinstance(chunk, dict) and isinstance(chunk.get("error"), dict):
            raise StreamProtocolError(json.dumps(chunk["error"]))
        evs: list[AssistantMessageEvent] = []
        p = self.out
        if chunk.get("responseId") and "responseId" not in p:
            p["responseId"] = chunk["responseId"]
        cand = (chunk.get("candidates") or [None])[0] or {}
        for part in (cand.get("content") or {}).get("parts") or []:
            if "text" in part:
                thinking = part.get("thought") is True
                kind = "thinking" if thinking else "text"
                if self.current is None or self.current["type"] != kind:
                    evs.extend(self._close_current())
                    self.current = {"type": "thinking", "thinking": ""} if thinking else {"type": "text", "text": ""}
                    p["content"].append(self.current)  # type: ignore[arg-type]
                    evs.append(cast(AssistantMessageEvent,
                                    {"type": f"{kind}_start", "contentIndex": len(p["content"]) - 1, "partial": p}))
                sig_key = "thinkingSignature" if thinking else "textSignature"
                if part.get("thoughtSignature"):
                    self.current[sig_key] = part["thoughtSignature"]
                self.current[kind] += part["text"]
                evs.append(cast(AssistantMessageEvent, {
                    "type": f"{kind}_delta",
                    "contentIndex": len(p["content"]) - 1,
                    "delta": part["text"],
                    "partial": p,
                }))
            if "functionCall" in part:
                evs.extend(self._close_current())
                fc = part["functionCall"] or {}
                given = fc.get("id")
                dup = any(b["type"] == "toolCall" and b["id"] == given for b in p["content"])
                call_id = given if given and not dup else f"{fc.get('name', 'call')}_{next(_ids)}"
                call: dict[str, Any] = {
                    "type": "toolCall",
                    "id": call_id,
                    "name": fc.get("name") or "",
                    "arguments": fc.get("args") or {},
                }
                if part.get("thoughtSignature"):
                    call["thoughtSignature"] = part["thoughtSignature"]
                p["content"].append(call)  # type: ignore[arg-type]
                pos = len(p["content"]) - 1
                evs.append({"type": "toolcall_start", "contentIndex": pos, "partial": p})
                evs.append(
                    {
                        "type": "toolcall_delta",
                        "contentIndex": pos,
                        "delta": json.dumps(call["arguments"]),
                        "partial": p,
                    }
                )
                evs.append({"type": "toolcall_end", "contentIndex": pos, "toolCall": call, "partial": p})  # type: ignore[typeddict-item]
        if cand.get("finishReason"):
            p["rawStopReason"] = cand["finishReason"]
            stop = map_stop_reason(cand["finishReason"])
            if stop == "stop" and any(b["type"] == "toolCall" for b in p["content"]):
                stop = "toolUse"
            p["stopReason"] = stop  # type: ignore[typeddict-item]
        um = chunk.get("usageMetadata")
        if um:
            cached = um.get("cachedContentTokenCount") or 0
            thoughts = um.get("thoughtsTokenCount") or 0
            p["usage"] = {
                "input": (um.get("promptTokenCount") or 0) - cached,
                "output": (um.get("candidatesTokenCount") or 0) + thoughts,
                "cacheRead": cached,
                "cacheWrite": 0,
                "totalTokens": um.get("totalTokenCount") or 0,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
                "reasoning": thoughts,
            }
            calculate_cost(self.model, p["usage"])
        return evs

    def finish(self) -> list[AssistantMessageEvent]:
        # Close the open block first, then fail through the message (not by raising), so the
        # block-end events reach the consumer before the error event, as in Pi.
        evs = self._close_current()
        reason = self.out["stopReason"]
        if reason == "pending":
            self.out["stopReason"] = "error"
            self.out["errorMessage"] = "Google stream ended without a finish reason"
            return evs
        if reason == "error":
            self.out["errorMessage"] = f"Provider stopped with: {self.out.get('rawStopReason')}"
        return evs


def stream_google_gemini(model: Model, context: Context, options: StreamOptions) -> AssistantMessageStream:
    """Start a streamed generateContent call; returns an `AssistantMessageStream`."""
    return start_http_stream(model, context, options, build_request=build_request, parser_factory=GeminiParser)

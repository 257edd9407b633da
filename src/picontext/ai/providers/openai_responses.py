"""OpenAI Responses API (`POST {baseUrl}/responses`, `store: false`, stateless replay).

Wire facts ported from Pi api/openai-responses*.ts: input items (`message`, `function_call`,
`function_call_output`, replayed `reasoning` items from `thinkingSignature`); tool-call ids are
`"<call_id>|<item id>"`; output slots keyed by `output_index`; usage from `response.completed`
(`input_tokens` includes cached tokens); status completed → stop (toolUse when a tool was called),
incomplete/max_output_tokens → length, other incomplete → error "Response incomplete: <reason>",
failed/cancelled → error; `response.failed` and `error` events become the error text.
"""

from __future__ import annotations

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
    block_index,
    context_tools,
    parse_streaming_json,
    split_system,
    start_http_stream,
)
from picontext.ai.providers.simple_options import base_max_tokens, clamped_effort, js_json, level_map, short_hash
from picontext.ai.providers.transform import tool_result_text, transform_messages
from picontext.ai.types import AssistantMessage

API = "openai-responses"
MIN_OUTPUT_TOKENS = 16  # the API rejects smaller max_output_tokens (Pi issue #6265)
_TOOL_CALL_PROVIDERS = frozenset({"openai", "openai-codex", "opencode"})
_ID_PART = re.compile(r"[^a-zA-Z0-9_-]")


def _compat(model: Model) -> dict[str, Any]:
    """Pi getCompat for Responses: defaults, overridden by `model["compat"]`."""
    openrouter = model["provider"] == "openrouter" or "openrouter.ai" in model["baseUrl"]
    compat: dict[str, Any] = {
        "supportsDeveloperRole": True,
        "sessionAffinityFormat": "openrouter" if openrouter else "openai",
        "supportsLongCacheRetention": True,
        "supportsStrictMode": False,
        "supportsExplicitPromptCacheMode": False,
        "supportsMaxOutputTokens": True,
    }
    for key, value in (model.get("compat") or {}).items():
        if value is not None:
            compat[key] = value
    return compat


def _id_part(part: str) -> str:
    return _ID_PART.sub("_", part)[:64].rstrip("_")


def _make_normalize_id(model: Model) -> Any:
    def normalize(call_id: str, _target: Model, source: dict[str, Any]) -> str:
        if model["provider"] not in _TOOL_CALL_PROVIDERS or "|" not in call_id:
            return _id_part(call_id)
        call, item = call_id.split("|")[:2]
        foreign = source.get("provider") != model["provider"] or source.get("api") != model["api"]
        item = f"fc_{short_hash(item)}"[:64] if foreign else _id_part(item)
        if not item.startswith("fc_"):
            item = _id_part(f"fc_{item}")
        return f"{_id_part(call)}|{item}"

    return normalize


def _text_signature(sig: str | None) -> tuple[str | None, str | None]:
    """(message id, phase) from a text block's `textSignature` (Pi parseTextSignature)."""
    if not sig:
        return None, None
    if sig.startswith("{"):
        try:
            parsed = json.loads(sig)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and parsed.get("v") == 1 and isinstance(parsed.get("id"), str):
            phase = parsed.get("phase")
            return parsed["id"], phase if phase in ("commentary", "final_answer") else None
    return sig, None


def _tool_output(model: Model, content: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    text, _ = tool_result_text(content)
    images = [b for b in content if b.get("type") == "image"]
    if not images or "image" not in model["input"]:
        return text or ("(see attached image)" if images else "(no tool output)")
    out: list[dict[str, Any]] = [{"type": "input_text", "text": text}] if text else []
    for b in images:
        out.append({"type": "input_image", "detail": "auto", "image_url": f"data:{b['mimeType']};base64,{b['data']}"})
    return out


def convert_input(model: Model, context: Context) -> list[dict[str, Any]]:
    """Pure: the `input` item list (system prompt first, as a system/developer message)."""
    compat = model.get("compat") or {}
    system, rest = split_system(context)
    items: list[dict[str, Any]] = []
    if system:
        role = "developer" if model["reasoning"] and compat.get("supportsDeveloperRole") is not False else "system"
        items.append({"role": role, "content": system})
    msg_index = 0
    for msg in transform_messages(rest, model, _make_normalize_id(model)):
        role = msg["role"]
        if role == "user":
            if isinstance(msg["content"], str):
                items.append({"role": "user", "content": [{"type": "input_text", "text": msg["content"]}]})
            elif msg["content"]:
                parts = [
                    {"type": "input_text", "text": it.get("text", "")}
                    if it.get("type") == "text"
                    else {
                        "type": "input_image",
                        "detail": "auto",
                        "image_url": f"data:{it['mimeType']};base64,{it['data']}",
                    }
                    for it in msg["content"]
                ]
                items.append({"role": "user", "content": parts})
            else:
                continue  # Pi skips it without counting it
        elif role == "assistant":
            same_api = msg.get("provider") == model["provider"] and msg.get("api") == model["api"]
            same_model = same_api and msg.get("model") == model["id"]
            different_model = same_api and msg.get("model") != model["id"]
            n_text = 0
            for b in msg["content"]:
                kind = b.get("type")
                if kind == "thinking" and b.get("thinkingSignature"):
                    try:
                        items.append(json.loads(b["thinkingSignature"]))
                    except ValueError:
                        pass
                elif kind == "text":
                    mid, phase = _text_signature(b.get("textSignature"))
                    if not mid:
                        mid = f"msg_pi_{msg_index}" if n_text == 0 else f"msg_pi_{msg_index}_{n_text}"
                    elif len(mid) > 64:
                        mid = f"msg_{short_hash(mid)}"
                    n_text += 1
                    item: dict[str, Any] = {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": b["text"], "annotations": []}],
                        "status": "completed",
                        "id": mid,
                    }
                    if phase:
                        item["phase"] = phase
                    items.append(item)
                elif kind == "toolCall":
                    call_id, _, item_id = b["id"].partition("|")
                    entry: dict[str, Any] = {"type": "function_call"}
                    if item_id.startswith("fc_") and not different_model:
                        entry["id"] = item_id.split("|")[0]
                    entry.update({"call_id": call_id, "name": b["name"], "arguments": js_json(b["arguments"])})
                    if same_model and b.get("namespace") is not None:
                        entry["namespace"] = b["namespace"]
                    items.append(entry)
        elif role == "toolResult":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": msg["toolCallId"].split("|")[0],
                    "output": _tool_output(model, msg["content"]),
                }
            )
        msg_index += 1
    return items


def build_body(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """Pure: the JSON body of a streaming Responses request (Pi streamSimple + buildParams)."""
    compat = _compat(model)
    retention = options.cache_retention
    explicit = compat["supportsExplicitPromptCacheMode"]
    body: dict[str, Any] = {"model": model["id"], "input": convert_input(model, context), "stream": True}
    if options.cache_session_id:
        body["prompt_cache_key"] = options.cache_session_id[:64]
    if retention == "long" and compat["supportsLongCacheRetention"] and not explicit:
        body["prompt_cache_retention"] = "24h"
    if explicit and retention == "none":
        body["prompt_cache_options"] = {"mode": "explicit"}
    elif explicit and retention == "long" and compat["supportsLongCacheRetention"]:
        body["prompt_cache_options"] = {"ttl": "30m"}
    body["store"] = False
    max_tokens = base_max_tokens(model, context, options.max_tokens)
    if max_tokens and compat["supportsMaxOutputTokens"]:
        body["max_output_tokens"] = max(max_tokens, MIN_OUTPUT_TOKENS)
    if options.temperature is not None:
        body["temperature"] = options.temperature
    tools = context_tools(context)
    if tools:
        body["tools"] = []
        for t in tools:
            tool: dict[str, Any] = {
                "type": "function",
                "name": t["name"],
                "description": t["description"],
                "parameters": t["parameters"],
            }
            if compat["supportsStrictMode"]:
                tool["strict"] = False
            body["tools"].append(tool)
    if options.tool_choice is not None:
        body["tool_choice"] = options.tool_choice
    if model["reasoning"]:
        effort = clamped_effort(model, options.reasoning)
        mapping = level_map(model)
        if effort:
            body["reasoning"] = {"effort": mapping.get(effort) or effort, "summary": "auto"}
            body["include"] = ["reasoning.encrypted_content"]
        elif model["provider"] != "github-copilot" and not ("off" in mapping and mapping["off"] is None):
            body["reasoning"] = {"effort": mapping.get("off") or "none"}
        if model["provider"] == "xai":
            body["include"] = ["reasoning.encrypted_content"]
    return body


def build_request(model: Model, context: Context, options: StreamOptions, api_key: str) -> ProviderRequest:
    """Pure: URL, headers and body. The key only goes into the Authorization header."""
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    if options.cache_session_id:
        if _compat(model)["sessionAffinityFormat"] == "openrouter":
            headers["x-session-id"] = options.cache_session_id
        else:
            headers["session_id"] = options.cache_session_id
            headers["x-client-request-id"] = options.cache_session_id
    headers.update(model.get("headers") or {})
    headers.update(options.headers)
    return ProviderRequest(
        "POST", join_url(model["baseUrl"], "responses"), headers, build_body(model, context, options)
    )


def map_stop_reason(status: str | None, incomplete_reason: str | None = None) -> tuple[str, str | None]:
    """(stopReason, errorMessage) for a response `status` (Pi mapStopReason)."""
    if not status or status in ("completed", "in_progress", "queued"):
        return "stop", None
    if status == "incomplete":
        if incomplete_reason == "max_output_tokens":
            return "length", None
        if incomplete_reason:
            return "error", f"Response incomplete: {incomplete_reason}"
        return "error", "Response incomplete without a provider reason"
    if status in ("failed", "cancelled"):
        return "error", None
    raise StreamProtocolError(f"Unhandled stop reason: {status}")


class ResponsesParser:
    """Folds Responses SSE events into `output`; slots are keyed by `output_index`."""

    def __init__(self, model: Model, output: AssistantMessage) -> None:
        self.model = model
        self.out = output
        self.slots: dict[int, dict[str, Any]] = {}
        self.partial_json: dict[int, str] = {}
        self.terminal = False

    def _delta(self, kind: str, block: dict[str, Any], delta: str, partial: Any) -> AssistantMessageEvent:
        return cast(AssistantMessageEvent, {"type": kind, "contentIndex": block_index(self.out, block),
                                            "delta": delta, "partial": partial})

    def _create(self, index: int, item: dict[str, Any]) -> list[AssistantMessageEvent]:
        kind = item.get("type")
        if kind == "reasoning":
            block: dict[str, Any] = {"type": "thinking", "thinking": ""}
            ev = "thinking_start"
        elif kind == "message":
            block = {"type": "text", "text": ""}
            ev = "text_start"
        elif kind == "function_call":
            block = {
                "type": "toolCall",
                "id": f"{item.get('call_id')}|{item.get('id')}",
                "name": item.get("name", ""),
                "arguments": {},
            }
            self.partial_json[index] = item.get("arguments") or ""
            ev = "toolcall_start"
        else:
            return []
        self.slots[index] = block
        self.out["content"].append(block)  # type: ignore[arg-type]
        return [cast(AssistantMessageEvent, {"type": ev, "contentIndex": len(self.out["content"]) - 1,
                                             "partial": self.out})]

    def _slot(self, index: int, kind: str) -> dict[str, Any] | None:
        block = self.slots.get(index)
        return block if block is not None and block["type"] == kind else None

    def feed(self, sse: SseEvent) -> list[AssistantMessageEvent]:
        if not sse.data.strip() or sse.data.strip() == "[DONE]":
            return []
        ev = json.loads(sse.data)
        kind = ev.get("type") or sse.event
        idx = ev.get("output_index", -1)
        p = self.out
        if kind == "response.created":
            rid = (ev.get("response") or {}).get("id")
            if rid:
                p["responseId"] = rid
        elif kind == "response.output_item.added":
            return self._create(idx, ev.get("item") or {})
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            block = self._slot(idx, "thinking")
            if block is not None:
                block["thinking"] += ev["delta"]
                return [
                    self._delta("thinking_delta", block, ev["delta"], p)
                ]
        elif kind == "response.reasoning_summary_part.done":
            block = self._slot(idx, "thinking")
            if block is not None:
                block["thinking"] += "\n\n"
                return [self._delta("thinking_delta", block, "\n\n", p)]
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            block = self._slot(idx, "text")
            if block is not None:
                block["text"] += ev["delta"]
                return [self._delta("text_delta", block, ev["delta"], p)]
        elif kind == "response.function_call_arguments.delta":
            block = self._slot(idx, "toolCall")
            if block is not None:
                self.partial_json[idx] = self.partial_json.get(idx, "") + ev["delta"]
                block["arguments"] = parse_streaming_json(self.partial_json[idx])
                return [
                    self._delta("toolcall_delta", block, ev["delta"], p)
                ]
        elif kind == "response.function_call_arguments.done":
            block = self._slot(idx, "toolCall")
            if block is not None:
                prev = self.partial_json.get(idx, "")
                self.partial_json[idx] = ev.get("arguments", prev)
                block["arguments"] = parse_streaming_json(self.partial_json[idx])
                rest = self.partial_json[idx][len(prev) :] if self.partial_json[idx].startswith(prev) else ""
                if rest:
                    return [self._delta("toolcall_delta", block, rest, p)]
        elif kind == "response.output_item.done":
            return self._item_done(idx, ev.get("item") or {})
        elif kind in ("response.completed", "response.incomplete"):
            self._finalize(ev.get("response") or {})
        elif kind == "error":
            raise StreamProtocolError(f"Error Code {ev.get('code')}: {ev.get('message')}")
        elif kind == "response.failed":
            self.terminal = True
            resp = ev.get("response") or {}
            p["rawStopReason"] = resp.get("status") or "failed"
            err = resp.get("error")
            details = resp.get("incomplete_details") or {}
            if err:
                raise StreamProtocolError(f"{err.get('code') or 'unknown'}: {err.get('message') or 'no message'}")
            if details.get("reason"):
                raise StreamProtocolError(f"incomplete: {details['reason']}")
            raise StreamProtocolError("Unknown error (no error details in response)")
        return []

    def _item_done(self, idx: int, item: dict[str, Any]) -> list[AssistantMessageEvent]:
        evs: list[AssistantMessageEvent] = []
        if idx not in self.slots:
            evs.extend(self._create(idx, item))
        block = self.slots.get(idx)
        if block is None:
            return evs
        kind = item.get("type")
        pos = block_index(self.out, block)
        if kind == "reasoning" and block["type"] == "thinking":
            summary = "\n\n".join(s.get("text", "") for s in item.get("summary") or [])
            content = "\n\n".join(c.get("text", "") for c in item.get("content") or [])
            block["thinking"] = summary or content or block["thinking"]
            block["thinkingSignature"] = json.dumps(item, separators=(",", ":"))
            evs.append({"type": "thinking_end", "contentIndex": pos, "content": block["thinking"], "partial": self.out})
        elif kind == "message" and block["type"] == "text":
            parts = item.get("content") or []
            text = "".join((c.get("text") if c.get("type") == "output_text" else c.get("refusal")) or "" for c in parts)
            block["text"] = text or block["text"]
            sig: dict[str, Any] = {"v": 1, "id": item.get("id")}
            if item.get("phase"):
                sig["phase"] = item["phase"]
            block["textSignature"] = json.dumps(sig, separators=(",", ":"))
            evs.append({"type": "text_end", "contentIndex": pos, "content": block["text"], "partial": self.out})
        elif kind == "function_call" and block["type"] == "toolCall":
            block["arguments"] = parse_streaming_json(item.get("arguments") or self.partial_json.get(idx) or "{}")
            self.partial_json.pop(idx, None)
            evs.append({"type": "toolcall_end", "contentIndex": pos, "toolCall": block, "partial": self.out})  # type: ignore[typeddict-item]
        self.slots.pop(idx, None)
        return evs

    def _finalize(self, resp: dict[str, Any]) -> None:
        self.terminal = True
        p = self.out
        if resp.get("id"):
            p["responseId"] = resp["id"]
        u = resp.get("usage")
        if u:
            details = u.get("input_tokens_details") or {}
            cached = details.get("cached_tokens") or 0
            write = details.get("cache_write_tokens") or 0
            p["usage"] = {
                "input": max(0, (u.get("input_tokens") or 0) - cached - write),
                "output": u.get("output_tokens") or 0,
                "cacheRead": cached,
                "cacheWrite": write,
                "totalTokens": u.get("total_tokens") or 0,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
                "reasoning": (u.get("output_tokens_details") or {}).get("reasoning_tokens") or 0,
            }
        calculate_cost(self.model, p["usage"])
        status = resp.get("status")
        reason = (resp.get("incomplete_details") or {}).get("reason")
        p["rawStopReason"] = f"{status}.{reason}" if reason else (status or "")
        stop, err = map_stop_reason(status, reason)
        p["stopReason"] = stop  # type: ignore[typeddict-item]
        if err:
            p["errorMessage"] = err
        else:
            p.pop("errorMessage", None)
        if stop == "stop" and any(b["type"] == "toolCall" for b in p["content"]):
            p["stopReason"] = "toolUse"

    def finish(self) -> list[AssistantMessageEvent]:
        if not self.terminal:
            raise StreamProtocolError("OpenAI Responses stream ended before a terminal response event")
        return []


def stream_openai_responses(model: Model, context: Context, options: StreamOptions) -> AssistantMessageStream:
    """Start a streamed Responses call; returns an `AssistantMessageStream`."""
    return start_http_stream(model, context, options, build_request=build_request, parser_factory=ResponsesParser)

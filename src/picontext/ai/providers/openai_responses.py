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
from picontext.ai.types import AssistantMessage

API = "openai-responses"
MIN_OUTPUT_TOKENS = 16  # the API rejects smaller max_output_tokens (Pi issue #6265)
_ID_PART = re.compile(r"[^a-zA-Z0-9_-]")


def _id_part(part: str) -> str:
    return _ID_PART.sub("_", part)[:64].rstrip("_")


def _normalize_id(call_id: str, model: Model, source: dict[str, Any]) -> str:
    if "|" not in call_id:
        return _id_part(call_id)
    call, _, item = call_id.partition("|")
    item = _id_part(item)
    if not item.startswith("fc_"):
        item = _id_part(f"fc_{item}")
    return f"{_id_part(call)}|{item}"


def convert_input(model: Model, context: Context) -> list[dict[str, Any]]:
    """Pure: the `input` item list (system prompt first, as a system/developer message)."""
    system, rest = split_system(context)
    items: list[dict[str, Any]] = []
    if system:
        items.append({"role": "developer" if model["reasoning"] else "system", "content": system})
    msg_index = 0
    for msg in transform_messages(rest, model, _normalize_id):
        role = msg["role"]
        if role == "user":
            if isinstance(msg["content"], str):
                items.append({"role": "user", "content": [{"type": "input_text", "text": msg["content"]}]})
            else:
                parts = []
                for it in msg["content"]:
                    if it.get("type") == "text":
                        parts.append({"type": "input_text", "text": it["text"]})
                    elif it.get("type") == "image":
                        parts.append(
                            {
                                "type": "input_image",
                                "detail": "auto",
                                "image_url": f"data:{it['mimeType']};base64,{it['data']}",
                            }
                        )
                if parts:
                    items.append({"role": "user", "content": parts})
        elif role == "assistant":
            n_text = 0
            for b in msg["content"]:
                kind = b.get("type")
                if kind == "thinking" and b.get("thinkingSignature"):
                    try:
                        items.append(json.loads(b["thinkingSignature"]))
                    except ValueError:
                        pass
                elif kind == "text":
                    sig = b.get("textSignature") or ""
                    mid = None
                    if sig.startswith("{"):
                        try:
                            mid = json.loads(sig).get("id")
                        except ValueError:
                            mid = None
                    elif sig:
                        mid = sig
                    if not mid:
                        mid = f"msg_pi_{msg_index}" if n_text == 0 else f"msg_pi_{msg_index}_{n_text}"
                    n_text += 1
                    items.append(
                        {
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": b["text"], "annotations": []}],
                            "status": "completed",
                            "id": mid[:64],
                        }
                    )
                elif kind == "toolCall":
                    call_id, _, item_id = b["id"].partition("|")
                    entry: dict[str, Any] = {
                        "type": "function_call",
                        "call_id": call_id,
                        "name": b["name"],
                        "arguments": json.dumps(b.get("arguments") or {}),
                    }
                    if item_id.startswith("fc_"):
                        entry["id"] = item_id
                    items.append(entry)
        elif role == "toolResult":
            text, has_images = tool_result_text(msg["content"])
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": msg["toolCallId"].partition("|")[0],
                    "output": text or ("(see attached image)" if has_images else "(no tool output)"),
                }
            )
        msg_index += 1
    return items


def build_body(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """Pure: the JSON body of a streaming Responses request."""
    body: dict[str, Any] = {"model": model["id"], "input": convert_input(model, context), "stream": True}
    if options.cache_session_id:
        body["prompt_cache_key"] = options.cache_session_id[:64]
    if options.cache_retention == "long":
        body["prompt_cache_retention"] = "24h"
    body["store"] = False
    if options.max_tokens:
        body["max_output_tokens"] = max(options.max_tokens, MIN_OUTPUT_TOKENS)
    if options.temperature is not None:
        body["temperature"] = options.temperature
    tools = context_tools(context)
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t["name"],
                "description": t["description"],
                "parameters": t["parameters"],
                "strict": False,
            }
            for t in tools
        ]
    if options.tool_choice is not None:
        body["tool_choice"] = options.tool_choice
    if model["reasoning"] and options.thinking:
        body["reasoning"] = {"effort": "high" if options.thinking == "xhigh" else options.thinking, "summary": "auto"}
        body["include"] = ["reasoning.encrypted_content"]
    return body


def build_request(model: Model, context: Context, options: StreamOptions, api_key: str) -> ProviderRequest:
    """Pure: URL, headers and body. The key only goes into the Authorization header."""
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    if options.cache_session_id:
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

    def _pos(self, block: dict[str, Any]) -> int:
        return next(i for i, b in enumerate(self.out["content"]) if b is block)

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
        return [{"type": ev, "contentIndex": len(self.out["content"]) - 1, "partial": self.out}]  # type: ignore[list-item]

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
                    {"type": "thinking_delta", "contentIndex": self._pos(block), "delta": ev["delta"], "partial": p}
                ]
        elif kind == "response.reasoning_summary_part.done":
            block = self._slot(idx, "thinking")
            if block is not None:
                block["thinking"] += "\n\n"
                return [{"type": "thinking_delta", "contentIndex": self._pos(block), "delta": "\n\n", "partial": p}]
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            block = self._slot(idx, "text")
            if block is not None:
                block["text"] += ev["delta"]
                return [{"type": "text_delta", "contentIndex": self._pos(block), "delta": ev["delta"], "partial": p}]
        elif kind == "response.function_call_arguments.delta":
            block = self._slot(idx, "toolCall")
            if block is not None:
                self.partial_json[idx] = self.partial_json.get(idx, "") + ev["delta"]
                block["arguments"] = parse_streaming_json(self.partial_json[idx])
                return [
                    {"type": "toolcall_delta", "contentIndex": self._pos(block), "delta": ev["delta"], "partial": p}
                ]
        elif kind == "response.function_call_arguments.done":
            block = self._slot(idx, "toolCall")
            if block is not None:
                prev = self.partial_json.get(idx, "")
                self.partial_json[idx] = ev.get("arguments", prev)
                block["arguments"] = parse_streaming_json(self.partial_json[idx])
                rest = self.partial_json[idx][len(prev) :] if self.partial_json[idx].startswith(prev) else ""
                if rest:
                    return [{"type": "toolcall_delta", "contentIndex": self._pos(block), "delta": rest, "partial": p}]
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
        pos = self._pos(block)
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

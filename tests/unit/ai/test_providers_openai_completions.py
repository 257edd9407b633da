"""Pure request building and SSE parsing for OpenAI Chat Completions."""

from __future__ import annotations

import json

from picontext.ai._http import SseEvent
from picontext.ai.models import default_catalog
from picontext.ai.providers import StreamOptions, parse_events
from picontext.ai.providers.openai_completions import ChatCompletionsParser, build_request, map_stop_reason

CTX = {
    "messages": [
        {"role": "system", "content": "sys", "timestamp": 0},
        {"role": "user", "content": "hi", "timestamp": 0},
    ],
    "tools": [{"name": "ls", "description": "list", "parameters": {"type": "object", "properties": {}}}],
}


def _sse(obj: object) -> SseEvent:
    return SseEvent(None, obj if isinstance(obj, str) else json.dumps(obj))


def test_build_request_openai() -> None:
    model = default_catalog().get("openai/gpt-4o")
    req = build_request(model, CTX, StreamOptions(max_tokens=500, session_id="s1", temperature=0.2), "sk-x")  # type: ignore[arg-type]
    assert req.url == "https://api.openai.com/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-x"
    b = req.body
    assert b["messages"][0] == {"role": "system", "content": "sys"}
    assert b["stream_options"] == {"include_usage": True} and b["store"] is False
    assert b["max_completion_tokens"] == 500 and b["prompt_cache_key"] == "s1" and b["temperature"] == 0.2
    assert b["tools"][0]["function"]["name"] == "ls"
    assert "sk-x" not in json.dumps(b)


def test_build_request_compatible_servers() -> None:
    ds = default_catalog().get("deepseek/deepseek-v4-pro")
    req = build_request(ds, CTX, StreamOptions(max_tokens=10, reasoning="high", session_id="s"), "k")  # type: ignore[arg-type]
    assert req.url == "https://api.deepseek.com/chat/completions"
    assert req.body["max_tokens"] == 10 and "store" not in req.body and "prompt_cache_key" not in req.body
    o3 = default_catalog().get("openai/o3")
    body = build_request(o3, CTX, StreamOptions(reasoning="xhigh"), "k").body  # type: ignore[arg-type]
    assert body["messages"][0]["role"] == "developer" and body["reasoning_effort"] == "high"


def test_tool_history_is_replayed() -> None:
    model = default_catalog().get("groq/llama-3.3-70b-versatile")
    ctx = {
        "messages": [
            {"role": "user", "content": "go", "timestamp": 0},
            {
                "role": "assistant", "api": "openai-completions", "provider": "groq",
                "model": "llama-3.3-70b-versatile", "stopReason": "toolUse", "usage": {}, "timestamp": 1,
                "content": [{"type": "toolCall", "id": "c1", "name": "ls", "arguments": {"d": "."}}],
            },
            {"role": "toolResult", "toolCallId": "c1", "toolName": "ls", "content": [], "isError": False,
             "timestamp": 2},
        ]
    }  # fmt: skip
    msgs = build_request(model, ctx, StreamOptions(), "k").body["messages"]  # type: ignore[arg-type]
    assert msgs[1]["tool_calls"][0]["function"] == {"name": "ls", "arguments": '{"d":"."}'}
    assert msgs[2] == {"role": "tool", "content": "(no tool output)", "tool_call_id": "c1"}


def test_parse_reasoning_text_tools_usage() -> None:
    model = default_catalog().get("openai/gpt-4o")
    evs = parse_events(
        ChatCompletionsParser,
        model,
        [
            _sse({"id": "r1", "choices": [{"delta": {"reasoning_content": "think"}}]}),
            _sse({"choices": [{"delta": {"content": "ans"}}]}),
            _sse({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "ls"}}]}}]}),
            _sse({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"x":1}'}}]}}]}),
            _sse({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
            _sse({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3}}),
            _sse("[DONE]"),
        ],
    )
    final = evs[-1]
    assert final["type"] == "done"
    msg = final["message"]
    assert [b["type"] for b in msg["content"]] == ["thinking", "text", "toolCall"]
    assert msg["content"][0]["thinkingSignature"] == "reasoning_content"
    assert msg["content"][2]["arguments"] == {"x": 1}
    assert msg["usage"]["input"] == 10 and msg["usage"]["cost"]["input"] == 10 * 2.5 / 1e6
    assert msg["stopReason"] == "toolUse" and msg["responseId"] == "r1"


def test_missing_finish_reason_is_error() -> None:
    model = default_catalog().get("openai/gpt-4o")
    evs = parse_events(ChatCompletionsParser, model, [_sse({"choices": [{"delta": {"content": "a"}}]})])
    assert evs[-1]["type"] == "error"
    assert evs[-1]["error"]["errorMessage"] == "Stream ended without finish_reason"


def test_map_stop_reason() -> None:
    assert map_stop_reason("stop") == ("stop", None)
    assert map_stop_reason("length") == ("length", None)
    assert map_stop_reason("function_call") == ("toolUse", None)
    assert map_stop_reason("network_error") == ("error", "Provider finish_reason: network_error")


def test_text_only_user_content_is_one_string_unless_compat_says_otherwise() -> None:
    model = dict(default_catalog().get("openai/gpt-4o"))
    parts = [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]
    ctx = {"messages": [{"role": "user", "content": parts, "timestamp": 0}]}
    body = build_request(model, ctx, StreamOptions(), "k").body  # type: ignore[arg-type]
    assert body["messages"] == [{"role": "user", "content": "first\nsecond"}]
    image = {"type": "image", "mimeType": "image/png", "data": "AAAA"}
    mixed = {"messages": [{"role": "user", "content": [parts[0], image], "timestamp": 0}]}
    body = build_request(model, mixed, StreamOptions(), "k").body  # type: ignore[arg-type]
    assert [p["type"] for p in body["messages"][0]["content"]] == ["text", "image_url"]
    model["compat"] = {"userTextAsString": False}  # Pi's body: the parts as they are
    body = build_request(model, ctx, StreamOptions(), "k").body  # type: ignore[arg-type]
    assert body["messages"][0]["content"] == parts


def test_local_servers_get_max_tokens() -> None:
    model = dict(default_catalog().get("openai/gpt-4o"))
    assert "max_completion_tokens" in build_request(model, CTX, StreamOptions(max_tokens=64), "k").body  # type: ignore[arg-type]
    for base in ("http://127.0.0.1:8080/v1", "http://localhost:11434/v1"):
        local = {**model, "provider": "llama", "baseUrl": base}
        body = build_request(local, CTX, StreamOptions(max_tokens=64), "k").body  # type: ignore[arg-type]
        assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    pinned = {**model, "baseUrl": "http://127.0.0.1:8080/v1", "compat": {"maxTokensField": "max_completion_tokens"}}
    assert build_request(pinned, CTX, StreamOptions(max_tokens=64), "k").body["max_completion_tokens"] == 64  # type: ignore[arg-type]

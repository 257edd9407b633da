"""Pure request building and SSE parsing for Anthropic Messages."""

from __future__ import annotations

import pytest

from picontext.ai._http import decode_sse
from picontext.ai.models import default_catalog
from picontext.ai.providers import StreamOptions, parse_events
from picontext.ai.providers.anthropic_messages import AnthropicParser, build_request, map_stop_reason
from picontext.scripted.model_server import frames_anthropic, reply, text, thinking, tokens, tool_call

MODEL = default_catalog().get("anthropic/claude-sonnet-4-5")
CTX = {
    "messages": [
        {"role": "system", "content": "sys", "timestamp": 0},
        {"role": "user", "content": "hi", "timestamp": 0},
    ],
    "tools": [{"name": "ls", "description": "d", "parameters": {"type": "object", "properties": {"a": {}}}}],
}


def _lines(frames: list[bytes]) -> list[str]:
    return b"".join(frames).decode().split("\n")


def test_build_request_cache_and_thinking() -> None:
    req = build_request(MODEL, CTX, StreamOptions(reasoning="high", cache_retention="long"), "sk-ant")  # type: ignore[arg-type]
    assert req.url == "https://api.anthropic.com/v1/messages"
    assert req.headers["x-api-key"] == "sk-ant" and req.headers["anthropic-version"] == "2023-06-01"
    assert "interleaved-thinking-2025-05-14" in req.headers["anthropic-beta"]
    b = req.body
    ttl = {"type": "ephemeral", "ttl": "1h"}
    assert b["system"] == [{"type": "text", "text": "sys", "cache_control": ttl}]
    assert b["tools"][-1]["cache_control"] == ttl
    assert b["messages"][-1]["content"][-1]["cache_control"] == ttl
    assert b["thinking"] == {"type": "enabled", "budget_tokens": 16384, "display": "summarized"}
    assert b["max_tokens"] == 64000


def test_no_cache_control_with_retention_none() -> None:
    b = build_request(MODEL, CTX, StreamOptions(cache_retention="none", temperature=0.5), "k").body  # type: ignore[arg-type]
    assert "cache_control" not in str(b) and b["temperature"] == 0.5


def test_tool_results_grouped_and_unsigned_thinking_becomes_text() -> None:
    same = {"api": "anthropic-messages", "provider": "anthropic", "model": MODEL["id"], "usage": {}, "timestamp": 0}
    ctx = {
        "messages": [
            {"role": "user", "content": "go", "timestamp": 0},
            {**same, "role": "assistant", "stopReason": "toolUse", "content": [
                {"type": "thinking", "thinking": "t", "thinkingSignature": ""},
                {"type": "toolCall", "id": "a", "name": "ls", "arguments": {}},
                {"type": "toolCall", "id": "b", "name": "ls", "arguments": {}},
            ]},
            {"role": "toolResult", "toolCallId": "a", "toolName": "ls", "content": [{"type": "text", "text": "1"}],
             "isError": False, "timestamp": 0},
            {"role": "toolResult", "toolCallId": "b", "toolName": "ls", "content": [{"type": "text", "text": "2"}],
             "isError": True, "timestamp": 0},
        ]
    }  # fmt: skip
    msgs = build_request(MODEL, ctx, StreamOptions(cache_retention="none"), "k").body["messages"]  # type: ignore[arg-type]
    assert msgs[1]["content"][0] == {"type": "text", "text": "t"}
    assert [r["tool_use_id"] for r in msgs[2]["content"]] == ["a", "b"] and msgs[2]["content"][1]["is_error"]


def test_parse_full_stream() -> None:
    r = reply(thinking("hm", "sig"), text("hello world"), tool_call("ls", {"a": [1]}, call_id="t1"),
              usage=tokens(100, 7, cache_read=50, cache_write=5))  # fmt: skip
    evs = parse_events(AnthropicParser, MODEL, decode_sse(_lines(frames_anthropic(r, MODEL["id"]))))
    msg = evs[-1]["message"]
    assert evs[-1]["type"] == "done" and msg["stopReason"] == "toolUse"
    assert msg["content"][0] == {"type": "thinking", "thinking": "hm", "thinkingSignature": "sig"}
    assert msg["content"][1]["text"] == "hello world"
    assert msg["content"][2] == {"type": "toolCall", "id": "t1", "name": "ls", "arguments": {"a": [1]}}
    assert msg["usage"]["totalTokens"] == 162 and msg["responseId"] == "msg_scripted"
    kinds = [e["type"] for e in evs]
    assert kinds[:3] == ["start", "thinking_start", "thinking_delta"] and "toolcall_end" in kinds


def test_stream_without_message_stop_is_error() -> None:
    frames = frames_anthropic(text("x"), MODEL["id"])[:-1]
    evs = parse_events(AnthropicParser, MODEL, decode_sse(_lines(frames)))
    assert evs[-1]["error"]["errorMessage"] == "Anthropic stream ended before message_stop"
    assert evs[-1]["error"]["content"] == [{"type": "text", "text": "x"}]


def test_error_event_text_is_kept() -> None:
    lines = ["event: error", 'data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', ""]
    evs = parse_events(AnthropicParser, MODEL, decode_sse(lines))
    assert "overloaded_error" in evs[-1]["error"]["errorMessage"]


@pytest.mark.parametrize(
    ("raw", "stop"),
    [("end_turn", "stop"), ("pause_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
     ("tool_use", "toolUse"), ("refusal", "error"), ("sensitive", "error")],
)  # fmt: skip
def test_map_stop_reason(raw: str, stop: str) -> None:
    assert map_stop_reason(raw)[0] == stop

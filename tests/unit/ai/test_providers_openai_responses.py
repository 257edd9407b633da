"""Pure request building and SSE parsing for the OpenAI Responses API."""

from __future__ import annotations

import json

from picontext.ai._http import decode_sse
from picontext.ai.models import default_catalog
from picontext.ai.providers import StreamOptions, parse_events
from picontext.ai.providers.openai_responses import ResponsesParser, build_request, map_stop_reason
from picontext.scripted.model_server import frames_openai_responses, reply, text, thinking, tool_call

MODEL = default_catalog().get("openai/gpt-5")


def _lines(frames: list[bytes]) -> list[str]:
    return b"".join(frames).decode().split("\n")


def test_build_request() -> None:
    ctx = {"messages": [{"role": "system", "content": "sys", "timestamp": 0},
                        {"role": "user", "content": "hi", "timestamp": 0}]}  # fmt: skip
    req = build_request(MODEL, ctx, StreamOptions(reasoning="low", max_tokens=8, session_id="s"), "sk")  # type: ignore[arg-type]
    assert req.url == "https://api.openai.com/v1/responses"
    b = req.body
    assert b["input"][0] == {"role": "developer", "content": "sys"}
    assert b["input"][1] == {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    assert b["store"] is False and b["max_output_tokens"] == 16 and b["prompt_cache_key"] == "s"
    assert b["reasoning"] == {"effort": "low", "summary": "auto"} and b["include"] == ["reasoning.encrypted_content"]
    assert req.headers["session_id"] == "s"


def test_parse_and_replay_round_trip() -> None:
    r = reply(thinking("why", "enc"), text("answer"), tool_call("ls", {"d": "x"}, call_id="call_1"))
    evs = parse_events(ResponsesParser, MODEL, decode_sse(_lines(frames_openai_responses(r, MODEL["id"]))))
    msg = evs[-1]["message"]
    assert msg["stopReason"] == "toolUse"
    assert msg["content"][0]["thinking"] == "why"
    assert json.loads(msg["content"][0]["thinkingSignature"])["encrypted_content"] == "enc"
    assert msg["content"][2]["id"] == "call_1|fc_2" and msg["content"][2]["arguments"] == {"d": "x"}
    ctx = {"messages": [{"role": "user", "content": "q", "timestamp": 0}, msg,
                        {"role": "toolResult", "toolCallId": "call_1|fc_2", "toolName": "ls",
                         "content": [{"type": "text", "text": "out"}], "isError": False, "timestamp": 0}]}  # fmt: skip
    items = build_request(MODEL, ctx, StreamOptions(), "k").body["input"]  # type: ignore[arg-type]
    assert [i.get("type") for i in items[1:]] == ["reasoning", "message", "function_call", "function_call_output"]
    assert items[3]["call_id"] == "call_1" and items[3]["id"] == "fc_2"
    assert items[4] == {"type": "function_call_output", "call_id": "call_1", "output": "out"}


def test_failed_response_and_missing_terminal_event() -> None:
    failed = (
        'data: {"type":"response.failed","response":{"status":"failed",'
        '"error":{"code":"server_error","message":"boom"}}}'
    )
    evs = parse_events(ResponsesParser, MODEL, decode_sse([failed, ""]))
    assert evs[-1]["error"]["errorMessage"] == "server_error: boom"
    evs = parse_events(ResponsesParser, MODEL, [])
    assert "terminal response event" in evs[-1]["error"]["errorMessage"]


def test_map_stop_reason() -> None:
    assert map_stop_reason("completed") == ("stop", None)
    assert map_stop_reason("incomplete", "max_output_tokens") == ("length", None)
    assert map_stop_reason("incomplete", "content_filter") == ("error", "Response incomplete: content_filter")
    assert map_stop_reason("failed")[0] == "error"

"""Pure request building and SSE parsing for Google Gemini."""

from __future__ import annotations

from picontext.ai._http import decode_sse
from picontext.ai.models import default_catalog
from picontext.ai.providers import StreamOptions, parse_events
from picontext.ai.providers.google_gemini import GeminiParser, build_request
from picontext.scripted.model_server import frames_gemini, reply, text, thinking, tokens, tool_call

MODEL = default_catalog().get("google/gemini-2.5-flash")


def _lines(frames: list[bytes]) -> list[str]:
    return b"".join(frames).decode().split("\n")


def test_build_request() -> None:
    ctx = {
        "messages": [
            {"role": "system", "content": "sys", "timestamp": 0},
            {"role": "user", "content": "hi", "timestamp": 0},
        ],
        "tools": [{"name": "ls", "description": "d", "parameters": {"$schema": "x", "type": "object"}}],
    }
    req = build_request(MODEL, ctx, StreamOptions(reasoning="low", max_tokens=100), "gk")  # type: ignore[arg-type]
    assert req.url.endswith("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
    assert req.headers["x-goog-api-key"] == "gk" and "gk" not in req.url
    b = req.body
    assert b["systemInstruction"] == {"parts": [{"text": "sys"}], "role": "user"}
    assert b["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert b["generationConfig"] == {
        "maxOutputTokens": 100,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 2048},
    }
    # passed as given, as Pi does (the API takes JSON Schema there)
    assert b["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == {"$schema": "x", "type": "object"}
    assert "toolConfig" not in b  # only with a tool_choice


def test_parse_thinking_text_calls_usage() -> None:
    r = reply(thinking("plan"), text("ok go"), tool_call("ls", {"p": 1}), usage=tokens(90, 12, cache_read=10))
    evs = parse_events(GeminiParser, MODEL, decode_sse(_lines(frames_gemini(r, MODEL["id"]))))
    msg = evs[-1]["message"]
    assert [b["type"] for b in msg["content"]] == ["thinking", "text", "toolCall"]
    assert msg["content"][1]["text"] == "ok go" and msg["content"][2]["arguments"] == {"p": 1}
    assert msg["stopReason"] == "toolUse"
    assert (msg["usage"]["input"], msg["usage"]["cacheRead"], msg["usage"]["output"]) == (90, 10, 12)


def test_safety_finish_is_error_with_reason() -> None:
    evs = parse_events(GeminiParser, MODEL, decode_sse(_lines(frames_gemini(text("x").with_stop("SAFETY"), "m"))))
    assert evs[-1]["type"] == "error" and evs[-1]["error"]["errorMessage"] == "Provider stopped with: SAFETY"

"""The scripted server answers a non-streaming Chat Completions request with one JSON body, and
`measured()` usage reports the request's own size (docs/testing.md)."""

from __future__ import annotations

import httpx

from picontext.scripted import ScriptedModelServer, measured, reply, request_tokens, text, thinking, tool_call


def test_non_streaming_chat_completion(server: ScriptedModelServer) -> None:
    server.expect(reply(thinking("hmm"), text("hi"), tool_call("f", {"a": 1}, call_id="c1"), usage=measured(7)))
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 400}]}
    answer = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=30).json()
    (choice,) = answer["choices"]
    assert choice["message"]["content"] == "hi" and choice["message"]["reasoning_content"] == "hmm"
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"a": 1}'}
    assert choice["finish_reason"] == "tool_calls"
    assert answer["usage"]["prompt_tokens"] == request_tokens(body) and answer["usage"]["completion_tokens"] == 7

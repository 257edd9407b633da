"""OpenAI Agents SDK items <-> Pi messages, both ways, and against picontext's own Responses
provider (a session written through the SDK replays the same way when picontext continues it)."""

from __future__ import annotations

import json
from typing import Any

from picontext.ai.providers.openai_responses import convert_input
from picontext.integrations.openai_agents_items import (
    INSTRUCTIONS_TYPE,
    ITEM_TYPE,
    items_to_messages,
    messages_to_items,
)
from picontext.testing import ScriptedModelServer

PROVIDER_DATA = {"model": "scripted-model", "response_id": "chatcmpl-scripted"}
# What the SDK's Runner hands to Session.add_items (captured from a Chat Completions run) ...
CHAT_ITEMS: list[dict[str, Any]] = [
    {"content": "hi", "role": "user"},
    {"id": "__fake_id__", "summary": [{"text": "hmm", "type": "summary_text"}], "type": "reasoning",
     "provider_data": PROVIDER_DATA},
    {"arguments": "{\"q\": \"a\"}", "call_id": "call_1", "name": "lookup", "type": "function_call",
     "id": "__fake_id__", "provider_data": PROVIDER_DATA},
    {"call_id": "call_1", "output": "result for a", "type": "function_call_output"},
    {"id": "__fake_id__", "content": [{"annotations": [], "text": "done", "type": "output_text", "logprobs": []}],
     "role": "assistant", "status": "completed", "type": "message", "provider_data": PROVIDER_DATA},
    {"role": "user", "content": [{"type": "input_text", "text": "x"},
                                 {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"}]},
]
# ... and from a Responses run (real item ids).
RESPONSES_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "what is in a?"},
    {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "look it up"}],
     "encrypted_content": "gAAA"},
    {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}]},
    {"type": "function_call", "call_id": "call_9", "name": "lookup", "arguments": "{\"q\": \"a\"}", "id": "fc_1"},
    {"type": "function_call", "call_id": "call_10", "name": "lookup", "arguments": "{\"q\": \"b\"}", "id": "fc_2"},
    {"type": "function_call_output", "call_id": "call_9", "output": "A"},
    {"type": "function_call_output", "call_id": "call_10", "output": [
        {"type": "input_text", "text": "B"},
        {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/", "detail": "auto"}]},
    {"id": "rs_2", "type": "reasoning", "summary": [], "encrypted_content": "gBBB"},
    {"id": "msg_2", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "a holds A", "annotations": []}]},
]


def _stored(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("type") != "custom"]


def test_responses_items_survive_the_round_trip_exactly() -> None:
    messages = items_to_messages(RESPONSES_ITEMS)
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "toolResult", "assistant"]
    first = messages[1]
    assert [b["type"] for b in first["content"]] == ["thinking", "text", "toolCall", "toolCall"]
    assert first["content"][0]["thinking"] == "look it up"
    assert first["content"][2] == {"type": "toolCall", "id": "call_9|fc_1", "name": "lookup", "arguments": {"q": "a"}}
    assert messages[2]["toolCallId"] == "call_9|fc_1" and messages[2]["toolName"] == "lookup"
    assert messages[3]["content"][1] == {"type": "image", "data": "/9j/", "mimeType": "image/jpeg"}
    back = messages_to_items(messages)
    assert [json.loads(i["arguments"]) if i.get("type") == "function_call" else None for i in back] == [
        json.loads(i["arguments"]) if i.get("type") == "function_call" else None for i in RESPONSES_ITEMS]
    for item in back:
        if item.get("type") == "function_call":
            item["arguments"] = item["arguments"].replace(" ", "")
    expected = [dict(i, arguments=i["arguments"].replace(" ", "")) if i.get("type") == "function_call" else i
                for i in RESPONSES_ITEMS]
    assert back == expected


def test_what_picontext_would_send_equals_what_the_sdk_stored(_model_server: ScriptedModelServer) -> None:
    """Continuing the session with picontext's own openai-responses provider replays the same items."""
    model = _model_server.model("openai-responses", reasoning=True)
    messages = items_to_messages(RESPONSES_ITEMS)
    for m in messages:
        if m["role"] == "assistant":
            m.update(api=model["api"], provider=model["provider"], model=model["id"])
    ours = convert_input(model, {"messages": messages, "tools": []})  # type: ignore[typeddict-item]
    sdk = messages_to_items(messages)
    for a, b in zip(ours, sdk, strict=True):
        a = dict(a)
        if a.get("type") == "function_call":
            assert json.loads(a.pop("arguments")) == json.loads(b.pop("arguments"))
        if a.get("role") == "user" and isinstance(b.get("content"), str):
            b = dict(b, content=[{"type": "input_text", "text": b["content"]}])
        assert a == b


def test_chat_completions_items_round_trip_up_to_the_sdk_placeholders() -> None:
    messages = items_to_messages(CHAT_ITEMS)
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant", "user"]
    assert messages[1]["responseId"] == "chatcmpl-scripted"
    assert messages[1]["content"][1]["id"] == "call_1"  # the SDK's "__fake_id__" is not an id
    back = messages_to_items(messages)
    assert back[0] == CHAT_ITEMS[0] and back[1] == CHAT_ITEMS[1]  # reasoning: the whole item
    assert back[2] == {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{\"q\": \"a\"}"}
    assert back[3] == CHAT_ITEMS[3]
    assert back[4] == {"role": "assistant", "content": "done"}
    assert back[5] == CHAT_ITEMS[5]


def test_reasoning_after_text_starts_the_next_response() -> None:
    items = [
        {"role": "user", "content": "q"},
        {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "one"}]},
        {"id": "rs_2", "type": "reasoning", "summary": []},
        {"id": "msg_2", "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "two"}]},
    ]
    roles = [m["role"] for m in items_to_messages(items)]
    assert roles == ["user", "assistant", "assistant"]


def test_instructions_and_items_pi_cannot_hold() -> None:
    items = [
        {"role": "developer", "content": "be terse"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}},
        {"role": "user", "content": [{"type": "input_image", "image_url": "https://example.com/cat.png"},
                                     {"type": "input_file", "file_id": "file_1"}]},
        {"type": "function_call_output", "call_id": "call_unknown", "output": "orphan"},
    ]
    messages = items_to_messages(items, tools=lambda call_id: ("call_unknown|fc_7", "search") if call_id else None)
    assert messages[0]["role"] == "custom" and messages[0]["customType"] == INSTRUCTIONS_TYPE
    assert messages[1] == {"type": "custom", "customType": ITEM_TYPE, "data": items[1]}
    assert messages[2]["content"] == [{"type": "text", "text": "[image: https://example.com/cat.png]"},
                                      {"type": "text", "text": "[file: file_1]"}]
    assert messages[3]["toolCallId"] == "call_unknown|fc_7" and messages[3]["toolName"] == "search"
    back = messages_to_items(_stored(messages))
    assert back[0] == {"role": "developer", "content": "be terse"}
    assert back[2] == {"type": "function_call_output", "call_id": "call_unknown", "output": "orphan"}


def test_pi_messages_become_items_and_come_back() -> None:
    pi = [
        {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image", "data": "QQ==",
                                                                         "mimeType": "image/png"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "no signature: another provider's"},
            {"type": "text", "text": "calling"},
            {"type": "toolCall", "id": "toolu_1", "name": "read", "arguments": {"path": "a"}}]},
        {"role": "toolResult", "toolCallId": "toolu_1", "toolName": "read", "content": [{"type": "text", "text": "A"}],
         "isError": True},
        {"role": "compactionSummary", "summary": "earlier work", "tokensBefore": 10},
    ]
    items = messages_to_items(pi)
    assert items[1] == {"role": "assistant", "content": "calling"}  # unsigned thinking is not replayed
    assert items[3] == {"type": "function_call_output", "call_id": "toolu_1", "output": "A"}
    assert items[4]["role"] == "user" and "earlier work" in items[4]["content"]  # plain text for any template
    again = items_to_messages(items[:4])
    assert again[0]["content"] == pi[0]["content"]
    assert again[1]["content"] == pi[1]["content"][1:]
    assert again[2]["toolCallId"] == "toolu_1" and again[2]["toolName"] == "read"

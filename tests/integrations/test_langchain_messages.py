"""LangChain messages <-> Pi messages, both ways, including what each side cannot represent."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_openai import ChatOpenAI

from picontext.ai.types import empty_usage
from picontext.integrations.langchain_messages import (
    Origin,
    from_langchain,
    from_langchain_messages,
    to_langchain,
    to_langchain_messages,
)

ORIGIN: Origin = {"api": "openai-completions", "provider": "acme", "model": "m-1"}
PNG = "iVBORw0KGgoAAAANSUhEUg=="  # the first bytes of a PNG file


def pi(message: BaseMessage, **kw: Any) -> dict[str, Any]:
    return from_langchain(message, origin=ORIGIN, now_ms=7, **kw)


def assistant(content: list[dict[str, Any]], stop: str = "stop", **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "api": "openai-completions", "provider": "acme",
            "model": "m-1", **extra, "usage": extra.pop("usage", empty_usage()), "stopReason": stop, "timestamp": 7}


# -- LangChain -> Pi ---------------------------------------------------------------------------------


def test_human_text_stays_a_string_and_blocks_stay_blocks() -> None:
    assert pi(HumanMessage("hello")) == {"role": "user", "content": "hello", "timestamp": 7}
    assert pi(HumanMessage([{"type": "text", "text": "a"}, "b"])) == {
        "role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "timestamp": 7}


@pytest.mark.parametrize("block", [
    {"type": "image", "base64": PNG, "mime_type": "image/png"},  # LangChain's standard block
    {"type": "image", "source_type": "base64", "data": PNG, "mime_type": "image/png"},  # the 0.3 data block
    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},  # OpenAI's
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},  # Anthropic's
    {"type": "image", "base64": PNG},  # no type given: read from the bytes
])
def test_images_in_every_langchain_shape_become_pi_images(block: dict[str, Any]) -> None:
    message = pi(HumanMessage([{"type": "text", "text": "see"}, block]))
    assert message["content"] == [{"type": "text", "text": "see"},
                                  {"type": "image", "data": PNG, "mimeType": "image/png"}]


def test_what_pi_cannot_hold_in_user_content_becomes_a_text_naming_it() -> None:
    message = pi(HumanMessage([
        {"type": "image", "url": "https://example.com/cat.png"},
        {"type": "file", "base64": "JVBERi0=", "mime_type": "application/pdf"},
        {"type": "audio", "base64": "AAAA", "mime_type": "audio/wav"},
        {"type": "text-plain", "text": "plain file text", "mime_type": "text/plain"},
    ], name="alice", id="lc-1", additional_kwargs={"x": 1}))
    assert message == {"role": "user", "timestamp": 7, "content": [
        {"type": "text", "text": "[image not stored: https://example.com/cat.png]"},
        {"type": "text", "text": "[file not stored: application/pdf]"},
        {"type": "text", "text": "[audio not stored: audio/wav]"},
        {"type": "text", "text": "plain file text"},
    ]}


def test_ai_message_with_reasoning_text_tool_calls_and_usage() -> None:
    message = AIMessage(
        content=[{"type": "reasoning", "reasoning": "think", "extras": {"signature": "sig"}},
                 {"type": "text", "text": "calling"}],
        tool_calls=[{"name": "read", "args": {"path": "a"}, "id": "c1"},
                    {"name": "ls", "args": {}, "id": "c2"}],
        usage_metadata={"input_tokens": 1000, "output_tokens": 20, "total_tokens": 1020,
                        "input_token_details": {"cache_read": 600, "cache_creation": 100},
                        "output_token_details": {"reasoning": 12}},
        response_metadata={"finish_reason": "tool_calls", "model_name": "m-1-2026", "id": "resp-9"},
    )
    usage = {**empty_usage(), "input": 300, "output": 20, "cacheRead": 600, "cacheWrite": 100,
             "totalTokens": 1020, "reasoning": 12}
    assert pi(message) == assistant([
        {"type": "thinking", "thinking": "think", "thinkingSignature": "sig"},
        {"type": "text", "text": "calling"},
        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "a"}},
        {"type": "toolCall", "id": "c2", "name": "ls", "arguments": {}},
    ], "toolUse", responseModel="m-1-2026", responseId="resp-9", usage=usage)


def test_reasoning_as_providers_report_it() -> None:
    # DeepSeek, vLLM, llama.cpp: `reasoning_content` beside the text.
    deepseek = AIMessage("answer", additional_kwargs={"reasoning_content": "first I"})
    assert pi(deepseek)["content"] == [{"type": "thinking", "thinking": "first I"}, {"type": "text", "text": "answer"}]
    # Anthropic: thinking and redacted thinking blocks, tool_use in the content.
    anthropic = AIMessage(
        content=[{"type": "thinking", "thinking": "hm", "signature": "s1"},
                 {"type": "redacted_thinking", "data": "opaque"},
                 {"type": "text", "text": "ok"},
                 {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "x"}}],
        tool_calls=[{"name": "read", "args": {"path": "x"}, "id": "toolu_1"}],
        response_metadata={"model_provider": "anthropic", "stop_reason": "tool_use"},
    )
    assert pi(anthropic)["content"] == [
        {"type": "thinking", "thinking": "hm", "thinkingSignature": "s1"},
        {"type": "thinking", "thinking": "", "thinkingSignature": "opaque", "redacted": True},
        {"type": "text", "text": "ok"},
        {"type": "toolCall", "id": "toolu_1", "name": "read", "arguments": {"path": "x"}},
    ]
    assert pi(anthropic)["stopReason"] == "toolUse"


@pytest.mark.parametrize(("finish", "stop"), [("stop", "stop"), ("length", "length"), ("max_tokens", "length"),
                                              ("end_turn", "stop"), ("content_filter", "stop"), (None, "stop")])
def test_stop_reason(finish: str | None, stop: str) -> None:
    meta = {"finish_reason": finish} if finish else {}
    assert pi(AIMessage("x", response_metadata=meta))["stopReason"] == stop


def test_tool_calls_without_id_and_invalid_tool_calls_are_kept() -> None:
    message = AIMessage("", tool_calls=[{"name": "f", "args": {"a": 1}, "id": None}],
                        invalid_tool_calls=[{"name": "g", "args": "{not json", "id": "c9", "error": "bad",
                                             "type": "invalid_tool_call"}])
    content = pi(message)["content"]
    assert content[0]["id"].startswith("call_") and content[0]["name"] == "f" and content[0]["arguments"] == {"a": 1}
    assert content[1] == {"type": "toolCall", "id": "c9", "name": "g", "arguments": {"_raw": "{not json"}}


def test_tool_message() -> None:
    assert pi(ToolMessage("42", tool_call_id="c1", name="calc")) == {
        "role": "toolResult", "toolCallId": "c1", "toolName": "calc",
        "content": [{"type": "text", "text": "42"}], "isError": False, "timestamp": 7}
    failed = pi(ToolMessage([{"type": "text", "text": "boom"}, {"type": "image", "base64": PNG,
                                                                "mime_type": "image/png"}],
                            tool_call_id="c2", status="error", artifact={"code": 3}),
                tool_names={"c2": "shot"})
    assert failed == {"role": "toolResult", "toolCallId": "c2", "toolName": "shot", "isError": True, "timestamp": 7,
                      "content": [{"type": "text", "text": "boom"}, {"type": "image", "data": PNG,
                                                                       "mimeType": "image/png"}],
                      "details": {"code": 3}}
    # An artifact that is no JSON is not kept (Pi's `details` is JSON; it never reaches a model).
    assert "details" not in pi(ToolMessage("x", tool_call_id="c3", artifact=object()))


def test_tool_names_come_from_the_calls_in_the_same_batch() -> None:
    messages = from_langchain_messages(
        [AIMessage("", tool_calls=[{"name": "grep", "args": {}, "id": "g1"}]), ToolMessage("hit", tool_call_id="g1"),
         RemoveMessage(id="whatever")], origin=ORIGIN, now_ms=7)
    assert len(messages) == 2 and messages[1]["toolName"] == "grep"


def test_system_and_chat_messages() -> None:
    assert pi(SystemMessage("be brief")) == {"role": "system", "content": "be brief", "timestamp": 7}
    assert pi(SystemMessage([{"type": "text", "text": "a"}])) == {
        "role": "system", "content": [{"type": "text", "text": "a"}], "timestamp": 7}
    assert pi(ChatMessage(role="user", content="u"))["role"] == "user"
    assert pi(ChatMessage(role="assistant", content="a"))["content"] == [{"type": "text", "text": "a"}]
    assert pi(ChatMessage(role="developer", content="d"))["role"] == "system"
    assert pi(ChatMessage(role="critic", content="meh")) == {
        "role": "custom", "customType": "langchain:critic", "content": "meh", "display": True, "timestamp": 7}


# -- Pi -> LangChain ---------------------------------------------------------------------------------


def test_pi_user_and_tool_result_to_langchain() -> None:
    assert to_langchain({"role": "user", "content": "hi", "timestamp": 1}) == HumanMessage("hi")
    # Text-only content is one string: OpenAI-compatible servers (llama.cpp's) refuse a list of parts.
    two = to_langchain({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                        "timestamp": 1})
    assert two == HumanMessage("a\nb")
    image = to_langchain({"role": "user", "timestamp": 1, "content": [
        {"type": "text", "text": "see"}, {"type": "image", "data": PNG, "mimeType": "image/png"}]})
    assert image == HumanMessage([{"type": "text", "text": "see"},
                                  {"type": "image", "base64": PNG, "mime_type": "image/png"}])
    result = to_langchain({"role": "toolResult", "toolCallId": "c1", "toolName": "calc", "isError": True,
                           "content": [{"type": "text", "text": "bad"}], "details": {"n": 1}, "timestamp": 1})
    assert result == ToolMessage("bad", tool_call_id="c1", name="calc", status="error", artifact={"n": 1})


def test_pi_assistant_to_langchain() -> None:
    message = to_langchain(assistant([
        {"type": "thinking", "thinking": "t", "thinkingSignature": "s"},
        {"type": "thinking", "thinking": "", "thinkingSignature": "enc", "redacted": True},
        {"type": "text", "text": "x"},
        {"type": "toolCall", "id": "c1", "name": "f", "arguments": {"a": 1}},
    ], "toolUse", usage={**empty_usage(), "input": 5, "output": 2, "cacheRead": 10, "totalTokens": 17}))
    assert isinstance(message, AIMessage)
    assert message.content == [{"type": "reasoning", "reasoning": "t", "extras": {"signature": "s"}},
                               {"type": "non_standard", "value": {"type": "redacted_thinking", "data": "enc"}},
                               {"type": "text", "text": "x"}]
    assert message.tool_calls == [{"type": "tool_call", "id": "c1", "name": "f", "args": {"a": 1}}]
    assert message.usage_metadata == {"input_tokens": 15, "output_tokens": 2, "total_tokens": 17,
                                      "input_token_details": {"cache_read": 10, "cache_creation": 0}}
    assert message.response_metadata["finish_reason"] == "tool_calls"
    # A plain answer is a plain string, as a chat model returns it.
    assert to_langchain(assistant([{"type": "text", "text": "hi"}])).content == "hi"  # type: ignore[union-attr]


def test_pi_roles_a_model_reads_as_user_text() -> None:
    summary = to_langchain({"role": "compactionSummary", "summary": "S", "tokensBefore": 9, "timestamp": 1})
    assert isinstance(summary, HumanMessage) and "S" in summary.text
    branch = to_langchain({"role": "branchSummary", "summary": "B", "fromId": "x", "timestamp": 1})
    assert isinstance(branch, HumanMessage) and "B" in branch.text
    custom = to_langchain({"role": "custom", "customType": "note", "content": "N", "display": False, "timestamp": 1})
    assert custom == HumanMessage("N")
    shell = {"role": "bashExecution", "command": "ls", "output": "a.txt", "exitCode": 0, "cancelled": False,
             "truncated": False, "timestamp": 1}
    assert isinstance(to_langchain(shell), HumanMessage)
    assert to_langchain({**shell, "excludeFromContext": True}) is None


def test_pi_system_message_sections_are_text_and_tools_are_dropped() -> None:
    message = to_langchain({"role": "system", "content": "base", "sections": {"a": "rule A", "b": None},
                            "toolsAdded": [{"name": "t", "description": "", "parameters": {}}], "timestamp": 1})
    assert message == SystemMessage("base\n\nrule A")


# -- both ways ---------------------------------------------------------------------------------------

CONVERSATION: list[BaseMessage] = [
    SystemMessage("you help"),
    HumanMessage("list files"),
    HumanMessage([{"type": "text", "text": "and this"}, {"type": "image", "base64": PNG, "mime_type": "image/png"}]),
    AIMessage(content=[{"type": "reasoning", "reasoning": "need ls", "extras": {"signature": "z"}},
                       {"type": "text", "text": "running ls"}],
              tool_calls=[{"name": "ls", "args": {"dir": "."}, "id": "c1", "type": "tool_call"}],
              usage_metadata={"input_tokens": 50, "output_tokens": 9, "total_tokens": 59}),
    ToolMessage("a.txt\nb.txt", tool_call_id="c1", name="ls"),
    ToolMessage("denied", tool_call_id="c2", name="rm", status="error"),
    AIMessage("two files", usage_metadata={"input_tokens": 70, "output_tokens": 3, "total_tokens": 73}),
]


def test_langchain_to_pi_to_langchain_is_the_same_conversation() -> None:
    back = to_langchain_messages(from_langchain_messages(CONVERSATION, origin=ORIGIN))
    assert [type(m) for m in back] == [type(m) for m in CONVERSATION]
    for before, after in zip(CONVERSATION, back, strict=True):
        assert after.content == before.content
        if isinstance(before, AIMessage):
            assert isinstance(after, AIMessage)
            assert after.tool_calls == before.tool_calls
            assert after.usage_metadata == before.usage_metadata
        if isinstance(before, ToolMessage):
            assert isinstance(after, ToolMessage)
            assert (after.tool_call_id, after.name, after.status) == (before.tool_call_id, before.name, before.status)


def test_pi_to_langchain_to_pi_is_the_same_messages() -> None:
    messages = from_langchain_messages(CONVERSATION, origin=ORIGIN, now_ms=7)
    again = from_langchain_messages(to_langchain_messages(messages), origin=ORIGIN, now_ms=7)
    assert again == messages


def test_chat_openai_sends_the_converted_messages_as_openai_expects() -> None:
    """The projection goes to the model through LangChain's own wire mapping: reasoning is not
    replayed to Chat Completions, images become data URLs, calls and results pair up."""
    model = ChatOpenAI(model="m-1", api_key="test")  # type: ignore[arg-type]
    lc = to_langchain_messages(from_langchain_messages(CONVERSATION, origin=ORIGIN))
    wire = model._get_request_payload(lc)["messages"]
    assert [m["role"] for m in wire] == ["system", "user", "user", "assistant", "tool", "tool", "assistant"]
    assert wire[2]["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert wire[3]["content"] == [{"type": "text", "text": "running ls"}]
    assert wire[3]["tool_calls"] == [{"type": "function", "id": "c1",
                                      "function": {"name": "ls", "arguments": '{"dir": "."}'}}]
    assert wire[4] == {"role": "tool", "tool_call_id": "c1", "content": "a.txt\nb.txt"}

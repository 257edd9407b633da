"""pydantic-ai ModelMessage <-> Pi message conversion, both ways, and what does not survive."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from pydantic_ai import messages as pm
from pydantic_ai.usage import RequestUsage

from picontext.integrations.pydantic_ai_messages import (
    RETRY_FEEDBACK,
    SYSTEM_PROMPT_SECTION,
    from_pi,
    to_pi,
)
from picontext.session.convert import convert_to_llm

T0 = datetime(2026, 3, 1, 10, 20, 30, 456000, tzinfo=UTC)
MS = 1772360430456
PNG = b"\x89PNG\r\n\x1a\n tiny"


def at(seconds: int) -> datetime:
    return datetime.fromtimestamp(T0.timestamp() + seconds, tz=UTC)


def conversation() -> list[Any]:
    """A pydantic-ai history that Pi can hold entirely."""
    return [
        pm.ModelRequest(parts=[
            pm.SystemPromptPart("You are terse.", timestamp=at(0)),
            pm.UserPromptPart("What is in the picture?", timestamp=at(0)),
            pm.UserPromptPart(["Look:", pm.BinaryContent(PNG, media_type="image/png")], timestamp=at(1)),
        ]),
        pm.ModelResponse(
            parts=[pm.ThinkingPart("a cat, probably", signature="sig-9"), pm.TextPart("Let me check."),
                   pm.ToolCallPart("lookup", {"q": "cat"}, tool_call_id="call-1"),
                   pm.ToolCallPart("count", {"n": 2}, tool_call_id="call-2")],
            usage=RequestUsage(input_tokens=1200, output_tokens=40, cache_read_tokens=1000, cache_write_tokens=50),
            model_name="gpt-x-2026", timestamp=at(2), provider_response_id="resp-1", finish_reason="tool_call",
        ),
        pm.ModelRequest(parts=[
            pm.ToolReturnPart("lookup", "a small cat", tool_call_id="call-1", timestamp=at(3)),
            pm.ToolReturnPart("count", {"count": 2, "items": ["a", "b"]}, tool_call_id="call-2", timestamp=at(3)),
        ]),
        pm.ModelResponse(parts=[pm.ToolCallPart("lookup", {"q": 1}, tool_call_id="call-3")],
                         usage=RequestUsage(input_tokens=1300, output_tokens=10), model_name="gpt-x-2026",
                         timestamp=at(4), finish_reason="tool_call"),
        pm.ModelRequest(parts=[
            pm.ToolReturnPart("lookup", "q must be a string", tool_call_id="call-3", outcome="retried",
                              retry=pm.RetryInfo("model_retry", attempt=1, max_retries=3), timestamp=at(5)),
        ]),
        pm.ModelResponse(parts=[pm.TextPart("A cat.")], usage=RequestUsage(input_tokens=1400, output_tokens=5),
                         model_name="gpt-x-2026", timestamp=at(6), finish_reason="stop"),
        pm.ModelRequest(parts=[
            pm.RetryFeedbackPart("Answer in JSON.", retry=pm.RetryInfo("model_retry", attempt=1, max_retries=1),
                                 timestamp=at(7)),
        ]),
        pm.ModelResponse(parts=[pm.TextPart('{"animal": "cat"}')], usage=RequestUsage(input_tokens=1500,
                         output_tokens=8), model_name="gpt-x-2026", timestamp=at(8), finish_reason="stop"),
    ]


def test_pi_shapes_of_each_part() -> None:
    pi = to_pi(conversation())
    assert [m["role"] for m in pi] == ["system", "user", "user", "assistant", "toolResult", "toolResult",
                                       "assistant", "toolResult", "assistant", "custom", "assistant"]
    system, text_user, image_user, first = pi[0], pi[1], pi[2], pi[3]
    assert system == {"role": "system", "content": "", "sections": {SYSTEM_PROMPT_SECTION: "You are terse."},
                      "timestamp": MS}
    assert text_user == {"role": "user", "content": "What is in the picture?", "timestamp": MS}
    assert image_user["content"] == [{"type": "text", "text": "Look:"},
                                     {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}]
    assert first["content"] == [
        {"type": "thinking", "thinking": "a cat, probably", "thinkingSignature": "sig-9"},
        {"type": "text", "text": "Let me check."},
        {"type": "toolCall", "id": "call-1", "name": "lookup", "arguments": {"q": "cat"}},
        {"type": "toolCall", "id": "call-2", "name": "count", "arguments": {"n": 2}},
    ]
    # Pi counts input without the cached tokens; pydantic-ai's input includes them.
    assert first["usage"] == {"input": 150, "output": 40, "cacheRead": 1000, "cacheWrite": 50, "totalTokens": 1240}
    assert first["stopReason"] == "toolUse" and first["responseModel"] == "gpt-x-2026"
    assert first["responseId"] == "resp-1" and first["timestamp"] == MS + 2000
    plain, structured = pi[4], pi[5]
    assert plain == {"role": "toolResult", "toolCallId": "call-1", "toolName": "lookup",
                     "content": [{"type": "text", "text": "a small cat"}], "isError": False, "timestamp": MS + 3000}
    # The model sees the JSON text; the value itself is kept in details for the way back.
    assert structured["content"] == [{"type": "text", "text": '{"count":2,"items":["a","b"]}'}]
    assert structured["details"] == {"pydantic_ai": {"content": {"count": 2, "items": ["a", "b"]}}}
    retried = pi[7]
    assert retried["isError"] is True
    assert retried["details"]["pydantic_ai"]["outcome"] == "retried"
    feedback = pi[9]
    assert feedback["customType"] == RETRY_FEEDBACK and "Answer in JSON." in feedback["content"]


def test_pydantic_ai_to_pi_and_back_is_the_same_conversation() -> None:
    original = conversation()
    back = from_pi(to_pi(original))
    assert len(back) == len(original)
    for before, after in zip(original, back, strict=True):
        assert type(before) is type(after)
        assert [type(p) for p in before.parts] == [type(p) for p in after.parts]
        for p, q in zip(before.parts, after.parts, strict=True):
            for name in ("content", "tool_name", "tool_call_id", "args", "signature", "outcome", "retry",
                         "timestamp"):
                if hasattr(p, name):
                    assert getattr(p, name) == getattr(q, name), (type(p).__name__, name)
        if isinstance(before, pm.ModelResponse):
            assert after.usage == before.usage
            assert after.model_name == before.model_name
            assert after.provider_response_id == before.provider_response_id
            assert after.finish_reason == before.finish_reason
            assert after.timestamp == before.timestamp


def test_pi_to_pydantic_ai_and_back_is_the_same_messages() -> None:
    pi = to_pi(conversation())
    assert to_pi(from_pi(pi)) == pi


def test_a_projection_reaches_pydantic_ai_as_pi_sends_it() -> None:
    """Summaries, custom and bash messages are the user text Pi's convertToLlm makes; system
    deltas fold into one system prompt at the head."""
    projection = [
        {"role": "system", "content": "", "sections": {SYSTEM_PROMPT_SECTION: "old prompt"}, "timestamp": 1},
        {"role": "compactionSummary", "summary": "We looked at a cat.", "tokensBefore": 9000, "timestamp": 2},
        {"role": "branchSummary", "summary": "Tried dogs.", "fromId": "abc", "timestamp": 3},
        {"role": "custom", "customType": "note", "content": "remember the cat", "display": True, "timestamp": 4},
        {"role": "bashExecution", "command": "ls", "output": "cat.png", "exitCode": 0, "cancelled": False,
         "truncated": False, "timestamp": 5},
        {"role": "bashExecution", "command": "secret", "output": "x", "exitCode": 0, "cancelled": False,
         "truncated": False, "excludeFromContext": True, "timestamp": 6},
        {"role": "system", "content": "", "sections": {SYSTEM_PROMPT_SECTION: "new prompt"}, "timestamp": 7},
        {"role": "user", "content": [{"type": "text", "text": "and now?"}], "timestamp": 8},
    ]
    messages = from_pi(projection)
    assert len(messages) == 1 and isinstance(messages[0], pm.ModelRequest)
    parts = messages[0].parts
    assert isinstance(parts[0], pm.SystemPromptPart) and parts[0].content == "new prompt"
    expected = [m for m in convert_to_llm(projection) if m["role"] == "user"]
    texts = [p.content if isinstance(p.content, str) else "".join(p.content) for p in parts[1:]]
    assert texts == ["".join(b["text"] for b in m["content"]) if isinstance(m["content"], list) else m["content"]
                     for m in expected]
    assert len(texts) == 5  # the excluded bash command is not sent


def test_what_pi_cannot_hold() -> None:
    request = pm.ModelRequest(parts=[
        pm.SystemPromptPart("budget: 3 calls left", scope="request"),
        pm.UserPromptPart([
            "see these", pm.CachePoint(), pm.ImageUrl("https://example.com/cat.png"),
            pm.ImageUrl("data:image/png;base64," + base64.b64encode(PNG).decode()),
            pm.DocumentUrl("https://example.com/a.pdf"), pm.BinaryContent(b"RIFF", media_type="audio/wav"),
        ]),
    ])
    (user,) = to_pi([request])  # the request-scoped prompt is not stored
    assert user["content"] == [
        {"type": "text", "text": "see these"},
        {"type": "text", "text": "[image-url: https://example.com/cat.png]"},
        {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"},
        {"type": "text", "text": "[document-url: https://example.com/a.pdf]"},
        {"type": "text", "text": "[binary: audio/wav]"},
    ]
    response = pm.ModelResponse(parts=[pm.TextPart("x", id="msg_1", provider_name="openai"),
                                       pm.ToolCallPart("f", '{"a": 1}', tool_call_id="c")])
    (assistant,) = to_pi([response])
    (back,) = from_pi([assistant])
    assert back.parts[0].id is None  # part ids do not survive
    assert back.parts[1].args == {"a": 1}  # JSON-string arguments come back parsed


def test_a_tool_result_with_an_image_and_errors() -> None:
    part = pm.ToolReturnPart("shot", ["taken", pm.BinaryContent(PNG, media_type="image/png")], tool_call_id="c1",
                             outcome="failed", timestamp=T0)
    (pi,) = to_pi([pm.ModelRequest(parts=[part])])
    assert pi["isError"] is True
    assert pi["content"][1] == {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}
    (request,) = from_pi([pi])
    back = request.parts[0]
    assert back.outcome == "failed" and back.files == part.files and back.model_response_str() == \
        part.model_response_str()
    # A Pi-written error result (no pydantic details) is a failed return.
    (request,) = from_pi([{"role": "toolResult", "toolCallId": "c2", "toolName": "bash",
                           "content": [{"type": "text", "text": "exit 1"}], "isError": True, "timestamp": MS}])
    assert request.parts[0].outcome == "failed" and request.parts[0].content == "exit 1"


def test_bad_pi_data_does_not_break_the_way_back() -> None:
    (request,) = from_pi([
        {"role": "user", "content": [{"type": "image", "data": "%%%", "mimeType": "image/png"}], "timestamp": MS},
        {"role": "custom", "customType": RETRY_FEEDBACK, "content": "try again", "display": False,
         "details": {"pydantic_ai": {"part": {"part_kind": "nonsense"}}}, "timestamp": MS},
    ])
    assert request.parts[0].content == ["[image: unreadable data]"]
    assert request.parts[1].content == "try again"


def _dump(messages: list[Any]) -> bytes:
    return pm.ModelMessagesTypeAdapter.dump_json(messages)


def test_the_incremental_conversion_equals_a_whole_one() -> None:
    """Growing projections, rewritten starts (a compaction) and system prompt changes, in random
    order: the converter that reuses its earlier work answers as `from_pi` of the whole list."""
    import random

    from picontext.integrations.pydantic_ai_messages import ProjectionConverter

    rng = random.Random(21)
    pool = to_pi(conversation())
    extra = [
        {"role": "system", "content": "", "sections": {SYSTEM_PROMPT_SECTION: "changed"}, "timestamp": 9},
        {"role": "compactionSummary", "summary": "s", "tokensBefore": 5, "timestamp": 9},
        {"role": "user", "content": "more", "timestamp": 10},
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "usage": {}, "stopReason": "stop",
         "timestamp": 11},
    ]
    convert = ProjectionConverter()
    projection: list[dict[str, Any]] = []
    reused = 0
    for _step in range(300):
        choice = rng.random()
        if choice < 0.1:
            projection = [rng.choice(extra), *projection[rng.randrange(len(projection) + 1):]]  # a compaction
        elif choice < 0.15:
            projection = [*projection, extra[0]]
        else:
            projection = [*projection, rng.choice(pool + extra[1:])]
        before = len(convert._source)
        assert _dump(convert(projection)) == _dump(from_pi(projection))
        reused += before > 0 and len(convert._source) >= before
    assert reused > 100  # the point: most calls convert only what is new

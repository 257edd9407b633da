"""serialize_conversation: the spec 02 §7.1 format (cases 50-52)."""

from __future__ import annotations

from picontext.compaction.serialize import serialize_conversation, serialize_messages, truncate_utf16, utf16_len


def _tr(text: str) -> dict:
    return {"role": "toolResult", "toolCallId": "c", "toolName": "read", "content": [{"type": "text", "text": text}],
            "isError": False, "timestamp": 1}


def test_tool_result_cut_at_2000() -> None:
    out = serialize_conversation([_tr("x" * 5000)])
    assert out == "[Tool result]: " + "x" * 2000 + "\n\n[... 3000 more characters truncated]"
    assert serialize_conversation([_tr("y" * 2000)]) == "[Tool result]: " + "y" * 2000


def test_assistant_parts_in_fixed_order() -> None:
    msg = {"role": "assistant", "content": [
        {"type": "text", "text": "Looking"}, {"type": "thinking", "thinking": "hmm"},
        {"type": "toolCall", "id": "1", "name": "read", "arguments": {"path": "a.ts", "limit": 20}},
        {"type": "text", "text": "more"}]}
    assert serialize_conversation([{"role": "user", "content": "Fix the bug"}, msg]) == (
        '[User]: Fix the bug\n\n[Assistant thinking]: hmm\n\n[Assistant]: Looking\nmore\n\n'
        '[Assistant tool calls]: read(path="a.ts", limit=20)'
    )


def test_images_and_system_produce_nothing() -> None:
    img = {"role": "user", "content": [{"type": "image", "data": "A", "mimeType": "image/png"}]}
    assert serialize_conversation([img, {"role": "system", "content": "sys"}]) == ""


def test_json_arguments_like_javascript() -> None:
    msg = {"role": "assistant", "content": [{"type": "toolCall", "id": "1", "name": "f",
                                              "arguments": {"a": 1.0, "b": "ü", "c": [True, None]}}]}
    assert serialize_conversation([msg]) == '[Assistant tool calls]: f(a=1, b="ü", c=[true,null])'


def test_utf16_helpers() -> None:
    assert utf16_len("😀😀") == 4
    assert truncate_utf16("😀😀", 2) == "😀"
    assert utf16_len(truncate_utf16("a😀", 2)) == 2  # half a pair, as String.slice leaves it


def test_custom_roles_are_converted_first() -> None:
    text = serialize_messages([{"role": "bashExecution", "command": "ls", "output": "a", "exitCode": 0,
                                "cancelled": False, "truncated": False, "timestamp": 1}])
    assert text.startswith("[User]: ") and "ls" in text

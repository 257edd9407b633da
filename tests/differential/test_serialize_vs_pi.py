"""Our summarizer text equals the reference's `serializeConversation` on generated conversations.

Only provider roles are compared (system/user/assistant/toolResult): the wrappers that
`convert_to_llm` puts around summaries and shell output are our own wording on purpose.
Knob: PICONTEXT_DIFF_SERIALIZE (number of generated conversations, default 400).
"""

from __future__ import annotations

import os
import random
from typing import Any

from picontext.compaction.serialize import serialize_conversation

N = int(os.environ.get("PICONTEXT_DIFF_SERIALIZE", "400"))

_WORDS = ["fix", "the", "bug", "über", "naïve", "日本語", "😀", "a\nb", "\t", '"q"', "\\", "", " ", "x" * 50]


def _text(rng: random.Random, long: bool = False) -> str:
    n = rng.choice([0, 1, 3, 8]) if not long else rng.choice([400, 700, 1200])
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(7 if depth < 2 else 5)
    return [
        lambda: _text(rng),
        lambda: rng.randint(-5, 10**6),
        lambda: rng.choice([0.5, 1.0, -0.0, 1e21, 3.14159]),
        lambda: rng.choice([True, False, None]),
        lambda: "😀" * rng.randint(0, 3),
        lambda: [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))],
        lambda: {f"k{i}": _value(rng, depth + 1) for i in range(rng.randint(0, 3))},
    ][kind]()


def _message(rng: random.Random) -> dict[str, Any]:
    role = rng.choice(["user", "user", "assistant", "assistant", "toolResult", "system"])
    if role == "user":
        if rng.random() < 0.3:
            return {"role": "user", "content": _text(rng), "timestamp": 1}
        blocks: list[Any] = []
        for _ in range(rng.randint(0, 3)):
            if rng.random() < 0.25:
                blocks.append({"type": "image", "data": "AAAA", "mimeType": "image/png"})
            else:
                blocks.append({"type": "text", "text": _text(rng)})
        return {"role": "user", "content": blocks, "timestamp": 1}
    if role == "assistant":
        blocks = []
        for _ in range(rng.randint(0, 4)):
            kind = rng.choice(["text", "thinking", "toolCall"])
            if kind == "text":
                blocks.append({"type": "text", "text": _text(rng)})
            elif kind == "thinking":
                blocks.append({"type": "thinking", "thinking": _text(rng)})
            else:
                args = {rng.choice(["path", "command", "limit", "oldText", "ß"]): _value(rng) for _ in range(3)}
                blocks.append({"type": "toolCall", "id": "c1", "name": rng.choice(["read", "bash", "edit"]),
                               "arguments": args})
        return {"role": "assistant", "content": blocks, "stopReason": "stop", "timestamp": 1}
    if role == "toolResult":
        blocks = [{"type": "text", "text": _text(rng, long=rng.random() < 0.5)} for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.2:
            blocks.append({"type": "text", "text": "😀" * 1001})
        return {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": blocks,
                "isError": False, "timestamp": 1}
    return {"role": "system", "content": _text(rng), "timestamp": 1}


def _conversations() -> list[list[dict[str, Any]]]:
    out = []
    for seed in range(N):
        rng = random.Random(seed)
        out.append([_message(rng) for _ in range(rng.randint(0, 8))])
    # The spec's worked examples.
    out.append([{"role": "toolResult", "toolCallId": "c", "toolName": "read",
                 "content": [{"type": "text", "text": "x" * 5000}], "isError": False, "timestamp": 1}])
    out.append([{"role": "assistant", "content": [
        {"type": "text", "text": "Looking"}, {"type": "thinking", "thinking": "hmm"},
        {"type": "toolCall", "id": "1", "name": "read", "arguments": {"path": "a.ts", "limit": 20}},
        {"type": "text", "text": "more"}], "timestamp": 1}])
    out.append([{"role": "toolResult", "toolCallId": "c", "toolName": "read",  # cut inside a surrogate pair
                 "content": [{"type": "text", "text": "a" + "😀" * 1001}], "isError": False, "timestamp": 1}])
    return out


def test_serialize_equals_reference(pi: Any) -> None:
    conversations = _conversations()
    theirs = pi.op("summarize_ops.serializeBatch", conversations)
    mismatches = [
        (i, ours, ref)
        for i, (conv, ref) in enumerate(zip(conversations, theirs, strict=True))
        if (ours := serialize_conversation(conv)) != ref
    ]
    assert not mismatches, mismatches[:3]

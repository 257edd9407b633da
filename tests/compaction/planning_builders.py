"""Plain-data session branches for the token and compaction-planning tests (spec 02 §10 notation).

`Branch` appends entries with sequential ids ("e1", "e2", ...) as one root-first path:
`b.u(400)` is a user message of 400 chars, `b.a(400, usage=5000)` an assistant text message,
`b.call("read", {"path": "a.ts"})` an assistant tool call, `b.tr(2000)` its tool result.
"""

from __future__ import annotations

from typing import Any


def usage(total: int = 0, *, input: int = 0, output: int = 0, cache_read: int = 0, cache_write: int = 0) -> dict:
    return {"input": input, "output": output, "cacheRead": cache_read, "cacheWrite": cache_write,
            "totalTokens": total, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


def text(n: int | str, fill: str = "x") -> str:
    return n if isinstance(n, str) else fill * n


def user_msg(content: Any) -> dict:
    return {"role": "user", "content": text(content) if isinstance(content, int) else content, "timestamp": 1}


def assistant_msg(blocks: list[dict], *, usage_total: int | dict | None = 0, stop: str = "stop") -> dict:
    u = usage_total if isinstance(usage_total, dict) else usage(usage_total or 0)
    return {"role": "assistant", "content": blocks, "api": "x", "provider": "p", "model": "m", "usage": u,
            "stopReason": stop, "timestamp": 1}


class Branch:
    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def add(self, kind: str, **fields: Any) -> str:
        eid = f"e{len(self.entries) + 1}"
        parent = self.entries[-1]["id"] if self.entries else None
        self.entries.append({"type": kind, "id": eid, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
                             **fields})
        return eid

    def msg(self, message: dict) -> str:
        return self.add("message", message=message)

    def u(self, n: int | str = 40) -> str:
        return self.msg(user_msg(text(n)))

    def a(self, n: int | str = 40, *, usage: int | dict = 0, stop: str = "stop") -> str:
        blocks = [{"type": "text", "text": text(n)}] if text(n) else []
        return self.msg(assistant_msg(blocks, usage_total=usage, stop=stop))

    def call(self, name: str, args: dict, *, usage: int = 0) -> str:
        block = {"type": "toolCall", "id": f"c{len(self.entries)}", "name": name, "arguments": args}
        return self.msg(assistant_msg([block], usage_total=usage, stop="toolUse"))

    def tr(self, n: int | str = 40, name: str = "read") -> str:
        return self.msg({"role": "toolResult", "toolCallId": "c", "toolName": name,
                         "content": [{"type": "text", "text": text(n)}], "isError": False, "timestamp": 1})

    def system(self, content: str = "", sections: dict | None = None, tools: list | None = None) -> str:
        m: dict[str, Any] = {"role": "system", "content": content}
        if sections is not None:
            m["sections"] = sections
        if tools is not None:
            m["toolsAdded"] = tools
        m["timestamp"] = 1
        return self.msg(m)

    def custom(self, n: int | str = 40) -> str:
        return self.add("custom_message", customType="note", content=text(n), display=True)

    def model_change(self) -> str:
        return self.add("model_change", provider="p", modelId="m2")

    def edit(self, target: str, replacement: Any) -> str:
        return self.add("context_edit", targetId=target, replacement=replacement)

    def compaction(self, summary: str, first_kept: str | None = None, **fields: Any) -> str:
        eid = f"e{len(self.entries) + 1}"
        return self.add("compaction", summary=summary, firstKeptEntryId=first_kept or eid, tokensBefore=1000,
                        **fields)

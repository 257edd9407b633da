"""The session's helpers reach it only through the small host interfaces of agent/host.py."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from picontext.agent.retries import RetryRuntime
from picontext.agent.tools.context import context_tools
from picontext.ai.retry import RetryPolicy

SRC = Path(__file__).resolve().parents[2] / "src" / "picontext" / "agent"
HELPERS = ["retries.py", "compaction_runtime.py", "navigation.py", "tools/context.py"]


def test_helpers_never_import_the_session_or_touch_its_private_members() -> None:
    for name in HELPERS:
        tree = ast.parse((SRC / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert node.module != "picontext.agent.session", f"{name} imports AgentSession"
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute | ast.Name):
                owner = node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id
                if owner in ("s", "session") and node.attr.startswith("_"):
                    raise AssertionError(f"{name}:{node.lineno} uses {owner}.{node.attr}")


class _RetryHost:
    """A host that is not an AgentSession: a model, a policy, an event list."""

    def __init__(self) -> None:
        self.model: Any = {"contextWindow": 1000}
        self.retry_policy = RetryPolicy(max_retries=2, base_delay_ms=5)
        self.events: list[Any] = []
        self.omitted: list[Any] = []

    async def emit(self, event: Any) -> None:
        self.events.append(event)

    async def omit(self, messages: Any) -> list[str]:
        self.omitted.extend(messages)
        return ["e1"]


async def test_retry_runtime_runs_on_any_host() -> None:
    host = _RetryHost()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    runtime = RetryRuntime(host, sleep)
    failed = {"role": "assistant", "stopReason": "error", "errorMessage": "503 Service Unavailable"}
    assert await runtime.prepare(failed, None)
    assert host.omitted == [failed]
    assert [e["type"] for e in host.events] == ["auto_retry_start"]
    assert host.events[0]["delayMs"] == 5 and slept == [0.005]
    await runtime.on_assistant_end({"role": "assistant", "stopReason": "stop"})
    assert host.events[-1] == {"type": "auto_retry_end", "success": True, "attempt": 1}


class _ToolHost:
    def __init__(self) -> None:
        self.manager: Any = None
        self.requested: list[str] = []

    def request_compaction(self, instructions: str) -> None:
        if self.requested:
            raise ValueError("already requested; continue the task.")
        self.requested.append(instructions)


async def test_request_compaction_tool_goes_through_the_host() -> None:
    host = _ToolHost()
    tool = next(t for t in context_tools(host) if t.name == "request_compaction")  # type: ignore[arg-type]
    result = await tool.execute("c1", {"instructions": "keep the port"}, None, None)  # type: ignore[arg-type]
    assert host.requested == ["keep the port"] and "scheduled" in str(result)
    try:
        await tool.execute("c2", {}, None, None)  # type: ignore[arg-type]
    except Exception as exc:  # ToolError carries the host's reason
        assert "already requested" in str(exc)
    else:
        raise AssertionError("second request was not refused")

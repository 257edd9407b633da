"""Run a tool the way the loop does, on real files."""

from __future__ import annotations

from typing import Any

from picontext.agent._validate import validate_arguments
from picontext.agent.types import AgentTool, AgentToolResult, ToolError
from picontext.ai.event_stream import AbortSignal


async def call(tool: AgentTool, signal: AbortSignal | None = None, **args: Any) -> AgentToolResult:
    """The tool's result; a `ToolError` becomes an error result with its text, as in the loop."""
    problem = validate_arguments(tool.parameters, args)
    assert problem is None, problem
    try:
        return await tool.execute("call-1", args, signal or AbortSignal(), lambda _r: None)
    except ToolError as exc:
        return AgentToolResult.text(str(exc), is_error=True)


def text_of(result: AgentToolResult) -> str:
    return "\n".join(b["text"] for b in result.content if b["type"] == "text")

"""Shapes shared by the agent loop, its tools and the session (Pi packages/agent/src/types.ts).

Messages stay the JSON-shaped TypedDicts of `picontext.ai.types`; what is new here never touches
disk, so it is snake_case dataclasses: a tool (`AgentTool`), its result (`AgentToolResult`),
the loop's working context (`AgentContext`) and the values the two per-request seams exchange
(`TurnContext`/`NextTurn` for `prepare_next_turn`, `RequestContext` for `prepare_request`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from picontext.ai.event_stream import AbortSignal
from picontext.ai.models import Model
from picontext.ai.types import AgentMessage, AssistantMessage, Tool, ToolResultMessage, UserContent
from picontext.errors import PicontextError

__all__ = [
    "AgentContext",
    "AgentMessage",
    "AgentTool",
    "AgentToolResult",
    "NextTurn",
    "PrepareNextTurn",
    "PrepareRequest",
    "QueueMode",
    "RequestContext",
    "ThinkingLevel",
    "ToolError",
    "ToolUpdate",
    "TurnContext",
    "tool_declaration",
]

ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
QueueMode: TypeAlias = Literal["one-at-a-time", "all"]
THINKING_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high", "xhigh")


class ToolError(PicontextError):
    """A tool's expected failure; the loop turns it into a `toolResult` with `isError: true`.

    The message is what the model reads, so it says what went wrong and what to do instead.
    """


@dataclass(slots=True)
class AgentToolResult:
    """What a tool returns: content for the model, `details` for UIs and logs (never sent).

    `terminate=True` asks the loop to stop after this batch; it only does so when every
    result of the batch asks for it (Pi `terminate`).
    """

    content: list[UserContent]
    details: Any = None
    is_error: bool = False
    terminate: bool = False

    @classmethod
    def text(cls, text: str, details: Any = None, *, is_error: bool = False) -> AgentToolResult:
        return cls([{"type": "text", "text": text}], details, is_error)


ToolUpdate = Callable[[AgentToolResult], None]
"""Streams a partial result (`tool_execution_update`); tools may call it any number of times."""


class AgentTool(Protocol):
    """A tool the model can call.

    Contract: `execute` gets already validated `args`; it returns an `AgentToolResult` or raises
    (`ToolError` for expected failures, anything else for bugs: both become error results). It
    must watch `signal` and return or raise promptly once it fires.
    """

    # Read-only members: tools declare them as ClassVars (one value per tool class), which a
    # settable protocol attribute would not accept.
    @property
    def name(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def parameters(self) -> dict[str, Any]:
        """JSON schema of the arguments (an object schema)."""
        ...

    async def execute(
        self, call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult: ...


def tool_declaration(tool: AgentTool) -> Tool:
    """The provider-facing declaration of a tool."""
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


@dataclass(slots=True)
class AgentContext:
    """The loop's working transcript. The loop appends every message it finalizes to `messages`."""

    messages: list[AgentMessage] = field(default_factory=list)
    system_prompt: str | None = None
    tools: list[AgentTool] = field(default_factory=list)


@dataclass(slots=True)
class TurnContext:
    """Passed to `prepare_next_turn` after a completed turn, before the next request."""

    context: AgentContext
    model: Model
    thinking_level: ThinkingLevel
    message: AssistantMessage
    tool_results: list[ToolResultMessage]


@dataclass(slots=True)
class NextTurn:
    """What `prepare_next_turn` may change; None fields keep the current value."""

    messages: Sequence[AgentMessage] | None = None  # the loop keeps a list of its own
    tools: list[AgentTool] | None = None
    model: Model | None = None
    thinking_level: ThinkingLevel | None = None


@dataclass(slots=True)
class RequestContext:
    """Passed to `prepare_request` immediately before every provider request (the first included).
    `messages` may be a read-only view (`AgentSession.messages`): read it, or replace it."""

    messages: Sequence[AgentMessage]
    tools: list[AgentTool]
    model: Model
    thinking_level: ThinkingLevel
    system_prompt: str | None = None


PrepareNextTurn = Callable[[TurnContext], Awaitable[NextTurn | None]]
PrepareRequest = Callable[[RequestContext, AbortSignal], Awaitable[RequestContext | None]]

"""Message and content shapes, exactly as they appear in Pi session files and on the wire.

They are TypedDicts because a message read from a JSONL line already *is* the value: keys are
the file's camelCase keys, unknown keys written by newer Pi versions ride along untouched, and
there is no alias layer to forget (see docs/design.md).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

StopReason: TypeAlias = Literal["pending", "stop", "length", "toolUse", "error", "aborted", "deferred"]


class TextContent(TypedDict):
    type: Literal["text"]
    text: str
    textSignature: NotRequired[str]


class ImageContent(TypedDict):
    type: Literal["image"]
    data: str
    mimeType: str


class ThinkingContent(TypedDict):
    type: Literal["thinking"]
    thinking: str
    thinkingSignature: NotRequired[str]
    redacted: NotRequired[bool]


class ToolCall(TypedDict):
    type: Literal["toolCall"]
    id: str
    name: str
    arguments: dict[str, Any]
    thoughtSignature: NotRequired[str]
    namespace: NotRequired[str]


UserContent: TypeAlias = TextContent | ImageContent
AssistantContent: TypeAlias = TextContent | ThinkingContent | ToolCall


class Cost(TypedDict):
    input: float
    output: float
    cacheRead: float
    cacheWrite: float
    total: float


class Usage(TypedDict):
    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    totalTokens: int
    cost: Cost
    cacheWrite1h: NotRequired[int]
    reasoning: NotRequired[int]


class Tool(TypedDict):
    name: str
    description: str
    parameters: dict[str, Any]
    constrainedSampling: NotRequired[bool]


class ToolReference(TypedDict):
    name: str


class SystemMessage(TypedDict):
    role: Literal["system"]
    content: str | list[TextContent]
    sections: NotRequired[dict[str, str | None]]
    toolsAdded: NotRequired[list[Tool]]
    toolsRemoved: NotRequired[list[ToolReference]]
    timestamp: int


class UserMessage(TypedDict):
    role: Literal["user"]
    content: str | list[UserContent]
    timestamp: int


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: list[AssistantContent]
    api: str
    provider: str
    model: str
    usage: Usage
    stopReason: StopReason
    timestamp: int
    responseModel: NotRequired[str]
    responseId: NotRequired[str]
    providerThinkingLevel: NotRequired[str]
    diagnostics: NotRequired[list[dict[str, Any]]]
    deferred: NotRequired[dict[str, Any]]
    errorMessage: NotRequired[str]
    rawStopReason: NotRequired[str]
    endTurn: NotRequired[bool]


class ToolResultMessage(TypedDict):
    role: Literal["toolResult"]
    toolCallId: str
    toolName: str
    content: list[UserContent]
    isError: bool
    timestamp: int
    details: NotRequired[Any]
    usage: NotRequired[Usage]


class BashExecutionMessage(TypedDict):
    role: Literal["bashExecution"]
    command: str
    output: str
    exitCode: int | None
    cancelled: bool
    truncated: bool
    timestamp: int
    fullOutputPath: NotRequired[str]
    excludeFromContext: NotRequired[bool]


class CustomMessage(TypedDict):
    role: Literal["custom"]
    customType: str
    content: str | list[UserContent]
    display: bool
    timestamp: int | float | None
    details: NotRequired[Any]


class BranchSummaryMessage(TypedDict):
    role: Literal["branchSummary"]
    summary: str
    fromId: str | None
    timestamp: int | float | None


class CompactionSummaryMessage(TypedDict):
    role: Literal["compactionSummary"]
    summary: str
    tokensBefore: int
    timestamp: int | float | None


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage
"""The four roles a provider understands."""

AgentMessage: TypeAlias = (
    Message | BashExecutionMessage | CustomMessage | BranchSummaryMessage | CompactionSummaryMessage
)
"""Everything a session projection can yield; custom roles are turned into user messages
by `picontext.session.convert.convert_to_llm` before a request."""

LLM_ROLES = frozenset({"system", "user", "assistant", "toolResult"})


def empty_usage() -> Usage:
    return {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def content_text(content: object, sep: str = "\n") -> str:
    """Text of a string or of the text blocks of a content list, joined by `sep`."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return sep.join(
            b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"
            and isinstance(b.get("text"), str)
        )
    return ""

"""Agent and session events (Pi `AgentEvent` in packages/agent/src/types.ts, session events in
agent-session.ts), as JSON-shaped TypedDicts so JSON/RPC modes can write them out unchanged.

Order of one low-level run (spec 03 §1.2, §10 S1)::

    agent_start
      turn_start
        message_start/message_end            system declaration (only when it changed), prompts
        message_start message_update* message_end     the assistant reply
        (tool_execution_start tool_execution_update* tool_execution_end)*
        (message_start message_end)*         tool results, in call order
      turn_end
      ... more turns ...
    agent_end
    agent_settled                            (session only: after the whole session run)

The loop yields loop events only; the session adds `willRetry` to `agent_end`, emits
`agent_settled`, and later the compaction and retry events declared here.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

from picontext.ai.events import AssistantMessageEvent
from picontext.ai.types import AgentMessage, AssistantMessage, ToolResultMessage

__all__ = [
    "AGENT_EVENT_TYPES",
    "LOOP_EVENT_TYPES",
    "SESSION_EVENT_TYPES",
    "AgentEndEvent",
    "AgentEvent",
    "AgentSettledEvent",
    "AgentStartEvent",
    "AutoRetryEndEvent",
    "AutoRetryStartEvent",
    "CompactionBackgroundDiscardedEvent",
    "CompactionBackgroundStartEvent",
    "CompactionEndEvent",
    "CompactionReason",
    "CompactionSkippedEvent",
    "CompactionStartEvent",
    "EntryAppendedEvent",
    "ExtensionErrorEvent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "PromptCancelledEvent",
    "QueueUpdateEvent",
    "SummarizationRetryAttemptStartEvent",
    "SummarizationRetryFinishedEvent",
    "SummarizationRetryScheduledEvent",
    "ThinkingLevelChangedEvent",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "TurnEndEvent",
    "TurnStartEvent",
    "to_json_event",
]

CompactionReason: TypeAlias = Literal["manual", "threshold", "overflow"]


class AgentStartEvent(TypedDict):
    type: Literal["agent_start"]


class AgentEndEvent(TypedDict):
    type: Literal["agent_end"]
    messages: list[AgentMessage]
    """Every message produced by this low-level run, in order."""
    willRetry: NotRequired[bool]
    """Set by the session: another low-level run follows (retry or recovery)."""


class TurnStartEvent(TypedDict):
    type: Literal["turn_start"]


class TurnEndEvent(TypedDict):
    type: Literal["turn_end"]
    message: AssistantMessage
    toolResults: list[ToolResultMessage]


class MessageStartEvent(TypedDict):
    type: Literal["message_start"]
    message: AgentMessage


class MessageUpdateEvent(TypedDict):
    type: Literal["message_update"]
    message: AssistantMessage
    assistantMessageEvent: AssistantMessageEvent


class MessageEndEvent(TypedDict):
    type: Literal["message_end"]
    message: AgentMessage


class ToolExecutionStartEvent(TypedDict):
    type: Literal["tool_execution_start"]
    toolCallId: str
    toolName: str
    args: dict[str, Any]


class ToolExecutionUpdateEvent(TypedDict):
    type: Literal["tool_execution_update"]
    toolCallId: str
    toolName: str
    args: dict[str, Any]
    partialResult: dict[str, Any]


class ToolExecutionEndEvent(TypedDict):
    type: Literal["tool_execution_end"]
    toolCallId: str
    toolName: str
    result: dict[str, Any]
    """`{"content": [...], "details": ...}`, as the tool result message will carry it."""
    isError: bool


class ExtensionErrorEvent(TypedDict):
    """A hook raised; the loop reported it and went on without that hook's change."""

    type: Literal["extension_error"]
    extensionPath: str
    event: str
    error: str


# -- session events -------------------------------------------------------------------------------


class AgentSettledEvent(TypedDict):
    type: Literal["agent_settled"]


class QueueUpdateEvent(TypedDict):
    type: Literal["queue_update"]
    steering: list[str]
    followUp: list[str]


class CompactionStartEvent(TypedDict):
    type: Literal["compaction_start"]
    reason: CompactionReason


class CompactionEndEvent(TypedDict):
    type: Literal["compaction_end"]
    reason: CompactionReason
    result: NotRequired[dict[str, Any]]
    """CompactionResult (summary, firstKeptEntryId, tokensBefore, estimatedTokensAfter, ...); absent on failure."""
    aborted: bool
    willRetry: bool
    errorMessage: NotRequired[str]
    tokensBefore: NotRequired[int]
    """Ours: the context estimate before (equals `result.tokensBefore` on success)."""
    tokensAfter: NotRequired[int]
    """Ours: `result.estimatedTokensAfter` on success."""
    notice: NotRequired[str]
    """Ours: one line when the model's summary failed at first: the retry succeeded, or a mechanical
    summary replaced it (`result.details.fallback`); compaction/fallback.py."""


class PromptCancelledEvent(TypedDict):
    """Ours: the run was aborted before its prompts were sent (e.g. Ctrl+C during the compaction
    that runs before a prompt); nothing of them was saved, so a UI can give the text back."""

    type: Literal["prompt_cancelled"]
    messages: list[AgentMessage]


class CompactionSkippedEvent(TypedDict):
    """Ours: an automatic compaction was due but was not run (anti-thrash); `message` is one line
    saying why and what to do."""

    type: Literal["compaction_skipped"]
    reason: CompactionReason
    message: str
    tokens: int


class CompactionBackgroundStartEvent(TypedDict):
    """Ours (compaction.backgroundTokens): a summary is being written while the conversation goes
    on; it is applied at a later turn boundary (`compaction_start`/`compaction_end` with
    `background: true`) or discarded."""

    type: Literal["compaction_background_start"]
    tokens: int
    firstKeptEntryId: str
    mark: NotRequired[int]
    """The mark passed: `backgroundTokens`, or the one learned for "auto" (absent for a resumed span)."""


class CompactionBackgroundDiscardedEvent(TypedDict):
    """Ours: a background summary could not be applied; `discarded` counts them in this session."""

    type: Literal["compaction_background_discarded"]
    reason: str
    discarded: int


class CompactionProgressEvent(TypedDict):
    """Ours: a summary written in several requests (a span over the summarizer's window) finished
    one of them: `done` of `total` chunk notes (`stage` "chunks") or merges of a merge level
    ("merge"; the last level has one), `elapsedMs` since the summary began. `part` is "history"
    or "turnPrefix"; `background` is true for a summary written while the conversation goes on.
    Each stage begins with `done` 0."""

    type: Literal["compaction_progress"]
    reason: CompactionReason
    background: bool
    part: str
    stage: Literal["chunks", "merge"]
    done: int
    total: int
    elapsedMs: int


class EntryAppendedEvent(TypedDict):
    type: Literal["entry_appended"]
    entry: dict[str, Any]


class AutoRetryStartEvent(TypedDict):
    type: Literal["auto_retry_start"]
    attempt: int
    maxAttempts: int
    delayMs: int
    errorMessage: str
    serverRequested: NotRequired[bool]
    """Ours: present (true) when the wait is the server's Retry-After, not the back-off."""


class SummarizationRetryScheduledEvent(TypedDict):
    """A summary request failed transiently and is retried after `delayMs` (Pi's event, plus
    `source`: "compaction" or "branch_summary")."""

    type: Literal["summarization_retry_scheduled"]
    source: str
    attempt: int
    maxAttempts: int
    delayMs: float
    errorMessage: str


class SummarizationRetryAttemptStartEvent(TypedDict):
    type: Literal["summarization_retry_attempt_start"]
    source: str


class SummarizationRetryFinishedEvent(TypedDict):
    type: Literal["summarization_retry_finished"]
    source: str
    success: bool
    attempt: int
    finalError: NotRequired[str]


class AutoRetryEndEvent(TypedDict):
    type: Literal["auto_retry_end"]
    success: bool
    attempt: int
    finalError: NotRequired[str]


class ThinkingLevelChangedEvent(TypedDict):
    type: Literal["thinking_level_changed"]
    level: str


AgentEvent: TypeAlias = (
    AgentStartEvent
    | AgentEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | MessageStartEvent
    | MessageUpdateEvent
    | MessageEndEvent
    | ToolExecutionStartEvent
    | ToolExecutionUpdateEvent
    | ToolExecutionEndEvent
    | ExtensionErrorEvent
    | AgentSettledEvent
    | QueueUpdateEvent
    | CompactionStartEvent
    | CompactionEndEvent
    | CompactionSkippedEvent
    | CompactionBackgroundStartEvent
    | CompactionBackgroundDiscardedEvent
    | CompactionProgressEvent
    | PromptCancelledEvent
    | EntryAppendedEvent
    | AutoRetryStartEvent
    | AutoRetryEndEvent
    | SummarizationRetryScheduledEvent
    | SummarizationRetryAttemptStartEvent
    | SummarizationRetryFinishedEvent
    | ThinkingLevelChangedEvent
)

LOOP_EVENT_TYPES: tuple[str, ...] = (
    "agent_start",
    "agent_end",
    "turn_start",
    "turn_end",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
)
"""Wire strings of the loop's events, in the spec's order (snapshotted by tests)."""

SESSION_EVENT_TYPES: tuple[str, ...] = (
    "agent_settled",
    "queue_update",
    "compaction_start",
    "compaction_end",
    "entry_appended",
    "auto_retry_start",
    "auto_retry_end",
    "thinking_level_changed",
    "extension_error",
    "compaction_skipped",
    "prompt_cancelled",
    "summarization_retry_scheduled",
    "summarization_retry_attempt_start",
    "summarization_retry_finished",
    "compaction_background_start",
    "compaction_background_discarded",
    "compaction_progress",
)

AGENT_EVENT_TYPES: tuple[str, ...] = LOOP_EVENT_TYPES + SESSION_EVENT_TYPES


def to_json_event(event: AgentEvent) -> dict[str, Any]:
    """The event as JSON mode writes it (spec 03 §9): `message_update` loses the cumulative
    snapshot and keeps `{type, assistantMessageEvent}` with the event's own `partial` dropped."""
    if event["type"] != "message_update":
        return dict(event)
    inner: dict[str, Any] = {k: v for k, v in event["assistantMessageEvent"].items() if k != "partial"}
    if inner.get("type") == "toolcall_start":
        partial: Any = event["assistantMessageEvent"].get("partial") or {}
        index = inner.get("contentIndex")
        content = partial.get("content") or []
        if isinstance(index, int) and 0 <= index < len(content):
            block = content[index]
            inner["id"] = block.get("id")
            inner["toolName"] = block.get("name")
    usage = event["message"].get("usage")
    return {"type": "message_update", "usage": usage, "assistantMessageEvent": inner}

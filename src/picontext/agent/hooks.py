"""Extension hooks: plain Python callables registered in code (Pi extensions/types.ts, runner.ts).

    hooks = Hooks()
    hooks.on("context", lambda messages: [m for m in messages if not is_noise(m)])
    hooks.on("tool_call", lambda call: ToolCallDecision(block=True, reason="read-only mode")
             if call.tool_name == "write" else None)
    session = AgentSession(manager, model=model, hooks=hooks)

Hooks may be sync or async. A hook that raises is reported (an `extension_error` event) and
skipped; it never breaks the run. Plugins installed as packages register through the entry-point
group `picontext.hooks`: each entry point names a callable `register(hooks)` that calls
`hooks.on(...)`; `load_entry_point_hooks(hooks)` loads them all (a failing plugin is reported,
not raised).

Events and their contracts:

* `context(messages) -> list | None`: before every provider request, gets a deep copy of the
  request's messages without system messages; return a replacement list or edit in place.
* `tool_call(call: ToolCallInfo) -> ToolCallDecision | None`: before a tool runs; may block it.
* `tool_result(call: ToolCallInfo, result: AgentToolResult) -> AgentToolResult | None`: after a
  tool ran; may replace the result.
* `session_before_compact(event) -> dict | None`: before a compaction summary is written.
  `event` = `{preparation, branchEntries, customInstructions, reason, willRetry, signal}`.
  Return `{"cancel": True}` to cancel (stops the chain), or `{"compaction": {"summary",
  "firstKeptEntryId", "tokensBefore", "details"?}}` to supply the summary; the last non-empty
  result wins.
* `session_compact(event)`: after the compaction entry is appended; `{compactionEntry,
  fromExtension, reason, willRetry}`.
* `session_compact_failed(event)`: `{reason, errorMessage, aborted, willRetry, fromExtension}`.
* `session_before_tree(event) -> dict | None`: before a tree navigation; `{preparation: {targetId,
  oldLeafId, commonAncestorId, entriesToSummarize, userWantsSummary, customInstructions,
  replaceInstructions, label}, signal}`. Return `{"cancel": True}`, or `{"summary": {"summary",
  "details"?}}` (used when a summary was asked for), or overrides of `customInstructions`,
  `replaceInstructions`, `label`.
* `session_tree(event)`: after a navigation; `{newLeafId, oldLeafId, summaryEntry, fromExtension}`.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, get_args

from picontext.agent.types import AgentToolResult
from picontext.ai.types import AgentMessage

__all__ = [
    "ENTRY_POINT_GROUP",
    "HOOK_EVENTS",
    "HookError",
    "HookEvent",
    "Hooks",
    "ToolCallDecision",
    "ToolCallInfo",
    "call_handler",
    "handler_name",
    "load_entry_point_hooks",
]

ENTRY_POINT_GROUP = "picontext.hooks"

HookEvent: TypeAlias = Literal[
    "context",
    "tool_call",
    "tool_result",
    "session_before_compact",
    "session_compact",
    "session_compact_failed",
    "session_before_tree",
    "session_tree",
]
HOOK_EVENTS: tuple[str, ...] = get_args(HookEvent)  # wire strings, in the order declared above


@dataclass(slots=True)
class ToolCallInfo:
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]


@dataclass(slots=True)
class ToolCallDecision:
    """Returned by a `tool_call` hook: `block=True` turns the call into an error result."""

    block: bool = False
    reason: str | None = None


@dataclass(slots=True)
class HookError:
    """One hook failure: which hook (`path`), on which event, and the error text."""

    path: str
    event: str
    error: str


def handler_name(fn: Callable[..., Any]) -> str:
    """How a hook is named in `extension_error` events: module and qualified name."""
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"


async def call_handler(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a sync or async hook; its result (awaited when it is awaitable)."""
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


@dataclass
class Hooks:
    """Registered callables per event, called in registration order.

    Invariant: `_handlers` only has keys of `HOOK_EVENTS`.
    """

    _handlers: dict[str, list[Callable[..., Any]]] = field(default_factory=dict)

    def on(self, event: HookEvent, handler: Callable[..., Any]) -> Callable[[], None]:
        """Register `handler` for `event`; returns a function that unregisters it."""
        if event not in HOOK_EVENTS:
            raise ValueError(f"unknown hook event {event!r}; use one of {', '.join(HOOK_EVENTS)}")
        handlers = self._handlers.setdefault(event, [])
        handlers.append(handler)
        return lambda: handlers.remove(handler) if handler in handlers else None

    def handlers(self, event: HookEvent) -> list[Callable[..., Any]]:
        return list(self._handlers.get(event, ()))

    def has(self, event: HookEvent) -> bool:
        return bool(self._handlers.get(event))

    async def run_context(self, messages: Sequence[AgentMessage]) -> tuple[Sequence[AgentMessage], list[HookError]]:
        """Apply every `context` hook to a deep copy of `messages` (system messages are not shown
        to the hooks and stay at the head). Returns the messages and the failures."""
        if not self.has("context"):
            return messages, []
        system = [m for m in messages if m.get("role") == "system"]
        current: list[AgentMessage] = copy.deepcopy([m for m in messages if m.get("role") != "system"])
        errors: list[HookError] = []
        for fn in self.handlers("context"):
            try:
                result = await call_handler(fn, current)
            except Exception as exc:
                errors.append(HookError(handler_name(fn), "context", f"{type(exc).__name__}: {exc}"))
                continue
            if isinstance(result, list):
                current = result
        return [*system, *current], errors

    async def run_tool_call(self, call: ToolCallInfo) -> tuple[ToolCallDecision | None, list[HookError]]:
        """First blocking decision of the `tool_call` hooks, or None."""
        errors: list[HookError] = []
        for fn in self.handlers("tool_call"):
            try:
                decision = await call_handler(fn, call)
            except Exception as exc:
                errors.append(HookError(handler_name(fn), "tool_call", f"{type(exc).__name__}: {exc}"))
                continue
            if isinstance(decision, ToolCallDecision) and decision.block:
                return decision, errors
        return None, errors

    async def run_tool_result(
        self, call: ToolCallInfo, result: AgentToolResult
    ) -> tuple[AgentToolResult, list[HookError]]:
        errors: list[HookError] = []
        for fn in self.handlers("tool_result"):
            try:
                replaced = await call_handler(fn, call, result)
            except Exception as exc:
                errors.append(HookError(handler_name(fn), "tool_result", f"{type(exc).__name__}: {exc}"))
                continue
            if isinstance(replaced, AgentToolResult):
                result = replaced
        return result, errors

    async def emit(self, event: HookEvent, *args: Any) -> tuple[list[Any], list[HookError]]:
        """Call every handler of `event` with `args`; their results and failures (for the
        compaction/tree layers, which interpret the results)."""
        results: list[Any] = []
        errors: list[HookError] = []
        for fn in self.handlers(event):
            try:
                results.append(await call_handler(fn, *args))
            except Exception as exc:
                errors.append(HookError(handler_name(fn), event, f"{type(exc).__name__}: {exc}"))
        return results, errors


def load_entry_point_hooks(hooks: Hooks, group: str = ENTRY_POINT_GROUP) -> list[HookError]:
    """Load every installed plugin of the entry-point `group` into `hooks`.

    Each entry point must name a callable taking the `Hooks` object (`register(hooks)`).
    Returns the failures (import errors, a register function that raised); never raises.
    """
    from importlib.metadata import entry_points

    errors: list[HookError] = []
    for ep in entry_points(group=group):
        try:
            register = ep.load()
            register(hooks)
        except Exception as exc:
            errors.append(HookError(f"{ep.name} ({ep.value})", "load", f"{type(exc).__name__}: {exc}"))
    return errors

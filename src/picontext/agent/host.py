"""What the session's helpers may ask of the session: small host interfaces.

`RetryRuntime`, `CompactionRuntime`, tree navigation and the context tools each see the
`AgentSession` only through one of these protocols, never its private state. The protocols
are structural: `AgentSession` satisfies all of them, and a test (or another host) can pass any
object with the same members.

Events go out through `emit`; extension hooks through `run_hook` (which reports handler
errors as `extension_error` events) or, for handlers the caller drives one by one,
`report_hook_error`.

Blocking and background compaction meet the same way: `CompactionRuntime` sees the background
summaries only as `BackgroundSummaries`, and `BackgroundCompaction` sees the runtime only as
`BackgroundHost` (neither module imports the other; `AgentSession` joins them). Everything a
background job writes goes through the host's async writes, inside the store's non-blocking
writer section.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from picontext.agent.events import CompactionReason
    from picontext.agent.hooks import Hooks
    from picontext.ai.event_stream import AbortSignal
    from picontext.ai.models import Model
    from picontext.ai.providers import StreamOptions
    from picontext.ai.retry import RetryPolicy
    from picontext.compaction.completion import Completion
    from picontext.compaction.fallback import AttemptFailure, OnFailure
    from picontext.compaction.mask import MaskEdit
    from picontext.compaction.prepare import CompactionPreparation
    from picontext.compaction.prompt_cache import SessionRequest
    from picontext.compaction.settings import CompactionSettings, Settings
    from picontext.compaction.summarize import SummaryResult
    from picontext.session.manager import SessionManager

__all__ = [
    "BackgroundHost",
    "BackgroundSummaries",
    "CompactionHost",
    "CompactionPlan",
    "ContextToolHost",
    "EventHost",
    "HookHost",
    "NavigationHost",
    "RetryHost",
]


class EventHost(Protocol):
    """Delivers events to the session's listeners."""

    async def emit(self, event: Any) -> None: ...


class HookHost(EventHost, Protocol):
    """Runs extension hooks; handler errors become `extension_error` events."""

    hooks: Hooks

    async def run_hook(self, event: Any, payload: Any) -> list[Any]: ...

    async def report_hook_error(self, path: str, event: str, exc: Exception) -> None: ...


class RetryHost(EventHost, Protocol):
    """What `RetryRuntime` needs: the model (its window), the policy, omitting a failed attempt."""

    model: Model
    retry_policy: RetryPolicy

    async def omit(self, messages: Sequence[Any]) -> list[str]: ...


class CompactionHost(HookHost, Protocol):
    """What `CompactionRuntime` needs from its session."""

    manager: SessionManager
    model: Model
    settings: Settings
    retry_policy: RetryPolicy
    summarizer: Completion | None
    stream_fn: Any
    last_request: SessionRequest | None
    """The provider request the session sent last (a summary may reuse its cached prefix)."""

    @property
    def thinking_level(self) -> str: ...

    def request_options(self) -> StreamOptions:
        """Stream options for a request, with the session's HTTP client."""
        ...

    def entry_id_of(self, message: Any) -> str | None: ...

    async def omit(self, messages: Sequence[Any]) -> list[str]: ...

    def has_queued_messages(self) -> bool: ...


class NavigationHost(HookHost, Protocol):
    """What tree navigation needs: the file, the branch-summary settings and a summarizer."""

    manager: SessionManager
    settings: Settings

    def summary_completion(self) -> Completion: ...


class ContextToolHost(Protocol):
    """What the context tools need: the file, the usage numbers and a way to ask for compaction."""

    manager: SessionManager

    def get_context_usage(self) -> Any: ...

    def estimated_context_tokens(self) -> int: ...

    def compaction_threshold(self) -> int | None: ...

    @property
    def auto_compaction_enabled(self) -> bool: ...

    def compaction_requests_left(self) -> int: ...

    def request_compaction(self, instructions: str) -> None:
        """Schedule a compaction before the next request; raises `ValueError` (with the reason
        as its text) when the per-prompt budget is used up or there is nothing to compact."""
        ...


@dataclasses.dataclass(slots=True)
class CompactionPlan:
    """What a compaction will summarize and keep, chosen before its summary is written."""

    preparation: CompactionPreparation
    settings: CompactionSettings
    predicted_after: int
    span_id: str | None = None
    """A resumed span (compaction.resumable): the compaction closes this one instead of recording a new one."""
    masks: list[MaskEdit] = dataclasses.field(default_factory=list)
    """Ours: kept tool results too large for any cut to leave out, shortened by context edits
    appended with the compaction entry (`mask.plan_kept_masks`)."""


class BackgroundHost(EventHost, Protocol):
    """What a background summary needs from the blocking runtime: its facts, its plan and
    summary request, and writes made in the store's async writer section."""

    @property
    def running(self) -> bool:
        """A blocking compaction is running."""
        ...

    def settings(self) -> CompactionSettings: ...

    def threshold(self) -> int | None: ...

    def summary_budget(self) -> int:
        """Tokens a summary may take (what a compaction leaves: kept tail + this)."""
        ...

    def plan(self, reason: CompactionReason) -> tuple[CompactionPlan | None, str | None]: ...

    def completion(self) -> Completion: ...

    def summary_request(self, plan: CompactionPlan, completion: Completion, signal: AbortSignal, *,
                        reason: CompactionReason, background: bool, on_failure: OnFailure,
                        instructions: str | None = None) -> Awaitable[SummaryResult]: ...

    def leaf_id(self) -> str | None: ...

    def branch(self) -> list[Any]: ...

    async def record_span(self, plan: CompactionPlan, *, reason: CompactionReason, model: str | None,
                          instructions: str | None = None) -> str: ...

    async def end_span(self, span_id: str, outcome: str) -> None: ...

    async def record_failure(self, failure: AttemptFailure, prep: CompactionPreparation, reason: str,
                             model_ref: str | None) -> None: ...

    async def append_compaction(self, summary: str, first_kept: str, tokens_before: int, details: Any,
                                usage: Any) -> str: ...

    async def announce(
        self, reason: CompactionReason, will_retry: bool, entry_id: str, summary: str, first_kept: str,
        tokens_before: int, details: Any, usage: Any, *, from_extension: bool, extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]: ...


class BackgroundSummaries(Protocol):
    """What the blocking runtime asks of background compaction (compaction.backgroundTokens)."""

    @property
    def enabled(self) -> bool: ...

    @property
    def active(self) -> bool:
        """A background summary is being written (or waits to be applied)."""
        ...

    async def on_boundary(self, tokens: int) -> bool: ...

    async def take_over(self, signal: AbortSignal | None) -> bool | None: ...

    async def start(self, tokens: int, plan: CompactionPlan | None = None, span_id: str | None = None, *,
                    mark: int | None = None) -> bool: ...

    async def cancel(self, reason: str) -> None: ...

    def cancel_now(self) -> None: ...

    def compacted(self) -> None:
        """A compaction was appended: background summaries may start again."""
        ...

    def timing(self) -> AbstractContextManager[None]:
        """Around a blocking summary request: its duration teaches the pace (backgroundTokens "auto")."""
        ...

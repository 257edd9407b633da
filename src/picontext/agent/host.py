"""What the session's helpers may ask of the session: small host interfaces.

`RetryRuntime`, `CompactionRuntime`, tree navigation and the context tools each see the
`AgentSession` only through one of these protocols, never its private state. The protocols
are structural: `AgentSession` satisfies all of them, and a test (or another host) can pass any
object with the same members.

Events go out through `emit`; extension hooks through `run_hook` (which reports handler
errors as `extension_error` events) or, for handlers the caller drives one by one,
`report_hook_error`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from picontext.agent.hooks import Hooks
    from picontext.ai.models import Model
    from picontext.ai.providers import StreamOptions
    from picontext.ai.retry import RetryPolicy
    from picontext.compaction.completion import Completion
    from picontext.compaction.prompt_cache import SessionRequest
    from picontext.compaction.settings import Settings
    from picontext.session.manager import SessionManager

__all__ = ["CompactionHost", "ContextToolHost", "EventHost", "HookHost", "NavigationHost", "RetryHost"]


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

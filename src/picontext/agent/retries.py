"""Session-level retries of transient provider errors (spec 03 §6, Pi `_prepareRetry`).

A failed reply whose error is transient (`is_retryable_error`: not an overflow, not a quota or
billing error) is omitted from the context with a `context_edit`, the session waits
`retry_delay_ms(policy, attempt)` or the server's Retry-After (abortable; decided by the one
retry loop, `picontext.ai.retrying`) and continues the run. Events:

    agent_end{willRetry: true}  auto_retry_start{attempt, maxAttempts, delayMs, errorMessage}
    entry_appended(context_edit)  ...sleep...  agent_start ... auto_retry_end{success, attempt}

Ours (docs/divergences.md, "Agent runtime"): an aborted attempt closes the sequence as
cancelled (`success: false`, "Retry cancelled"), never as a success; and a retry runs the
threshold check before its request (the reference sends it unchecked).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from picontext.ai.event_stream import AbortSignal, aborts_with
from picontext.ai.retry import RetryPolicy, is_retryable_error
from picontext.ai.retrying import RetryAfterSink, capture_retry_after, plan_retry, sleep_unless_aborted

if TYPE_CHECKING:
    from picontext.agent.host import RetryHost

__all__ = ["RETRY_CANCELLED", "RetryRuntime", "retry_policy_from_settings"]

RETRY_CANCELLED = "Retry cancelled"
Sleep = Callable[[float], Awaitable[None]]


def retry_policy_from_settings(data: dict[str, Any] | None) -> RetryPolicy:
    """The `retry` section of settings.json (`enabled`, `maxRetries`, `baseDelayMs`, `maxAgentDelayMs`)."""
    section = (data or {}).get("retry") or {}
    default = RetryPolicy()
    return RetryPolicy(
        enabled=bool(section.get("enabled", default.enabled)),
        max_retries=int(section.get("maxRetries", default.max_retries)),
        base_delay_ms=section.get("baseDelayMs", default.base_delay_ms),
        max_agent_delay_ms=section.get("maxAgentDelayMs", default.max_agent_delay_ms),
    )


class RetryRuntime:
    """Retry state of one session. Invariant: `attempt > 0` exactly while a sequence is open.

    The decision and the wait are the one retry loop's (`picontext.ai.retrying`): `plan_retry`
    with the Retry-After the failed request's response carried (`sink`, filled while the
    session runs inside `capture()`), and `sleep_unless_aborted`.
    """

    def __init__(self, session: RetryHost, sleep: Sleep | None = None) -> None:
        self.s = session
        self.attempt = 0
        self.sleeping: AbortSignal | None = None
        self.sink = RetryAfterSink()
        self._sleep = sleep or asyncio.sleep

    @property
    def policy(self) -> RetryPolicy:
        return self.s.retry_policy

    def capture(self) -> contextlib.AbstractContextManager[RetryAfterSink]:
        """Around a run: requests made inside it report their Retry-After to `sink`."""
        return capture_retry_after(self.sink)

    def is_retryable(self, message: Any) -> bool:
        return is_retryable_error(message, int(self.s.model.get("contextWindow") or 0), self.s.model.get("baseUrl"))

    def will_retry(self, messages: list[Any], aborted: bool) -> bool:
        """`agent_end.willRetry` (spec 03 §6.3)."""
        last = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
        if aborted or last is None:
            return False
        plan = plan_retry(self.policy, self.attempt, last, context_window=int(self.s.model.get("contextWindow") or 0),
                          retry_after_s=self.sink.latest, base_url=self.s.model.get("baseUrl"))
        return plan is not None and plan.wait is not None

    async def prepare(self, message: Any, signal: AbortSignal | None) -> bool:
        """Start retry number `attempt + 1` for `message`: announce, omit, sleep. False = no retry
        (then an open sequence is closed: exhausted, over the delay cap, or cancelled)."""
        plan = plan_retry(
            self.policy, self.attempt, message,
            context_window=int(self.s.model.get("contextWindow") or 0), retry_after_s=self.sink.take(),
            base_url=self.s.model.get("baseUrl"),
        )
        if plan is None:
            return False
        if plan.wait is None:
            if plan.final_error != message.get("errorMessage"):  # the server asked for too long a wait
                await self.close_exhausted({"errorMessage": plan.final_error}, force=True)
            return False
        wait = plan.wait
        self.attempt = wait.attempt
        await self.s.emit({
            "type": "auto_retry_start", "attempt": wait.attempt, "maxAttempts": wait.max_attempts,
            "delayMs": _ms(wait.delay_ms), "errorMessage": wait.error_message,
            **({"serverRequested": True} if wait.server_requested else {}),
        })
        await self.s.omit([message])
        self.sleeping = sleeping = AbortSignal()
        try:
            with aborts_with(signal, sleeping):
                completed = await sleep_unless_aborted(self._sleep, wait.delay_ms / 1000, sleeping)
        finally:
            self.sleeping = None
        if not completed:
            await self.close_cancelled()
            return False
        return True

    async def on_assistant_end(self, message: Any) -> None:
        """A reply that is neither an error nor aborted ends an open sequence successfully."""
        if self.attempt > 0 and message.get("stopReason") not in ("error", "aborted"):
            attempt, self.attempt = self.attempt, 0
            await self.s.emit({"type": "auto_retry_end", "success": True, "attempt": attempt})

    async def close_cancelled(self) -> None:
        if self.attempt > 0:
            attempt, self.attempt = self.attempt, 0
            await self.s.emit(
                {"type": "auto_retry_end", "success": False, "attempt": attempt, "finalError": RETRY_CANCELLED}
            )

    async def close_exhausted(self, message: Any, *, force: bool = False) -> None:
        """End an open sequence with the last error; `force`: also when no retry was made yet
        (the very first failure asked for a wait beyond the cap), so the reason is announced."""
        if self.attempt > 0 or force:
            attempt, self.attempt = self.attempt, 0
            await self.s.emit({
                "type": "auto_retry_end", "success": False, "attempt": attempt,
                "finalError": message.get("errorMessage") or "Unknown error",
            })

    def abort(self) -> None:
        """Cancel a back-off sleep (Pi `abortRetry`)."""
        if self.sleeping is not None:
            self.sleeping.abort("retry cancelled")


def _ms(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value

"""Session-level retries of transient provider errors (spec 03 §6, Pi `_prepareRetry`).

A failed reply whose error is transient (`is_retryable_error`: not an overflow, not a quota or
billing error) is omitted from the context with a `context_edit`, the session waits
`retry_delay_ms(policy, attempt)` (abortable) and continues the run. Events:

    agent_end{willRetry: true}  auto_retry_start{attempt, maxAttempts, delayMs, errorMessage}
    entry_appended(context_edit)  ...sleep...  agent_start ... auto_retry_end{success, attempt}

Ours (docs/divergences.md, "Agent runtime"): an aborted attempt closes the sequence as
cancelled (`success: false`, "Retry cancelled"), never as a success; and a retry runs the
threshold check before its request (the reference sends it unchecked).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from picontext.ai.event_stream import AbortSignal
from picontext.ai.retry import RetryPolicy, is_retryable_error, retry_delay_ms

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
    """Retry state of one session. Invariant: `attempt > 0` exactly while a sequence is open."""

    def __init__(self, session: RetryHost, sleep: Sleep | None = None) -> None:
        self.s = session
        self.attempt = 0
        self.sleeping: AbortSignal | None = None
        self._sleep = sleep or asyncio.sleep

    @property
    def policy(self) -> RetryPolicy:
        return self.s.retry_policy

    def is_retryable(self, message: Any) -> bool:
        return is_retryable_error(message, int(self.s.model.get("contextWindow") or 0))

    def will_retry(self, messages: list[Any], aborted: bool) -> bool:
        """`agent_end.willRetry` (spec 03 §6.3)."""
        policy = self.policy
        if aborted or not policy.enabled or self.attempt >= policy.max_retries:
            return False
        last = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
        return last is not None and self.is_retryable(last)

    async def prepare(self, message: Any, signal: AbortSignal | None) -> bool:
        """Start retry number `attempt + 1` for `message`: announce, omit, sleep. False = no retry."""
        policy = self.policy
        if not policy.enabled:
            return False
        self.attempt += 1
        if self.attempt > policy.max_retries:
            self.attempt -= 1
            return False
        delay = retry_delay_ms(policy, self.attempt)
        await self.s.emit({
            "type": "auto_retry_start", "attempt": self.attempt, "maxAttempts": policy.max_retries,
            "delayMs": delay, "errorMessage": message.get("errorMessage") or "Unknown error",
        })
        await self.s.omit([message])
        sleeping = AbortSignal()
        if signal is not None:
            signal.add_listener(lambda: sleeping.abort("aborted"))
        self.sleeping = sleeping
        try:
            completed = await _sleep_unless(self._sleep, delay / 1000, sleeping)
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

    async def close_exhausted(self, message: Any) -> None:
        if self.attempt > 0:
            attempt, self.attempt = self.attempt, 0
            await self.s.emit({
                "type": "auto_retry_end", "success": False, "attempt": attempt,
                "finalError": message.get("errorMessage") or "Unknown error",
            })

    def abort(self) -> None:
        """Cancel a back-off sleep (Pi `abortRetry`)."""
        if self.sleeping is not None:
            self.sleeping.abort("retry cancelled")


async def _sleep_unless(sleep: Sleep, seconds: float, signal: AbortSignal) -> bool:
    if signal.aborted:
        return False
    loop = asyncio.get_running_loop()
    fired = asyncio.Event()
    signal.add_listener(lambda: loop.call_soon_threadsafe(fired.set))
    sleeper = asyncio.ensure_future(sleep(seconds))
    waiter = asyncio.ensure_future(fired.wait())
    try:
        await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sleeper, waiter):
            if not task.done():
                task.cancel()
        await asyncio.gather(sleeper, waiter, return_exceptions=True)
    return not signal.aborted

"""The one retry loop: every caller that retries a model call uses the pieces in this module.

Callers: `complete_with_retry` (summaries, `picontext.compaction.completion.StreamCompletion`,
evaluations) and the agent session's `RetryRuntime` (picontext.agent.retries), which cannot
wrap a call because a failed turn is persisted, omitted and re-run by the agent loop. Both
decide with `plan_retry` and wait with `sleep_unless_aborted`; the provider driver itself
(`_http.open_stream`) never retries.

`plan_retry(policy, attempt, message, context_window, retry_after_s)`:

* a reply that is not an error is never retried; an aborted reply neither;
* an error is retried only when `is_retryable_error(message, context_window, base_url)` says it
  is transient: a context overflow never is (it goes to compaction), nor are quota/billing
  errors, nor a connection refused by a server on this machine (ours: it fails at once);
* retry number n waits `retry_delay_ms(policy, n)` (base x 2^(n-1), capped by
  `policy.max_agent_delay_ms`), or the server's `retry-after` / `retry-after-ms` when the failed
  HTTP response carried one (read through `_http.capture_retry_after`). A server delay above the
  cap is not waited out: the loop stops, the error text extended with "Server requested Ns
  retry delay (max: Ms)";
* at most `policy.max_retries` retries.

Every wait is announced before it starts (`RetryWait`: attempt, delay, whether the server asked
for it, the error), so a user sees why nothing happens: the agent emits `auto_retry_start`,
summaries `summarization_retry_scheduled`, print mode writes one line on stderr for each.

`sleep` is injectable (seconds, like `asyncio.sleep`); tests pass a recorder and never sleep.

`complete_summarization(...)` is `complete_with_retry` for summary requests (spec 02 §7.5): no
prompt cache writes (`cache_retention="none"`) and a fresh session/routing id on every call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from picontext.ai._http import RetryAfterSink, capture_retry_after, default_client
from picontext.ai.event_stream import AbortSignal, AssistantMessageStream, wait_unless_aborted
from picontext.ai.models import Model
from picontext.ai.providers._base import ABORTED_TEXT, Context, StreamOptions, fail, new_output
from picontext.ai.retry import DEFAULT_MAX_AGENT_RETRY_DELAY_MS, RetryPolicy, is_retryable_error, retry_delay_ms
from picontext.ai.types import AssistantMessage

__all__ = [
    "RetryAfterSink",
    "RetryCallbacks",
    "RetryPlan",
    "RetryWait",
    "capture_retry_after",
    "complete_summarization",
    "complete_with_retry",
    "plan_retry",
    "sleep_unless_aborted",
    "summarization_options",
]

Sleep = Callable[[float], Awaitable[None]]
StreamFn = Callable[[Model, Context, StreamOptions], AssistantMessageStream]


@dataclass(frozen=True, slots=True)
class RetryWait:
    """One announced wait before retry number `attempt` (1-based) of at most `max_attempts`."""

    attempt: int
    max_attempts: int
    delay_ms: float
    error_message: str
    server_requested: bool


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """What to do after a failed reply: `wait` before retrying, or stop (`wait` None) with
    `final_error` as the error text to report (the original, or extended by the delay cap)."""

    wait: RetryWait | None
    final_error: str


def plan_retry(
    policy: RetryPolicy,
    attempt: int,
    message: Mapping[str, Any],
    *,
    context_window: int | None = None,
    retry_after_s: float | None = None,
    base_url: str | None = None,
) -> RetryPlan | None:
    """The decision after reply `message` when `attempt` retries were already made.

    None: `message` is not a transient error (a success, an abort, an overflow, a quota error):
    nothing to retry. Otherwise a `RetryPlan` (see the module docstring).
    """
    if message.get("stopReason") != "error" or not is_retryable_error(message, context_window, base_url):
        return None
    error_text = str(message.get("errorMessage") or "Unknown error")
    max_attempts = policy.max_retries if policy.enabled else 0
    if attempt >= max_attempts:
        return RetryPlan(None, error_text)
    delay_ms = float(retry_delay_ms(policy, attempt + 1))
    if retry_after_s is not None:
        cap_ms = policy.max_agent_delay_ms
        cap_ms = DEFAULT_MAX_AGENT_RETRY_DELAY_MS if cap_ms is None else cap_ms
        if cap_ms > 0 and retry_after_s * 1000 > cap_ms:
            note = f"Server requested {math.ceil(retry_after_s)}s retry delay (max: {math.ceil(cap_ms / 1000)}s)."
            return RetryPlan(None, f"{error_text} {note}")
        delay_ms = retry_after_s * 1000
    wait = RetryWait(attempt + 1, max_attempts, delay_ms, error_text, retry_after_s is not None)
    return RetryPlan(wait, error_text)


@dataclass(frozen=True, slots=True)
class RetryCallbacks:
    """Progress hooks (Pi `RetryCallbacks`); each may be sync or async.

    on_retry_scheduled(attempt, max_attempts, delay_ms, error_message): before each back-off.
    on_retry_attempt_start(): after the back-off, before the retried call.
    on_retry_finished(success, attempt, error_message): once, when a loop that retried ends.
    """

    on_retry_scheduled: Callable[[int, int, float, str], Any] | None = None
    on_retry_attempt_start: Callable[[], Any] | None = None
    on_retry_finished: Callable[[bool, int, str | None], Any] | None = None


async def _call(fn: Callable[..., Any] | None, *args: Any) -> None:
    if fn is None:
        return
    result = fn(*args)
    if asyncio.iscoroutine(result):
        await result


# -- the loop --------------------------------------------------------------------------------------------


async def complete_with_retry(
    model: Model,
    context: Context,
    options: StreamOptions | None = None,
    *,
    policy: RetryPolicy | None = None,
    sleep: Sleep | None = None,
    callbacks: RetryCallbacks | None = None,
    stream_fn: StreamFn | None = None,
) -> AssistantMessage:
    """The final assistant message of a call retried per `policy` (see the module docstring).

    Never raises for a model-side failure (a missing key is still a `ConfigError` from the first
    `stream()` call). `sleep` defaults to `options.sleep`, then `asyncio.sleep`. Without
    `options.client`, one client serves every attempt (the connection is reused) and is closed
    at the end.
    """
    if stream_fn is None:
        from picontext.ai.stream import stream as default_stream

        stream_fn = default_stream
    opts = options or StreamOptions()
    policy = policy or RetryPolicy()
    nap: Sleep = sleep if sleep is not None else opts.sleep
    signal = opts.signal
    callbacks = callbacks or RetryCallbacks()
    window = model.get("contextWindow")

    own_client = opts.client is None
    client = default_client() if own_client else opts.client
    opts = dataclasses.replace(opts, client=client)

    attempt = 0
    last_error: str | None = None
    try:
        while True:
            if signal is not None and signal.aborted:
                # Not even started: the event stream of an already-aborted signal has no result.
                output = new_output(model)
                fail(output, "aborted", ABORTED_TEXT)
                if attempt:
                    await _call(callbacks.on_retry_finished, False, attempt, last_error)
                return output
            with capture_retry_after() as sink:
                message = await stream_fn(model, context, opts).result()
            plan = plan_retry(policy, attempt, message, context_window=window, retry_after_s=sink.take(),
                              base_url=model.get("baseUrl"))
            if plan is None or plan.wait is None:
                final = plan.final_error if plan is not None else message.get("errorMessage")
                if attempt:
                    ok = message["stopReason"] not in ("error", "aborted")
                    await _call(callbacks.on_retry_finished, ok, attempt, None if ok else final)
                if final is not None and final != message.get("errorMessage"):
                    return {**message, "errorMessage": final}
                return message
            wait = plan.wait
            attempt, last_error = wait.attempt, wait.error_message
            await _call(callbacks.on_retry_scheduled, wait.attempt, wait.max_attempts, wait.delay_ms,
                        wait.error_message)
            if not await sleep_unless_aborted(nap, wait.delay_ms / 1000, signal):
                await _call(callbacks.on_retry_finished, False, attempt, last_error)
                return {**message, "stopReason": "aborted", "errorMessage": ABORTED_TEXT}
            await _call(callbacks.on_retry_attempt_start)
    finally:
        if own_client and client is not None:
            await client.aclose()


async def sleep_unless_aborted(nap: Sleep, seconds: float, signal: AbortSignal | None) -> bool:
    """Sleep `seconds`; False as soon as `signal` fires (before or during the wait)."""
    if signal is None:
        await nap(seconds)
        return True
    if signal.aborted:
        return False
    sleeper = asyncio.ensure_future(nap(seconds))
    try:
        await wait_unless_aborted(sleeper, signal)
    finally:
        if not sleeper.done():
            sleeper.cancel()
            await asyncio.gather(sleeper, return_exceptions=True)
        elif not sleeper.cancelled() and sleeper.exception() is not None:
            raise sleeper.exception()  # type: ignore[misc]
    return not signal.aborted


# -- summarization requests --------------------------------------------------------------------------------


def summarization_options(options: StreamOptions | None = None) -> StreamOptions:
    """`options` for a summary request: no prompt-cache writes and a fresh routing/session id.

    With `cache_retention="none"` the providers send no cache markers, no `prompt_cache_key` and
    no session id header; the fresh id keeps a summary from being routed with the session's
    cached conversation (Pi `completeSummarization`: `cacheRetention: "none"`, `uuidv7()`).
    """
    return dataclasses.replace(options or StreamOptions(), cache_retention="none", session_id=str(uuid.uuid4()))


async def complete_summarization(
    model: Model,
    context: Context,
    options: StreamOptions | None = None,
    *,
    policy: RetryPolicy | None = None,
    sleep: Sleep | None = None,
    callbacks: RetryCallbacks | None = None,
    stream_fn: StreamFn | None = None,
) -> AssistantMessage:
    """`complete_with_retry` for a summary request (`summarization_options` applied)."""
    return await complete_with_retry(
        model,
        context,
        summarization_options(options),
        policy=policy,
        sleep=sleep,
        callbacks=callbacks,
        stream_fn=stream_fn,
    )

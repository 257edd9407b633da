"""The retry loop: one model call, retried on transient errors with exponential back-off.

`complete_with_retry(model, context, options, policy=...)` mirrors Pi `retryAssistantCall`
(pi-ai utils/retry.ts) with the session's classification (`AgentSession._isRetryableError`):

* a reply that is not an error (stop / length / toolUse) is returned at once;
* an aborted reply is returned at once and never retried;
* an error is retried only when `is_retryable_error(message, model["contextWindow"])` says it is
  transient: a context overflow never is (it goes to compaction), nor are quota/billing errors;
* retry number n waits `retry_delay_ms(policy, n)` (base × 2^(n−1), capped by
  `policy.max_agent_delay_ms`), or the server's `retry-after` / `retry-after-ms` when the failed
  HTTP response carried one. A server delay above the cap is not waited out: the loop stops and
  returns the error, its text extended with "Server requested Ns retry delay (max: Ms)";
* at most `policy.max_retries` retries; when they are used up the last error message is returned;
* an abort during the back-off ends the wait at once and returns the failed reply as "aborted".

`sleep` is injectable (seconds, like `asyncio.sleep`); tests pass a recorder and never sleep.

`complete_summarization(...)` is the same loop for summary requests (spec 02 §7.5): no prompt
cache writes (`cache_retention="none"`) and a fresh session/routing id on every call.

Retry-After is read from the failed response's headers through an httpx response hook on the
client the request uses (our own client when `options.client` is None, else the hook is added
once to the given client); the finished message itself carries no header data, so nothing about
it reaches a session file.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import math
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from picontext.ai._http import default_client, parse_retry_after
from picontext.ai.event_stream import AbortSignal, AssistantMessageStream
from picontext.ai.models import Model
from picontext.ai.providers._base import ABORTED_TEXT, Context, StreamOptions, fail, new_output
from picontext.ai.retry import RetryPolicy, is_retryable_error, retry_delay_ms
from picontext.ai.types import AssistantMessage

__all__ = ["RetryCallbacks", "complete_summarization", "complete_with_retry", "summarization_options"]

Sleep = Callable[[float], Awaitable[None]]
StreamFn = Callable[[Model, Context, StreamOptions], AssistantMessageStream]


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


# -- retry-after capture -------------------------------------------------------------------------------

_SINK: contextvars.ContextVar[list[float | None] | None] = contextvars.ContextVar("picontext_retry_after", default=None)


async def _record_retry_after(response: httpx.Response) -> None:
    sink = _SINK.get()
    if sink is not None and response.status_code >= 400:
        sink.append(parse_retry_after(response.headers))


def _install_hook(client: httpx.AsyncClient) -> None:
    hooks = client.event_hooks
    responses = list(hooks.get("response", []))
    if _record_retry_after not in responses:
        responses.append(_record_retry_after)
        client.event_hooks = {**hooks, "response": responses}


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
    `stream()` call). `sleep` defaults to `options.sleep`, then `asyncio.sleep`.
    """
    if stream_fn is None:
        from picontext.ai.stream import stream as default_stream

        stream_fn = default_stream
    opts = options or StreamOptions()
    policy = policy or RetryPolicy()
    nap: Sleep = sleep if sleep is not None else opts.sleep
    signal = opts.signal
    max_attempts = policy.max_retries if policy.enabled else 0
    callbacks = callbacks or RetryCallbacks()

    own_client = opts.client is None
    client = default_client() if own_client else opts.client
    assert client is not None
    _install_hook(client)
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
            sink: list[float | None] = []
            token = _SINK.set(sink)
            try:
                message = await stream_fn(model, context, opts).result()
            finally:
                _SINK.reset(token)
            reason = message["stopReason"]
            if reason != "error":
                if attempt:
                    await _call(callbacks.on_retry_finished, reason != "aborted", attempt, None)
                return message
            error_text = message.get("errorMessage") or "Unknown error"
            if attempt >= max_attempts or not is_retryable_error(message, model.get("contextWindow")):
                if attempt:
                    await _call(callbacks.on_retry_finished, False, attempt, error_text)
                return message
            attempt += 1
            last_error = error_text
            delay_ms = float(retry_delay_ms(policy, attempt))
            server_s = next((s for s in reversed(sink) if s is not None), None)
            if server_s is not None:
                cap_ms = policy.max_agent_delay_ms if policy.max_agent_delay_ms is not None else 60_000
                if cap_ms > 0 and server_s * 1000 > cap_ms:
                    note = f"Server requested {math.ceil(server_s)}s retry delay (max: {math.ceil(cap_ms / 1000)}s)."
                    await _call(callbacks.on_retry_finished, False, attempt, error_text)
                    return {**message, "errorMessage": f"{error_text} {note}"}
                delay_ms = server_s * 1000
            await _call(callbacks.on_retry_scheduled, attempt, max_attempts, delay_ms, error_text)
            if not await _sleep_unless_aborted(nap, delay_ms / 1000, signal):
                await _call(callbacks.on_retry_finished, False, attempt, last_error)
                return {**message, "stopReason": "aborted", "errorMessage": ABORTED_TEXT}
            await _call(callbacks.on_retry_attempt_start)
    finally:
        if own_client:
            await client.aclose()


async def _sleep_unless_aborted(nap: Sleep, seconds: float, signal: AbortSignal | None) -> bool:
    """Sleep `seconds`; False as soon as `signal` fires (before or during the wait)."""
    if signal is None:
        await nap(seconds)
        return True
    if signal.aborted:
        return False
    loop = asyncio.get_running_loop()
    fired = loop.create_future()

    def on_abort() -> None:
        def settle() -> None:
            if not fired.done():
                fired.set_result(None)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            settle()
        else:
            loop.call_soon_threadsafe(settle)

    signal.add_listener(on_abort)
    sleeper = asyncio.ensure_future(nap(seconds))
    try:
        await asyncio.wait({sleeper, fired}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        signal.remove_listener(on_abort)
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

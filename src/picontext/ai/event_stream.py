"""`AssistantMessageStream`: an async iterable of events plus `await result()` (Pi `EventStream`).

Two ways to feed a stream:

* push mode: `AssistantMessageStream()` and call `push(event)` / `end()` yourself (test doubles,
  extensions);
* producer mode: `AssistantMessageStream.from_producer(run, signal=...)`, where
  `run(stream)` pushes events. The stream owns the producer task, starts it as soon as it is
  created inside a running loop (or lazily on first use), and cancels it when the signal fires
  or the consuming task is cancelled. A producer never outlives its stream.

Contract (same as Pi's `StreamFunction`): once the call has started, failures are *events*, not
exceptions. The final event is `done` or `error`; `result()` returns the final message either way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from picontext.ai.events import AssistantMessageEvent
from picontext.ai.types import AssistantMessage

__all__ = ["AbortSignal", "AssistantMessageStream", "aborts_with", "wait_unless_aborted"]


class AbortSignal:
    """A one-shot cancellation flag, passed down explicitly (like the web `AbortSignal`).

    Invariant: once `aborted` is True it stays True; listeners run once, at `abort()` (or at
    registration when already aborted). `abort()` may be called from any thread.
    """

    __slots__ = ("_aborted", "_listeners", "reason")

    def __init__(self) -> None:
        self._aborted = False
        self._listeners: list[Callable[[], object]] = []
        self.reason: str | None = None

    @property
    def aborted(self) -> bool:
        return self._aborted

    def abort(self, reason: str | None = None) -> None:
        """Fire the signal; later calls do nothing."""
        if self._aborted:
            return
        self._aborted = True
        self.reason = reason
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener()

    def add_listener(self, listener: Callable[[], object]) -> None:
        if self._aborted:
            listener()
        else:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], object]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    @property
    def listener_count(self) -> int:
        """Listeners still registered (a waiter that ended must leave none behind)."""
        return len(self._listeners)


async def wait_unless_aborted(
    awaitable: Awaitable[Any], signal: AbortSignal | None, *, timeout: float | None = None  # noqa: ASYNC109
) -> bool:
    """Wait for `awaitable` until it is done, `signal` fires or `timeout` seconds pass.

    True when it finished (whatever its outcome: read it from the future), False otherwise. The
    future is not cancelled (the caller decides: give it a grace period, keep it for later, or
    cancel it), and the listener put on `signal` is removed however the wait ends, so a run's
    signal does not collect one listener per wait. `signal` may fire from any thread."""
    future = asyncio.ensure_future(awaitable)
    if future.done():
        return True
    if signal is None:
        await asyncio.wait({future}, timeout=timeout)
        return future.done()
    loop = asyncio.get_running_loop()
    fired = loop.create_future()

    def settle() -> None:
        if not fired.done():
            fired.set_result(None)

    def on_abort() -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            settle()
        else:
            loop.call_soon_threadsafe(settle)

    signal.add_listener(on_abort)
    try:
        await asyncio.wait({future, fired}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        signal.remove_listener(on_abort)
        fired.cancel()
    return future.done()


@contextlib.contextmanager
def aborts_with(parent: AbortSignal | None, child: AbortSignal) -> Iterator[AbortSignal]:
    """While the block runs, `parent` firing fires `child` too (a compaction or a retry wait
    inside a run); afterwards the parent holds no listener of it."""
    if parent is None:
        yield child
        return

    def forward() -> None:
        child.abort("aborted")

    parent.add_listener(forward)
    try:
        yield child
    finally:
        parent.remove_listener(forward)


_END: Any = object()


class AssistantMessageStream:
    """Events of one assistant response; `async for ev in s`, then `await s.result()`.

    Invariant: at most one terminal event (`done`/`error`) is delivered and it is the last one;
    `result()` resolves to the message it carries. Events pushed after it are dropped.
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._done = False
        self._final: AssistantMessage | None = None
        self._final_waiters: list[asyncio.Future[AssistantMessage]] = []
        self._producer: Callable[[AssistantMessageStream], Awaitable[None]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._signal: AbortSignal | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.cancel_requested = False
        """True once the consumer was cancelled or the signal fired (the producer reads it)."""

    # -- producer side -------------------------------------------------------------------------
    @classmethod
    def from_producer(
        cls,
        run: Callable[[AssistantMessageStream], Awaitable[None]],
        *,
        signal: AbortSignal | None = None,
    ) -> AssistantMessageStream:
        """A stream whose events come from `run(stream)`, started at once if a loop is running."""
        stream = cls()
        stream._producer = run
        stream._signal = signal
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return stream  # started lazily by the first consumer
        stream._ensure_started()
        return stream

    def push(self, event: AssistantMessageEvent) -> None:
        """Deliver one event; a `done`/`error` event resolves `result()` and ends the stream."""
        if self._done:
            return
        if event["type"] == "done":
            self._resolve(event["message"])
        elif event["type"] == "error":
            self._resolve(event["error"])
        self._queue.put_nowait(event)
        if self._done:
            self._queue.put_nowait(_END)

    def end(self, result: AssistantMessage | None = None) -> None:
        """End without a terminal event (push mode); `result` resolves `result()` if given."""
        if self._done:
            return
        if result is not None:
            self._resolve(result)
        self._done = True
        self._queue.put_nowait(_END)

    def _resolve(self, message: AssistantMessage) -> None:
        self._done = True
        self._final = message
        for fut in self._final_waiters:
            if not fut.done():
                fut.set_result(message)
        self._final_waiters.clear()

    def _ensure_started(self) -> None:
        if self._producer is None or self._task is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run_producer())
        if self._signal is not None:
            if self._signal.aborted:
                # Cancelling a task that has not started yet would skip the producer entirely
                # (no terminal event, consumers wait forever): let it run and see the signal.
                self.cancel_requested = True
            else:
                self._signal.add_listener(self._on_abort)

    def _on_abort(self) -> None:
        self.cancel_requested = True
        task, loop = self._task, self._loop
        if task is None or loop is None or task.done():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            task.cancel()
        else:
            loop.call_soon_threadsafe(task.cancel)

    async def _run_producer(self) -> None:
        assert self._producer is not None
        try:
            await self._producer(self)
        finally:
            if self._signal is not None:
                self._signal.remove_listener(self._on_abort)
            if not self._done:
                # A producer that returns without a terminal event is a bug; never hang consumers.
                self.end()

    # -- consumer side -------------------------------------------------------------------------
    def __aiter__(self) -> AsyncIterator[AssistantMessageEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[AssistantMessageEvent]:
        self._ensure_started()
        while True:
            try:
                item = await self._queue.get()
            except asyncio.CancelledError:
                self._cancel_producer()
                raise
            if item is _END:
                self._queue.put_nowait(_END)  # let a second iterator finish too
                return
            yield item

    async def result(self) -> AssistantMessage:
        """The final message (`done` or `error`), waiting for the stream to finish."""
        self._ensure_started()
        if self._final is not None:
            return self._final
        if self._done:
            raise RuntimeError("stream ended without a final message")
        fut: asyncio.Future[AssistantMessage] = asyncio.get_running_loop().create_future()
        self._final_waiters.append(fut)
        if self._task is not None:
            self._task.add_done_callback(lambda _t: self._fail_waiters())
        try:
            return await fut
        except asyncio.CancelledError:
            self._cancel_producer()
            raise

    def _fail_waiters(self) -> None:
        for fut in self._final_waiters:
            if not fut.done():
                fut.set_exception(RuntimeError("stream ended without a final message"))
        self._final_waiters.clear()

    def _cancel_producer(self) -> None:
        self.cancel_requested = True
        if self._task is not None and not self._task.done():
            self._task.cancel()

    @property
    def final_message(self) -> AssistantMessage | None:
        """The final message once the stream has ended (also after the consumer was cancelled)."""
        return self._final

    async def wait_closed(self) -> None:
        """Wait until the producer task has finished (after a cancel, for cleanup in tests)."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)


def loop_running() -> bool:
    """Whether this thread is inside a running asyncio loop (where a blocking wait would stall it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True

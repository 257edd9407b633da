"""The small completion interface every summary request goes through.

Summaries need one thing from a model: "given this system prompt and these messages, write at
most N tokens and give me the final assistant message". `Completion` is that contract, so any
provider can serve and tests script replies with a few lines of Python (see
`ScriptedCompletion`). `StreamCompletion` adapts it to `picontext.ai.stream`, adding what spec 02
§7.5 asks of every summarization request: no prompt-cache writes, a fresh routing id, and retries
of transient errors through the one retry loop (`picontext.ai.retrying`).

Contract of `Completion.__call__`: never raise for a model-side failure; return the assistant
message with `stopReason` "error"/"aborted"/"length" instead (Pi's stream contract). Raising is
reserved for configuration errors found before any request (no key, unknown API).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from picontext.ai.event_stream import AbortSignal
from picontext.ai.models import Model
from picontext.ai.request_gate import needs_serial_requests
from picontext.ai.retry import RetryPolicy
from picontext.ai.retrying import RetryCallbacks, complete_with_retry
from picontext.ai.types import empty_usage

if TYPE_CHECKING:
    from picontext.ai.providers import Context

__all__ = [
    "Completion",
    "CompletionOptions",
    "CompletionRequest",
    "ScriptedCompletion",
    "StreamCompletion",
    "assistant_reply",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletionOptions:
    """Per-request options.

    Attributes:
        reasoning: thinking level to request; None means none (branch summaries never reason).
        signal: abort signal; firing it makes the reply end with stopReason "aborted".
        session_id: routing id; a fresh UUID is used when None (Pi: every summary gets its own).
    """

    reasoning: str | None = None
    signal: AbortSignal | None = None
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """One recorded request (what `ScriptedCompletion` remembers)."""

    system_prompt: str
    messages: list[dict[str, Any]]
    max_tokens: int
    options: CompletionOptions


class Completion(Protocol):
    """A model that writes one reply: `await completion(system, messages, max_tokens, options)`.

    `context_window` (0 = unknown) sizes the summarizer's input (chunking, §5c of issue 3);
    `max_output_tokens` (0 = uncapped) caps the output budgets; `reasoning` says whether the model
    accepts a thinking level. An optional `one_at_a_time` attribute (default False) says the
    server must not get two summary requests at once (see `StreamCompletion`).
    """

    context_window: int
    max_output_tokens: int
    reasoning: bool

    async def __call__(
        self, system_prompt: str, messages: Sequence[dict[str, Any]], max_tokens: int, options: CompletionOptions
    ) -> dict[str, Any]: ...


def assistant_reply(
    text: str | None = None,
    *,
    stop_reason: str = "stop",
    error: str | None = None,
    tool_call: tuple[str, dict[str, Any]] | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An assistant message as a provider would return it (for scripted completions)."""
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    if tool_call is not None:
        content.append({"type": "toolCall", "id": "call_1", "name": tool_call[0], "arguments": tool_call[1]})
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "api": "scripted",
        "provider": "scripted",
        "model": "scripted",
        "usage": usage or empty_usage(),
        "stopReason": stop_reason,
        "timestamp": 0,
    }
    if error is not None:
        message["errorMessage"] = error
    return message


Reply = dict[str, Any] | str | Callable[[CompletionRequest], "dict[str, Any] | str | Awaitable[dict[str, Any] | str]"]


@dataclass
class ScriptedCompletion:
    """A `Completion` that replays replies in order and records every request.

    A reply is an assistant message dict, a plain string (a successful text reply) or a function
    of the request returning either (for "a model that writes poor summaries"). With
    `default` set, requests past the end of the script get it; otherwise they fail the test.
    """

    replies: list[Reply] = field(default_factory=list)
    context_window: int = 128_000
    max_output_tokens: int = 0
    reasoning: bool = False
    one_at_a_time: bool = False
    default: Reply | None = None
    requests: list[CompletionRequest] = field(default_factory=list)

    async def __call__(
        self, system_prompt: str, messages: Sequence[dict[str, Any]], max_tokens: int, options: CompletionOptions
    ) -> dict[str, Any]:
        request = CompletionRequest(system_prompt, list(messages), max_tokens, options)
        self.requests.append(request)
        reply: Any
        if self.replies:
            reply = self.replies.pop(0)
        elif self.default is not None:
            reply = self.default
        else:
            raise AssertionError(f"unexpected summary request #{len(self.requests)}")
        if callable(reply):
            reply = reply(request)
            if asyncio.iscoroutine(reply):
                reply = await reply
        await asyncio.sleep(0)  # let concurrent requests interleave as real ones would
        if options.signal is not None and options.signal.aborted:
            return assistant_reply("", stop_reason="aborted", error="Request was aborted")
        return assistant_reply(reply) if isinstance(reply, str) else dict(reply)


class StreamCompletion:
    """`Completion` over `picontext.ai.stream` for one catalog model.

    Every request sets `cache_retention="none"` and a fresh session id, and goes through the one
    retry loop (`picontext.ai.retrying.complete_with_retry`): transient errors are retried with
    the `retry` back-off or the server's Retry-After, each wait announced through `callbacks`
    (Pi `completeSummarization`, spec 02 §7.5). An aborted reply is never retried.

    `one_at_a_time` is the model's `compat.serialRequests` (models.json): llama-cpp-python's
    server (by default) cancels the running stream whenever another request arrives, so
    concurrent summary requests would cancel each other, be retried, and cancel each other
    again. Any other server, on this machine or not, gets a split turn's two summaries and a
    long span's chunks at once (Ollama, vLLM and llama.cpp's `llama-server` queue or batch them).
    """

    def __init__(
        self,
        model: Model,
        *,
        api_key: str | None = None,
        retry: RetryPolicy | None = None,
        stream_fn: Callable[..., Any] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        client: Any = None,
        callbacks: RetryCallbacks | None = None,
    ) -> None:
        self.model = model
        self.context_window = int(model.get("contextWindow") or 0)
        self.max_output_tokens = int(model.get("maxTokens") or 0)
        self.reasoning = bool(model.get("reasoning"))
        self.one_at_a_time = needs_serial_requests(model)
        self._api_key = api_key
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._client = client
        self._callbacks = callbacks
        self._stream = stream_fn

    async def __call__(
        self, system_prompt: str, messages: Sequence[dict[str, Any]], max_tokens: int, options: CompletionOptions
    ) -> dict[str, Any]:
        from picontext.ai.providers import StreamOptions

        stream_options = StreamOptions(
            api_key=self._api_key,
            signal=options.signal,
            max_tokens=max_tokens,
            reasoning=options.reasoning,  # type: ignore[arg-type]
            session_id=options.session_id or str(uuid.uuid4()),
            cache_retention="none",
            client=self._client,
        )
        context = cast("Context", {"systemPrompt": system_prompt, "messages": list(messages), "tools": []})
        return await self.send(self.model, context, stream_options)

    async def send(self, model: Model, context: Any, options: Any) -> dict[str, Any]:
        """A request built by the caller (the session's cached prefix, compaction/prompt_cache.py),
        through the same retry loop, stream function and callbacks."""
        return await complete_with_retry(  # type: ignore[return-value]
            model, context, options,
            policy=self._retry, sleep=self._sleep, callbacks=self._callbacks, stream_fn=self._stream,
        )

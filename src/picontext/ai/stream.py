"""Entry points: `stream(model, context, options)` and `complete(...)`.

`stream()` resolves the API key (options, then the model's own `apiKey`, then env/auth.json),
fills the sampling options the caller left unset from the model's `compat.temperature` and
`compat.seed` (models.json: a fixed temperature and seed make a local model's answers, and the
tests on it, repeatable), picks the wire API from `model["api"]` and returns an
`AssistantMessageStream` at once. A missing
key or an unknown API is a `ConfigError` raised here, before any request; everything after the
call starts arrives as events (see `picontext.ai.event_stream`).

Example::

    model = default_catalog().get("anthropic/claude-sonnet-4-5")
    s = stream(model, {"messages": [{"role": "user", "content": "hi", "timestamp": 0}]})
    async for ev in s:
        if ev["type"] == "text_delta":
            print(ev["delta"], end="")
    message = await s.result()
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from picontext.ai.auth import require_api_key
from picontext.ai.event_stream import AbortSignal, AssistantMessageStream
from picontext.ai.models import Model
from picontext.ai.providers import (
    Context,
    StreamOptions,
    stream_anthropic_messages,
    stream_google_gemini,
    stream_openai_completions,
    stream_openai_responses,
)
from picontext.ai.types import AssistantMessage
from picontext.errors import ConfigError, ContextOverflowError, ProviderError

__all__ = ["AbortSignal", "Context", "StreamFunction", "StreamOptions", "complete", "stream", "with_model_sampling"]

StreamFunction = Callable[[Model, Context, StreamOptions], AssistantMessageStream]
"""Contract (Pi `StreamFunction`): return at once; never raise after the call has started; end
with exactly one `done` or `error` event whose message is also `await result()`."""

_BY_API: dict[str, StreamFunction] = {
    "openai-completions": stream_openai_completions,
    "openai-responses": stream_openai_responses,
    "anthropic-messages": stream_anthropic_messages,
    "google-generative-ai": stream_google_gemini,
}


def stream(model: Model, context: Context, options: StreamOptions | None = None) -> AssistantMessageStream:
    """Start one streamed model call; see the module docstring."""
    opts = options or StreamOptions()
    fn = _BY_API.get(model["api"])
    if fn is None:
        raise ConfigError(
            f"Model {model['provider']}/{model['id']} uses api {model['api']!r}; "
            f'set "api" to one of {", ".join(_BY_API)} in models.json'
        )
    if not opts.api_key:
        opts = dataclasses.replace(opts, api_key=require_api_key(model["provider"], model=model))
    return fn(model, context, with_model_sampling(model, opts))


def with_model_sampling(model: Model, options: StreamOptions) -> StreamOptions:
    """`options` with `temperature` / `seed` taken from `model["compat"]` where the caller set none.

    A value of the wrong type is a one-line `ConfigError` naming the model and the key."""
    compat = model.get("compat") or {}
    changes: dict[str, Any] = {}
    temperature, seed = compat.get("temperature"), compat.get("seed")
    if options.temperature is None and temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not 0 <= temperature <= 2:
            raise ConfigError(f"model {model['provider']}/{model['id']}: compat.temperature must be a number from 0 "
                              f"to 2, not {temperature!r}")
        changes["temperature"] = temperature
    if options.seed is None and seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"model {model['provider']}/{model['id']}: compat.seed must be an integer, not {seed!r}")
        changes["seed"] = seed
    return dataclasses.replace(options, **changes) if changes else options


async def complete(
    model: Model, context: Context, options: StreamOptions | None = None, *, raise_on_error: bool = False
) -> AssistantMessage:
    """The final message of `stream()` (Pi `complete`).

    By default an error or abort is returned as a message with `stopReason` "error"/"aborted".
    With `raise_on_error=True`, an error raises `ContextOverflowError` when overflow detection
    (`picontext.ai.overflow`) recognises it, else `ProviderError`.
    """
    message = await stream(model, context, options).result()
    if raise_on_error and message["stopReason"] in ("error", "aborted"):
        text = message.get("errorMessage") or "Unknown error"
        if _is_overflow(message, model["contextWindow"]):
            raise ContextOverflowError(text)
        raise ProviderError(text)
    return message


def _is_overflow(message: AssistantMessage, window: int) -> bool:
    try:
        from picontext.ai.overflow import is_context_overflow  # owned by the overflow work (issue 5 §4)
    except ImportError:
        return False
    return bool(is_context_overflow(message, window))

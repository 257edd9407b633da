"""Summary requests that read the session's cached prompt prefix (`compaction.reusePromptCache`).

Pi's summary request is a conversation of its own: a summarizer system prompt and the
transcript serialized into one user message. No provider has seen that prefix, so all of it is
billed as fresh input, although the provider cached the very same history moments ago when the
session sent it. With `reusePromptCache` on, and the summarizer being the session's own model on
an API that caches prompts, the summary request is instead

    the session's last request, cut at the end of the span to summarize
    (same model, system prompt, tools, messages, routing key and cache retention)
    + one user message: the summary instruction (`prompts.cached_history_request`).

The provider finds that prefix in its cache:

* `anthropic-messages`: breakpoints on the system block and the last tool as in every request,
  and the third on the last block *before* the instruction (`StreamOptions.cache_before_last`),
  so three of the four allowed. The session's request that ended there wrote that entry; the
  lookback from the breakpoint (20 blocks) finds it when the prefix ends a block or two later.
* `openai-responses` / `openai-completions`: caching is automatic for the longest matching
  prefix (1024 tokens and more); the session's `prompt_cache_key` is sent again so the request
  is routed to the machine that holds it (providers that take `cache_control` on the chat wire
  get the same breakpoint placement as Anthropic).

It is not used, and today's request is sent, when: another model writes summaries
(`compaction.model`; a cache belongs to one model), the API caches nothing (`gemini` here) or
the session asked for no caching (`cache_retention` "none"), the session has sent no request
yet (a reopened file, `picontext compact`), the last request's messages do not start with the
messages up to the cut (a `context` hook rewrote them, the branch moved), the prefix is older
than the provider keeps a cache entry (5 minutes, 1 hour with long retention: a miss would pay
for the whole unsummarized history, which Pi's serialized transcript shortens), or the prefix
and the output budget do not fit the window. The reason is recorded in the compaction's
`details.promptCache` either way.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from picontext import _json
from picontext.ai.models import Model
from picontext.ai.providers import StreamOptions
from picontext.compaction.serialize import utf16_len
from picontext.session.convert import convert_to_llm

__all__ = [
    "CACHING_APIS",
    "CachedPrefix",
    "SessionRequest",
    "cache_lifetime_ms",
    "plan_cached_prefix",
]

CACHING_APIS = frozenset({"anthropic-messages", "openai-responses", "openai-completions"})
SHORT_LIFETIME_MS = 5 * 60_000
"""Anthropic's default entry lifetime; OpenAI keeps in-memory entries 5-10 minutes idle."""
LONG_LIFETIME_MS = 60 * 60_000
"""Anthropic's 1 h retention (OpenAI's extended one is longer; the shorter bound is used)."""


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """The provider request a session sent last, as handed to `stream()`.

    `context` is the provider context (`messages` with the system prompt as a leading system
    message, `tools`); `sent_at` is when it was sent (ms since the epoch).
    """

    model: Model
    context: Mapping[str, Any]
    options: StreamOptions
    sent_at: int


@dataclass(frozen=True, slots=True)
class CachedPrefix:
    """Where the summary requests cut the session's request.

    `history_end`: `messages[:history_end]` end where the history summary's span ends;
    `turn_end`: for a split turn, `messages[:turn_end]` end at the cut (the turn prefix's span).
    """

    request: SessionRequest
    history_end: int
    turn_end: int | None

    def request_for(self, end: int, instruction: str, max_tokens: int, signal: Any) -> tuple[Model, Any, StreamOptions]:
        """(model, context, options) of one summary request over `messages[:end]`."""
        req = self.request
        messages = [*req.context["messages"][:end],
                    {"role": "user", "content": [{"type": "text", "text": instruction}], "timestamp": 0}]
        context = {**req.context, "messages": messages}
        options = dataclasses.replace(req.options, max_tokens=max_tokens, signal=signal, cache_before_last=True)
        return req.model, context, options


def cache_lifetime_ms(options: StreamOptions) -> int:
    return LONG_LIFETIME_MS if options.cache_retention == "long" else SHORT_LIFETIME_MS


def _tokens(value: Any) -> int:
    return math.ceil(utf16_len(_json.dumps_line(value).decode("utf-8", "surrogatepass")) / 4)


def _cached_at(messages: Sequence[Any], end: int, fallback: int) -> int:
    """When the entry for `messages[:end]` was written: the reply to the request that ended with
    the prefix's last user-side message came back then (its timestamp is the request's start)."""
    last_user = max((i for i in range(end) if messages[i].get("role") in ("user", "toolResult")), default=None)
    if last_user is None:
        return fallback
    for message in messages[last_user + 1:]:
        if message.get("role") == "assistant" and isinstance(message.get("timestamp"), int | float):
            return int(message["timestamp"])
    return fallback


def plan_cached_prefix(prep: Any, request: SessionRequest | None, *, window: int, max_tokens: int,
                       now_ms: int | None = None) -> CachedPrefix | str:
    """The cut of `request` the summary of `prep` can reuse, or one line saying why not."""
    if request is None:
        return "no request of this session to share a prefix with yet"
    api = request.model.get("api")
    if api not in CACHING_APIS:
        return f"the {api} API has no prompt cache to read"
    if request.options.cache_retention == "none":
        return "the session sends its requests without prompt caching"
    messages = list(request.context.get("messages") or [])
    head = 1 if messages and messages[0].get("role") == "system" else 0
    entries = prep.projection.entries[: prep.first_kept_entry_index]
    before = [m for m in convert_to_llm(m for item in entries for m in item.messages) if m.get("role") != "system"]
    turn_end = head + len(before)
    if not before or messages[head:turn_end] != before:
        return "the session's last request does not start with the messages up to the cut"
    prefix_turn = convert_to_llm(prep.turn_prefix_messages) if prep.is_split_turn else []
    history_end = turn_end - len(prefix_turn)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    age = now - _cached_at(messages, turn_end, request.sent_at)
    lifetime = cache_lifetime_ms(request.options)
    if age > lifetime:
        return (f"the prefix was cached {age // 1000} s ago, longer than the provider keeps it "
                f"({lifetime // 60_000} min)")
    size = _tokens(messages[:turn_end]) + _tokens(request.context.get("tools") or [])
    if window > 0 and size + max_tokens + 1024 > window:
        return f"the prefix (~{size} tokens) and the summary budget do not fit the {window}-token window"
    return CachedPrefix(request, history_end, turn_end if prep.is_split_turn and prefix_turn else None)

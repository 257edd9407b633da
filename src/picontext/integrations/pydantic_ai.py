"""picontext as a pydantic-ai capability (`pip install 'picontext[pydantic-ai]'`).

    from pydantic_ai import Agent
    from picontext.integrations.pydantic_ai import PicontextHistory

    history = PicontextHistory(model="openai/gpt-4.1-mini")       # a new session: history.session_id
    agent = Agent("openai:gpt-4.1-mini", capabilities=[history])
    await agent.run("Hello")
    await agent.run("And then?")                                   # no message_history needed
    history = PicontextHistory("0193...", model="openai/gpt-4.1-mini")   # the same conversation later

Every message of every run is stored as a Pi message (`pydantic_ai_messages.py`), with the
usage pydantic-ai reports for each response. Before each attempt at a model request the model
gets the session's projection (compactions, context edits, summaries) instead of the run's raw
history; when that context is above `contextWindow - reserveTokens` of `model` (Pi's rule,
from the last reported usage plus estimates of what came after), older turns are summarized
first. A request the provider rejects as too long is compacted and attempted once more.

The run's own history (`result.all_messages()`) stays pydantic-ai's: only what is sent changes.
A caller that passes `message_history` anyway gets its new messages stored once: messages this
object already stored (the same objects, or equal ones loaded back from JSON) are recognized,
and a history that stops at an earlier point of the session continues from there, on a branch.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai import messages as pm
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ModelContextWindowExceededError, RetryModelRequest
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import RunContext

from picontext.ai.overflow import matching_overflow_pattern
from picontext.compaction.completion import Completion
from picontext.integrations.memory import ConversationMemory, head, starts_with
from picontext.integrations.pydantic_ai_messages import (
    SYSTEM_PROMPT_SECTION,
    ProjectionConverter,
    from_pi,
    to_pi,
)
from picontext.session.projection import field_of
from picontext.session.system_prompt import get_current_system_message

__all__ = ["PicontextHistory", "from_pi", "to_pi"]

_Key = tuple[Any, ...]


def _key(message: Any) -> _Key:
    """What makes a stored message the same as one a caller hands back: role, time, content, call."""
    role = message.get("role")
    stamp = None if role == "custom" else message.get("timestamp")
    content = json.dumps(message.get("content"), sort_keys=True, ensure_ascii=False)
    return (role, stamp, content, message.get("toolCallId"), message.get("customType"))


def _entry_message(entry: Any) -> dict[str, Any] | None:
    kind = field_of(entry, "type")
    if kind == "message":
        message = entry.get("message")
        return message if isinstance(message, dict) and message.get("role") != "system" else None
    if kind == "custom_message":
        return {"role": "custom", "customType": entry.get("customType"), "content": entry.get("content")}
    return None


def _is_overflow(error: BaseException) -> bool:
    if isinstance(error, ModelContextWindowExceededError):
        return True
    text = " ".join(str(part) for part in (error, getattr(error, "body", None) or "") if part)
    return matching_overflow_pattern(text) is not None


class PicontextHistory(AbstractCapability[Any]):
    """A pydantic-ai capability keeping an agent's conversation in a picontext session.

    `session_id` None creates a session (its id is `session_id`); an unknown id raises
    `picontext.errors.SessionNotFound` here, an unusable store `StoreUnavailable`, an unknown
    model or a summary model without a key `ConfigError`. `model` (`provider/id` from picontext's
    catalog or models.json) sets the window and writes the summaries unless `compaction_model`
    (or the `compaction.model` setting) names another; `settings`, `summarizer` and `api_key` are
    `ConversationMemory`'s. `auto_compact=False` leaves compaction to `await history.acompact()`.
    One instance serves one conversation: runs of the same instance take turns.
    """

    def __init__(
        self,
        session_id: str | None = None,
        *,
        model: Any,
        store: Any = None,
        cwd: str | None = None,
        compaction_model: str | None = None,
        settings: dict[str, Any] | None = None,
        summarizer: Completion | None = None,
        api_key: str | None = None,
        auto_compact: bool = True,
    ) -> None:
        self.memory = ConversationMemory(session_id, model=model, store=store, cwd=cwd,
                                         compaction_model=compaction_model, settings=settings,
                                         summarizer=summarizer, api_key=api_key)
        self.auto_compact = auto_compact
        self._last_run: dict[int, pm.ModelMessage] = {}  # the objects of the last run, by id
        self._to_model = ProjectionConverter()  # the projection as pydantic-ai messages, kept up to date
        self._system_prompt: tuple[Sequence[Any], str | None] | None = None  # (projection, its prompt)
        # Per run (set on the copy `for_run` returns):
        self._parent: PicontextHistory | None = None
        self._history_length = 0
        self._live: list[pm.ModelMessage] | None = None
        self._stored = 0
        self._overflow_retried = False

    # -- what callers use ------------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self.memory.session_id

    def messages(self) -> list[pm.ModelMessage]:
        """The conversation as the model gets it next (the projection), as pydantic-ai messages."""
        return from_pi(self.memory.messages())

    async def acompact(self, *, instructions: str | None = None) -> dict[str, Any] | None:
        """Compact now (`ConversationMemory.acompact(reason="manual")`): the result, or None."""
        return await self.memory.acompact(reason="manual", instructions=instructions)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live session: not constructible from an agent spec

    # -- the run -------------------------------------------------------------------------------------------

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        run = copy.copy(self)  # shares the memory; the per-run counters below are the copy's own
        run._parent = self
        run._history_length = 0
        run._live = None
        run._stored = 0
        run._overflow_retried = False
        return run

    async def before_run(self, ctx: RunContext[Any]) -> None:
        self._history_length = len(ctx.messages)  # what the caller passed as message_history

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Any) -> AgentRunResult[Any]:
        try:
            return await handler()
        finally:
            # Success or failure, what the run produced is kept (a failed request's prompt too).
            if self._live is not None:
                self._store(self._live)
                self._owner()._last_run = {id(m): m for m in self._live}

    async def before_model_request(self, ctx: RunContext[Any], request_context: ModelRequestContext
                                   ) -> ModelRequestContext:
        self._live = ctx.messages
        self._overflow_retried = False
        self._store(ctx.messages)
        return request_context

    async def prepare_model_request(self, ctx: RunContext[Any], request_context: ModelRequestContext
                                    ) -> ModelRequestContext:
        memory = self.memory
        if self.auto_compact and not self._overflow_retried and memory.should_compact():
            await memory.acompact(reason="threshold")
        request_context.messages = self._owner()._to_model(memory.message_view())
        return request_context

    async def on_model_request_error(self, ctx: RunContext[Any], *, request_context: ModelRequestContext,
                                     error: Exception) -> pm.ModelResponse:
        if self.auto_compact and not self._overflow_retried and _is_overflow(error):
            self._overflow_retried = True  # Pi's rule: one compaction, one more attempt
            if await self.memory.acompact(reason="overflow") is not None:
                raise RetryModelRequest()
        raise error

    # -- storing -------------------------------------------------------------------------------------------

    def _owner(self) -> PicontextHistory:
        return self._parent or self

    def _store(self, messages: Sequence[pm.ModelMessage]) -> None:
        """Store `messages[self._stored:]`; the caller's history (the first run's first call) only
        where the session does not hold it yet."""
        start = self._stored
        if start >= len(messages):
            return
        fresh: list[pm.ModelMessage] = list(messages[start:])
        if start == 0 and self._history_length:
            history = list(messages[: self._history_length])
            fresh = self._unstored(history) + list(messages[self._history_length:])
        self._stored = len(messages)
        pi = self._without_repeated_system_prompt(to_pi(fresh))
        if pi:
            self.memory.append(pi)

    def _without_repeated_system_prompt(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """pydantic-ai states the system prompt at the start of every run without history: keep it
        once, and again only when it differs from the one the conversation has now (Pi's system
        messages are deltas; after a clear, a pop or on another branch that may be none)."""
        if not any(m["role"] == "system" for m in messages):
            return messages
        current = self._stored_system_prompt()
        out = []
        for message in messages:
            if message["role"] == "system":
                prompt = message["sections"][SYSTEM_PROMPT_SECTION]
                if prompt == current:
                    continue
                current = prompt
            out.append(message)
        return out

    def _stored_system_prompt(self) -> str | None:
        """The conversation's system prompt now. Replaying every system message walks the whole
        projection, so the answer is kept with the projection it was read from and reused while
        the projection has only grown by messages that are not system messages."""
        owner = self._owner()
        view = self.memory.message_view()
        known = owner._system_prompt
        if known is not None and starts_with(view, known[0]) and not any(
                isinstance(m, dict) and m.get("role") == "system" for m in view[len(known[0]):]):
            return known[1]
        system = get_current_system_message(view)
        sections = (system or {}).get("sections") or {}
        prompt = sections.get(SYSTEM_PROMPT_SECTION)
        prompt = prompt if isinstance(prompt, str) else None
        owner._system_prompt = (head(view, len(view)), prompt)
        return prompt

    def _unstored(self, history: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
        """The part of a caller's `message_history` the session does not hold yet."""
        known = self._owner()._last_run
        for index in range(len(history) - 1, -1, -1):
            if known.get(id(history[index])) is history[index]:
                return history[index + 1:]  # the caller handed back our own messages
        keys = [_key(m) for m in to_pi(history) if m["role"] != "system"]
        if not keys:
            return history
        stored: list[tuple[_Key, str]] = []
        for entry in self.memory.manager.branch_view():
            message = _entry_message(entry)
            if message is not None:
                stored.append((_key(message), str(entry["id"])))
        stored_keys = [k for k, _ in stored]
        last = keys[-1]
        for j in range(len(stored_keys) - 1, -1, -1):
            if stored_keys[j] != last:
                continue
            overlap = min(len(keys), j + 1)
            if keys[len(keys) - overlap:] == stored_keys[j + 1 - overlap: j + 1]:
                if j != len(stored_keys) - 1:
                    self.memory.manager.branch(stored[j][1])  # the caller continues an earlier point
                return []
        for k in range(min(len(keys), len(stored_keys)), 0, -1):
            if keys[:k] == stored_keys[-k:]:
                return self._after_pi_messages(history, k)
        return history

    @staticmethod
    def _after_pi_messages(history: list[pm.ModelMessage], count: int) -> list[pm.ModelMessage]:
        """The messages of `history` after its first `count` (non-system) Pi messages; a request
        split across that point is kept whole only for its unstored parts."""
        seen = 0
        for index, message in enumerate(history):
            pi = [m for m in to_pi([message]) if m["role"] != "system"]
            if seen + len(pi) <= count:
                seen += len(pi)
                continue
            if isinstance(message, pm.ModelRequest) and seen < count:
                skip = count - seen
                kept = (pm.UserPromptPart, pm.ToolReturnPart, pm.RetryFeedbackPart, pm.RetryPromptPart)
                parts = [p for p in message.parts if isinstance(p, kept)]
                rest = pm.ModelRequest(parts=parts[skip:])
                return [rest, *history[index + 1:]]
            return history[index:]
        return []

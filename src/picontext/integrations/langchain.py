"""`PicontextMiddleware`: a picontext session as the memory of a LangChain agent (`picontext[langchain]`).

    from langchain.agents import create_agent
    from picontext.integrations.langchain import PicontextMiddleware

    memory = PicontextMiddleware(model="openai/gpt-4.1-mini")      # a new session; .session_id
    agent = create_agent(ChatOpenAI(model="gpt-4.1-mini"), tools=[...], middleware=[memory])
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    agent.invoke({"messages": [{"role": "user", "content": "and then?"}]})  # remembers "hi"

Around every model call (`wrap_model_call`/`awrap_model_call`) the middleware

1. stores the thread's messages the session does not hold yet (the caller's input, tool results)
   as Pi messages, each once: a private state key remembers the last message stored, and
   messages the session already ends with (a retry after a failed call, a caller who passes the
   whole history back) are recognised and not stored again;
2. compacts by Pi's rule when the context is over `contextWindow - reserveTokens` of `model`;
3. calls the model with the session's projection (summary + kept tail, context edits) instead of
   the thread's raw messages; the agent's system prompt and tools are untouched;
4. stores the reply with its usage, which sets the next threshold check;
5. on a context-overflow error from the provider, compacts and retries exactly once.

The graph's own state keeps whatever the checkpointer keeps: with a checkpointer the thread holds
every message (the session holds them too, and gives the model the compacted view); without one,
each `invoke` passes only its new messages and the session supplies the rest. One middleware is
one conversation: a second `thread_id` is refused (`ConfigError`) rather than mixed in.
Put it first in `middleware=[...]` so the other middleware see the projection and their final
reply is the one stored.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, NamedTuple, NotRequired, TypeVar

import orjson
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.config import get_config
from langgraph.types import Command

from picontext.ai.models import Model
from picontext.ai.overflow import matching_overflow_pattern
from picontext.compaction.completion import Completion
from picontext.errors import ConfigError
from picontext.integrations.langchain_messages import Origin, from_langchain_messages, to_langchain
from picontext.integrations.memory import ConversationMemory, head, starts_with
from picontext.session.convert import convert_message
from picontext.session.projection import field_of

__all__ = ["PicontextMiddleware", "PicontextState"]

STATE_KEY = "picontext"
"""The private state key: `{"session": id, "last": id of the last thread message stored}`."""

T = TypeVar("T")


class PicontextState(AgentState[Any]):
    picontext: NotRequired[Annotated[dict[str, str] | None, PrivateStateAttr]]


class PicontextMiddleware(AgentMiddleware[PicontextState, Any, Any]):
    """Keep an agent's conversation in a picontext session (see the module docstring).

    `session_id` None creates a session (`.session_id` is its id); an unknown id raises
    `SessionNotFound`, an unusable `store` `StoreUnavailable`, an unknown `model` or a summary
    model without a key `ConfigError`, all here. `model` is a `provider/id` of picontext's catalog
    or `models.json` (or a model record): its window sets the threshold and it writes the
    summaries unless `compaction_model` (or the `compaction.model` setting) names another.
    `settings` override the settings files (`{"compaction": {"reserveTokens": 16384}}`).
    """

    state_schema = PicontextState

    def __init__(
        self,
        session_id: str | None = None,
        *,
        model: str | Model,
        store: Any = None,
        cwd: str | None = None,
        compaction_model: str | None = None,
        settings: dict[str, Any] | None = None,
        api_key: str | None = None,
        summarizer: Completion | None = None,
    ) -> None:
        super().__init__()
        self.memory = ConversationMemory(session_id, model=model, store=store, cwd=cwd,
                                         compaction_model=compaction_model, settings=settings,
                                         summarizer=summarizer, api_key=api_key)
        resolved = self.memory.model
        self._origin: Origin = {"api": resolved["api"], "provider": resolved["provider"], "model": resolved["id"]}
        self._thread: str | None = None
        self._lock = threading.Lock()
        # Pi message (by identity) -> its LangChain form: the projection's messages are the
        # session's own objects, so a turn converts only the new ones.
        self._converted: dict[int, _Converted] = {}
        self._done: _Pass | None = None

    @property
    def session_id(self) -> str:
        return self.memory.session_id

    # -- the hooks -----------------------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        self._store_input(request)
        if self._due():
            _run_sync(self.memory.acompact(reason="threshold"))
        try:
            response = handler(self._projected(request))
        except Exception as exc:
            if not self._overflowed(exc) or _run_sync(self.memory.acompact(reason="overflow")) is None:
                raise
            response = handler(self._projected(request))  # exactly one retry, as Pi
        return self._store_reply(response)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        self._store_input(request)
        if self._due():
            await self.memory.acompact(reason="threshold")
        try:
            response = await handler(self._projected(request))
        except Exception as exc:
            if not self._overflowed(exc) or await self.memory.acompact(reason="overflow") is None:
                raise
            response = await handler(self._projected(request))
        return self._store_reply(response)

    # -- storing -------------------------------------------------------------------------------------

    def _store_input(self, request: ModelRequest[Any]) -> None:
        self._bind_thread()
        state = request.state
        messages: list[BaseMessage] = list(state.get("messages") or [])
        with self._lock:
            fresh = self._unstored(messages, state.get(STATE_KEY))
            if fresh:
                self._store(fresh)

    def _store_reply(self, response: ModelResponse[Any]) -> ExtendedModelResponse[Any]:
        messages = list(response.result)
        for message in messages:
            if message.id is None:
                # The state's reducer would give it a random id later; the marker needs it now.
                message.id = f"lc_{uuid.uuid4()}"
        with self._lock:
            if messages:
                self._append(messages)
        last = messages[-1].id if messages else None
        command: Command[Any] | None = None
        if last:
            command = Command(update={STATE_KEY: {"session": self.session_id, "last": last}})
        return ExtendedModelResponse(model_response=response, command=command)

    def _append(self, messages: Sequence[BaseMessage]) -> None:
        self._store(from_langchain_messages(messages, origin=self._origin))

    def _store(self, pi: list[dict[str, Any]]) -> None:
        pi = [m for m in pi if m["role"] != "system" or not self._same_prompt(m)]
        if pi:
            self.memory.append(pi)

    def _same_prompt(self, message: dict[str, Any]) -> bool:
        """A SystemMessage the caller passes on every call (no checkpointer) is one prompt, not
        one more system message per call: skipped when it equals the latest one in the context."""
        latest = next((m for m in reversed(self.memory.message_view()) if m.get("role") == "system"), None)
        return latest is not None and _content_key(latest.get("content")) == _content_key(message.get("content"))

    def _unstored(self, messages: list[BaseMessage], marker: Any) -> list[dict[str, Any]]:
        """The thread's messages the session does not hold yet, as Pi messages."""
        start = 0
        if isinstance(marker, dict) and marker.get("session") == self.session_id and marker.get("last"):
            last = marker["last"]
            for index in range(len(messages) - 1, -1, -1):
                if messages[index].id == last:
                    start = index + 1
                    break
        candidates = messages[start:]
        if not candidates:
            return []
        # Messages stored but never marked (the model call after them failed, or the caller
        # passes back history it got earlier) are the session's newest: skip that overlap.
        pi = from_langchain_messages(candidates, origin=self._origin)
        keys = [_message_key(m) for m in pi]
        tail = self._tail_keys(len(keys))
        for size in range(min(len(keys), len(tail)), 0, -1):
            if keys[:size] == tail[len(tail) - size:]:
                return pi[size:]
        return pi

    def _tail_keys(self, count: int) -> list[tuple[Any, ...]]:
        """Keys of the last `count` messages on the session's branch, oldest first (a walk up
        from the leaf: cost grows with `count`, not with the session)."""
        manager = self.memory.manager
        keys: list[tuple[Any, ...]] = []
        entry_id = manager.get_leaf_id()
        while entry_id is not None and len(keys) < count:
            entry = manager.get_entry(entry_id)
            if entry is None:
                break
            kind = field_of(entry, "type")
            if kind == "message" and isinstance(entry.get("message"), dict):
                keys.append(_message_key(entry["message"]))
            elif kind == "custom_message":
                keys.append(_message_key({"role": "custom", "customType": entry.get("customType"),
                                          "content": entry.get("content")}))
            entry_id = field_of(entry, "parentId")
        keys.reverse()
        return keys

    def _bind_thread(self) -> None:
        try:
            thread = (get_config().get("configurable") or {}).get("thread_id")
        except RuntimeError:
            return  # called outside a graph run
        if thread is None:
            return
        thread = str(thread)
        if self._thread is None:
            self._thread = thread
        elif thread != self._thread:
            raise ConfigError(
                f"PicontextMiddleware keeps one conversation (session {self.session_id}, thread "
                f"{self._thread!r}); thread {thread!r} needs its own middleware and agent")

    # -- the model's input ---------------------------------------------------------------------------

    def _due(self) -> bool:
        with self._lock:
            return self.memory.should_compact()

    def _projected(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        with self._lock:
            messages = self._langchain_context()
        return request.override(messages=messages)  # type: ignore[arg-type]

    def _langchain_context(self) -> list[BaseMessage]:
        """The projection as LangChain messages, in the shape every chat API requires (as Pi
        sends it): replies that ended in an error are left out, each tool call is answered
        before the next turn (a run cut off between a call and its result gets a synthetic error
        result), a result without its call is dropped.

        A turn only appends to the projection, so the pass resumes where the last one stopped
        when the last projection is a prefix of this one (compared in C, by identity); after a
        compaction or a branch move it starts over, converting only messages it has not seen."""
        # The projection's own messages (a summary stays the same object from turn to turn, where
        # the converted context would make a new one): to_langchain converts the custom roles.
        messages = self.memory.message_view()
        done = self._done
        if done is not None and starts_with(messages, done.source):
            converted = self._converted
            out, pending, start = done.out, done.pending, len(done.source)
            self._done = None  # its lists grow below: kept again once the pass is through
        else:
            converted, out, pending, start = {}, [], {}, 0
        previous = self._converted

        def unanswered() -> list[BaseMessage]:
            return [ToolMessage("No result provided", tool_call_id=call_id, name=name, status="error")
                    for call_id, name in pending.items()]

        def close() -> None:
            out.extend(unanswered())
            pending.clear()

        for message in messages[start:]:
            key = id(message)
            hit = previous.get(key)
            if hit is None or hit.source is not message:
                hit = _Converted(message)
            converted[key] = hit
            if hit.role is None:
                continue  # never reaches a model (a shell command run with `!!`)
            if hit.role == "assistant":
                if pending:
                    close()
                if hit.failed:
                    continue
                pending.update(hit.calls)
            elif hit.role == "toolResult":
                if pending.pop(hit.answers or "", None) is None:
                    continue
            elif pending and hit.role != "system":  # a prompt update may sit between a call and its results
                close()
            if hit.message is not None:
                out.append(hit.message)
        self._converted = converted
        self._done = _Pass(head(messages, len(messages)), out, pending)
        return out + unanswered()  # the model's own list: the pass's lists stay private

    def _overflowed(self, exc: Exception) -> bool:
        return matching_overflow_pattern(str(exc), self._origin["provider"]) is not None


class _Pass(NamedTuple):
    """Where the last pass over the projection stopped: its messages, the output so far (before
    unanswered calls were closed) and the calls still unanswered. The next pass that resumes it
    extends `out` and `pending` in place."""

    source: Sequence[dict[str, Any]]
    out: list[BaseMessage]
    pending: dict[str, str]


class _Converted:
    """A projected Pi message with its LangChain form and what the pairing pass needs of it."""

    __slots__ = ("answers", "calls", "failed", "message", "role", "source")

    def __init__(self, source: dict[str, Any]) -> None:
        self.source = source  # held, so that its id() is not reused while cached
        self.message = to_langchain(source)
        llm = convert_message(source)
        self.role = llm.get("role") if llm is not None else None
        self.failed = self.role == "assistant" and source.get("stopReason") in ("error", "aborted")
        self.calls = {str(b.get("id")): str(b.get("name", "")) for b in source.get("content") or ()
                      if self.role == "assistant" and isinstance(b, dict) and b.get("type") == "toolCall"}
        self.answers = str(source.get("toolCallId")) if self.role == "toolResult" else None


def _content_key(content: Any) -> bytes:
    if isinstance(content, str):
        return content.encode()
    texts = [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
    return "\n".join(texts).encode()


def _message_key(message: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two stored messages the same message (timestamps and usage aside)."""
    role = message.get("role")
    content = message.get("content")
    if role == "user" and isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict) \
            and content[0].get("type") == "text":
        content = content[0].get("text")  # the same text, as a string or as one block
    return (role, message.get("toolCallId"), message.get("customType"),
            orjson.dumps(content, option=orjson.OPT_SORT_KEYS))


_EXECUTOR: ThreadPoolExecutor | None = None


def _run_sync(coro: Awaitable[T]) -> T:
    """Run a coroutine from the synchronous hook: directly when no event loop runs in this thread
    (`agent.invoke`), else on a helper thread (`invoke` called from async code)."""
    global _EXECUTOR
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    if _EXECUTOR is None:
        _EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="picontext-compact")
    return _EXECUTOR.submit(asyncio.run, coro).result()  # type: ignore[arg-type]

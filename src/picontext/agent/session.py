"""AgentSession: one conversation bound to a `SessionManager` (Pi agent-session.ts).

It drives the loop (`picontext.agent.loop`) and consumes its events: every message is persisted
at its `message_end`, then the event goes to the listeners. Each request is built from the
session projection (`manager.build_session_projection().messages`), so whatever the session
file says (compactions, context edits) is what the model sees.

Compaction is checked at three moments (spec 03 §2; `compaction_runtime.py`):

* check A, between turns of a run, before another request (threshold only);
* check B, after each low-level run: transient-error retry (`retries.py`), overflow recovery
  (omit the failed attempt, compact, retry once), threshold;
* check C, before a new prompt (aborted replies count here).

Plus `compact(instructions)` (manual) and `navigate_tree(...)` (`navigation.py`). The session
is a small state machine: idle, running, compacting (manual) or navigating. One operation at a
time: a prompt during a run is queued (steer/follow-up) or refused; a prompt, compaction or
navigation during a compaction or navigation is refused with a clear `SessionBusyError`.

Example::

    manager = SessionManager.create(os.getcwd())
    session = AgentSession(manager, model=model, tools=coding_tools(os.getcwd()))
    session.subscribe(lambda event: print(event["type"]))
    await session.prompt("List the files here")
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from picontext._clock import Clock, SystemClock
from picontext.agent.background_compaction import BackgroundCompaction
from picontext.agent.compaction_runtime import CompactionRuntime
from picontext.agent.events import AgentEvent
from picontext.agent.hooks import Hooks
from picontext.agent.loop import AgentLoopConfig, run_agent_loop, run_agent_loop_continue
from picontext.agent.navigation import NavigationResult, navigate_tree
from picontext.agent.retries import RetryRuntime, Sleep, retry_policy_from_settings
from picontext.agent.types import (
    THINKING_LEVELS,
    AgentContext,
    AgentTool,
    NextTurn,
    QueueMode,
    RequestContext,
    ThinkingLevel,
    TurnContext,
)
from picontext.ai._http import default_client
from picontext.ai.event_stream import AbortSignal, loop_running
from picontext.ai.models import Model
from picontext.ai.providers import StreamOptions
from picontext.ai.retry import RetryPolicy
from picontext.ai.stream import StreamFunction, stream
from picontext.ai.types import AgentMessage, AssistantMessage, ImageContent
from picontext.compaction.completion import Completion
from picontext.compaction.prompt_cache import SessionRequest
from picontext.compaction.settings import Settings
from picontext.compaction.tokens import calculate_context_tokens, get_assistant_usage
from picontext.session.manager import SessionManager
from picontext.session.projection import field_of

__all__ = ["AgentSession", "ContextUsage", "Listener", "NavigationResult", "SessionBusyError"]

Listener = Callable[[AgentEvent], Awaitable[None] | None]
_PERSISTED_AS_MESSAGE = frozenset({"system", "user", "assistant", "toolResult", "bashExecution"})
COMPACTING_PROMPT = (
    "Cannot submit a prompt while compaction is in progress. Wait for compaction to finish and retry."
)
NAVIGATING_PROMPT = (
    "Cannot submit a prompt while tree navigation is in progress. Wait for it to finish and retry."
)


class SessionBusyError(RuntimeError):
    """The session cannot take this request now (a run, compaction or navigation is active)."""


@dataclass(frozen=True, slots=True)
class ContextUsage:
    """How full the context window is. `tokens`/`percent` are None when unknown (right after a
    compaction, until the next reply reports usage)."""

    tokens: int | None
    context_window: int
    percent: float | None
    estimated: bool = False
    """True when no reply on the current context reported usage (e.g. a server that sends no
    usage in streams): `tokens` is then a chars/4 estimate, not the server's count."""


def usage_tokens(message: AssistantMessage) -> int:
    """Context size a reply reports (Pi `calculateContextTokens`): totalTokens, else the sum."""
    usage = message.get("usage") or {}
    total = usage.get("totalTokens") or 0
    if total:
        return int(total)
    values = (usage.get(k, 0) or 0 for k in ("input", "output", "cacheRead", "cacheWrite"))
    return int(sum(v for v in values if isinstance(v, int | float)))


class AgentSession:
    """One conversation: a model, tools, queues and a session file.

    Invariants: every message the loop finalizes is in the manager (appended at its
    `message_end`) before listeners see that event; at most one operation (run, manual
    compaction, navigation) is active (`_busy`).
    """

    def __init__(
        self,
        manager: SessionManager,
        *,
        model: Model,
        tools: Sequence[AgentTool] = (),
        system_prompt: str | None = None,
        thinking_level: ThinkingLevel | None = None,
        hooks: Hooks | None = None,
        stream_fn: StreamFunction = stream,
        stream_options: StreamOptions | None = None,
        tool_execution: Literal["parallel", "sequential"] = "parallel",
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        clock: Clock | None = None,
        settings: Settings | None = None,
        retry: RetryPolicy | None = None,
        summarizer: Completion | None = None,
        sleep: Sleep | None = None,
        context_tools: bool = False,
        compaction_requests_per_prompt: int = 1,
    ) -> None:
        """`settings` (compaction, branchSummary, retry sections; defaults when None), `retry`
        (overrides settings' retry section), `summarizer` (the model writing summaries; default:
        the session's model), `sleep` (retry back-off, injectable for tests), `context_tools`
        (add `context_usage`, `request_compaction` and `recall` tools)."""
        self.manager = manager
        self.tools = list(tools)
        self.system_prompt = system_prompt
        self.hooks = hooks or Hooks()
        self.stream_fn = stream_fn
        self.stream_options = stream_options or StreamOptions()
        self.tool_execution = tool_execution
        self.steering_mode = steering_mode
        self.follow_up_mode = follow_up_mode
        self.clock = clock or SystemClock()
        self.settings = settings or Settings()
        self.retry_policy = retry or retry_policy_from_settings(self.settings.data)
        self.summarizer = summarizer
        self.last_request: SessionRequest | None = None
        self.compaction = CompactionRuntime(self, BackgroundCompaction)
        self.retries = RetryRuntime(self, sleep)
        self.compaction_requests_per_prompt = compaction_requests_per_prompt
        self.compaction_requests_used = 0
        self._listeners: list[Listener] = []
        self._steering: list[AgentMessage] = []
        self._follow_up: list[AgentMessage] = []
        self._shown_queue: tuple[list[str], list[str]] = ([], [])
        self._signal: AbortSignal | None = None
        self._nav_signal: AbortSignal | None = None
        self._busy: Literal["run", "compact", "navigate"] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[Any] | None = None
        self._entry_of: dict[int, tuple[Any, str]] = {}
        self._last_assistant: AssistantMessage | None = None
        self._last_tool_results: list[Any] = []
        self._http: Any = None
        self._http_loop: asyncio.AbstractEventLoop | None = None
        self.model = model
        self.thinking_level: ThinkingLevel = "off"
        # Inside a running event loop the initial entries must not wait for another process's
        # lock in a sleep: if it is held they are written first at the next write (see
        # `SessionManager.batch`), whose wait yields to the loop.
        with manager.batch(wait=not loop_running()):
            self._record_initial_settings(model, thinking_level)
        if context_tools:
            from picontext.agent.tools.context import context_tools as make_context_tools

            self.tools.extend(make_context_tools(self))

    @classmethod
    async def acreate(cls, manager: SessionManager, **options: Any) -> AgentSession:
        """`AgentSession(manager, **options)` from async code, returning once its initial
        `model_change`/`thinking_level_change` entries are stored: a wait for another process's
        lock on the session yields to the event loop. (The constructor alone never waits inside
        a running loop; a held lock only delays those entries to the session's next write.)"""
        session = cls(manager, **options)
        await manager.awrite_pending()
        return session

    # -- state ---------------------------------------------------------------------------------

    @property
    def messages(self) -> Sequence[AgentMessage]:
        """The model-visible transcript: the session projection, as a read-only view made in O(1)
        (no copy per request, however long the context); it does not change when the session
        does. `list(session.messages)` for a list of one's own."""
        return self.manager.build_session_projection().messages

    @property
    def is_streaming(self) -> bool:
        return self._busy == "run"

    @property
    def is_compacting(self) -> bool:
        return self.compaction.running or self._busy == "navigate"

    @property
    def is_retrying(self) -> bool:
        return self.retries.sleeping is not None

    @property
    def is_idle(self) -> bool:
        return self._busy is None and not self.compaction.running

    @property
    def pending_message_count(self) -> int:
        return len(self._steering) + len(self._follow_up)

    def has_queued_messages(self) -> bool:
        return bool(self._steering or self._follow_up)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` (sync or async) with every event; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def entry_id_of(self, message: Any) -> str | None:
        """The id of the entry that persisted `message` (identity), or None."""
        hit = self._entry_of.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        for entry in reversed(self.manager.branch_view()):  # parses only back to the message
            if field_of(entry, "type") == "message" and entry.get("message") is message:
                return entry["id"]
        return None

    # -- settings --------------------------------------------------------------------------------

    def _record_initial_settings(self, model: Model, thinking_level: ThinkingLevel | None) -> None:
        fresh = self.manager.entry_count() == 0  # counted, not parsed: a long session opens lazily
        projection = self.manager.build_session_projection()
        current = projection.model or {}
        if (current.get("provider"), current.get("modelId")) != (model["provider"], model["id"]):
            self.manager.append_model_change(model["provider"], model["id"])
        restored = projection.thinking_level if projection.thinking_level in THINKING_LEVELS else "off"
        level = thinking_level or restored
        if fresh or level != projection.thinking_level:
            self.manager.append_thinking_level_change(level)
        self.thinking_level = level  # type: ignore[assignment]

    def set_model(self, model: Model) -> None:
        """Use `model` from the next request on; recorded as a `model_change` entry."""
        if (model["provider"], model["id"]) != (self.model["provider"], self.model["id"]):
            self.manager.append_model_change(model["provider"], model["id"])
        self.model = model

    def set_thinking_level(self, level: ThinkingLevel) -> None:
        """Use `level` from the next request on; recorded as a `thinking_level_change` entry."""
        if level not in THINKING_LEVELS:
            raise ValueError(f"thinking level must be one of {', '.join(THINKING_LEVELS)}, got {level!r}")
        if level != self.thinking_level:
            self.manager.append_thinking_level_change(level)
        self.thinking_level = level

    # The same writes for async code: the sync methods wait for another process's lock on the
    # session in a sleep, which would stall the event loop (abort, RPC, timers); these wait in the
    # store's non-blocking writer section.

    async def aset_model(self, model: Model) -> None:
        """`set_model` from async code: waiting for another writer's lock yields to the loop."""
        async with self.manager.aexclusive(strict=False):
            self.set_model(model)

    async def aset_thinking_level(self, level: ThinkingLevel) -> None:
        """`set_thinking_level` from async code (see `aset_model`)."""
        async with self.manager.aexclusive(strict=False):
            self.set_thinking_level(level)

    async def aset_session_name(self, name: str) -> str:
        """Name the session (a `session_info` entry), from async code (see `aset_model`); returns
        the entry's id."""
        async with self.manager.aexclusive(strict=False):
            return self.manager.append_session_info(name)

    async def aset_label(self, entry_id: str, label: str | None) -> str:
        """Label an entry (None clears its label), from async code (see `aset_model`); returns the
        label entry's id."""
        async with self.manager.aexclusive(strict=False):
            return self.manager.append_label_change(entry_id, label)

    @property
    def auto_compaction_enabled(self) -> bool:
        return self.compaction.settings().enabled

    def set_auto_compaction(self, enabled: bool) -> None:
        """Turn automatic compaction (threshold and overflow) on or off for this session only;
        settings files are not changed (spec 03 §12 item 17)."""
        self.settings = self.settings.with_overrides({"compaction": {"enabled": enabled}}, "set_auto_compaction")

    def get_context_usage(self) -> ContextUsage | None:
        """Tokens in the context now (spec 03 §7): None without a known window; tokens and percent
        None after a compaction until a reply on the new context reports usage."""
        window = int(self.model.get("contextWindow") or 0)
        if window <= 0:
            return None
        branch = self.manager.branch_view()
        latest = self.manager.latest_compaction_position()
        if latest is not None:
            projected_ids = {
                field_of(item.source_entry, "id")
                for item in self.manager.build_session_projection().entries
                if item.messages
            }
            fresh = any(
                field_of(e, "type") == "message"
                and e["id"] in projected_ids
                and get_assistant_usage(e.get("message")) is not None
                for e in branch[latest + 1 :]
            )
            if not fresh:
                return ContextUsage(None, window, None)
        estimate = self.compaction.projected_estimate()
        tokens = int(estimate["tokens"])
        return ContextUsage(tokens, window, tokens / window * 100, estimated=estimate["lastUsageIndex"] is None)

    # -- queues ------------------------------------------------------------------------------------

    def _user_message(self, text: str, images: Sequence[ImageContent] = ()) -> AgentMessage:
        # A non-string would be saved and then fail every later request of the session.
        if not isinstance(text, str):
            raise TypeError(f"a user message is a string, not {type(text).__name__}")
        content: list[Any] = [{"type": "text", "text": text}, *images]
        return {"role": "user", "content": content, "timestamp": self.clock.now_ms()}

    async def steer(self, text: str) -> None:
        """Deliver `text` after the current turn's tool calls, before the next request."""
        self._steering.append(self._user_message(text))
        await self._emit_queue()

    async def follow_up(self, text: str) -> None:
        """Deliver `text` when the agent would otherwise stop."""
        self._follow_up.append(self._user_message(text))
        await self._emit_queue()

    async def clear_queue(self) -> tuple[list[str], list[str]]:
        """Take every queued message out, undelivered (Pi `clearQueue`): (steering, follow-up) texts."""
        state = self._queue_state()
        self._steering.clear()
        self._follow_up.clear()
        await self._emit_queue()
        return state

    def _drain(self, queue: list[AgentMessage], mode: QueueMode) -> list[AgentMessage]:
        taken = queue[:] if mode == "all" else queue[:1]
        del queue[: len(taken)]
        return taken

    def _queue_state(self) -> tuple[list[str], list[str]]:
        def texts(queue: list[AgentMessage]) -> list[str]:
            return [str(c.get("text", "")) for m in queue for c in cast(list[dict[str, Any]], m.get("content") or [])
                    if c.get("type") == "text"]

        return texts(self._steering), texts(self._follow_up)

    async def _emit_queue(self) -> None:
        """Tell listeners what is queued (Pi `queue_update`), when it changed since the last time."""
        state = self._queue_state()
        if state == self._shown_queue:
            return
        self._shown_queue = state
        await self.emit({"type": "queue_update", "steering": state[0], "followUp": state[1]})

    # -- operations ----------------------------------------------------------------------------------

    def _admit_prompt(self) -> None:
        if self.compaction.running or (self._busy == "compact" and self.compaction.running):
            raise SessionBusyError(COMPACTING_PROMPT)
        if self._busy == "navigate":
            raise SessionBusyError(NAVIGATING_PROMPT)

    async def prompt(
        self,
        text: str,
        *,
        images: Sequence[ImageContent] = (),
        streaming_behavior: Literal["steer", "followUp"] | None = None,
    ) -> None:
        """Send a user message and run until the agent settles (or queue it while a run is active)."""
        if self._busy == "run":
            if streaming_behavior == "steer":
                return await self.steer(text)
            if streaming_behavior == "followUp":
                return await self.follow_up(text)
            raise SessionBusyError(
                "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
            )
        self._admit_prompt()
        await self._run([self._user_message(text, images)])

    async def abort(self) -> None:
        """Stop whatever runs: the streamed reply ends "aborted", tools are stopped, a retry
        back-off, compaction or branch summary is cancelled; then wait until the session is idle
        (unless called from inside the operation itself)."""
        if self._signal is not None:
            self._signal.abort("aborted by user")
        self.retries.abort()
        self.compaction.abort()
        if self._nav_signal is not None:
            self._nav_signal.abort("aborted by user")
        if self._task is not None and asyncio.current_task() is not self._task:
            await self._idle.wait()

    def abort_compaction(self) -> None:
        """Cancel the running compaction only (the run, if any, goes on uncompacted)."""
        self.compaction.abort()

    def abort_retry(self) -> None:
        """Cancel a retry back-off only."""
        self.retries.abort()

    async def wait_for_idle(self) -> None:
        await self._idle.wait()

    def _enter(self, kind: Literal["run", "compact", "navigate"]) -> None:
        self._busy = kind
        self._idle.clear()
        self._task = asyncio.current_task()

    def _leave(self, kind: str) -> None:
        if self._busy == kind:
            self._busy = None
            self._task = None
            self._idle.set()

    async def compact(self, instructions: str | None = None) -> dict[str, Any]:
        """Compact now (spec 03 §5). A running response is aborted first. Returns the
        CompactionResult (`summary`, `firstKeptEntryId`, `tokensBefore`, `estimatedTokensAfter`);
        raises the original error (e.g. "Nothing to compact (session too small)")."""
        if self.compaction.running or self._busy == "compact":
            raise SessionBusyError("Compaction already in progress")
        if self._busy == "navigate":
            raise SessionBusyError("Tree navigation in progress; compact after it finishes")
        if self._busy == "run":
            if asyncio.current_task() is self._task:
                raise SessionBusyError(
                    "compact() was called from inside the running agent and would wait for itself; "
                    "use the request_compaction tool, or call compact() after the run settles"
                )
            await self.abort()
        self._enter("compact")
        try:
            return await self.compaction.compact_manual(instructions)
        finally:
            self._leave("compact")

    async def navigate_tree(
        self,
        target_id: str,
        *,
        summarize: bool = False,
        custom_instructions: str | None = None,
        replace_instructions: bool = False,
        label: str | None = None,
    ) -> NavigationResult:
        """Move the leaf to `target_id`, optionally leaving a branch summary (spec 03 §8)."""
        if self._busy == "run":
            raise SessionBusyError("Wait for the current response to finish before navigating the session tree.")
        if self._busy is not None or self.compaction.running:
            raise SessionBusyError(
                "Wait for the current compaction or tree navigation to finish before navigating the session tree."
            )
        self._enter("navigate")
        self._nav_signal = signal = AbortSignal()
        try:
            return await navigate_tree(
                self, target_id, summarize=summarize, custom_instructions=custom_instructions,
                replace_instructions=replace_instructions, label=label, signal=signal,
            )
        finally:
            self._nav_signal = None
            self._leave("navigate")

    # -- runs --------------------------------------------------------------------------------------

    async def _run(self, prompts: list[AgentMessage]) -> None:
        self._enter("run")
        self._signal = signal = AbortSignal()
        self.compaction_requests_used = 0
        self._last_assistant, self._last_tool_results = None, []
        capture = self.retries.capture()
        capture.__enter__()
        try:
            await self._before_prompt(signal)
            if signal.aborted:
                await self.emit({"type": "prompt_cancelled", "messages": prompts})
                return
            await self._consume(run_agent_loop(prompts, self._context(), self._loop_config(), signal))
            while not signal.aborted:
                go_on = await self._after_run(signal)
                if not await self._continue(go_on, signal):
                    break
        finally:
            capture.__exit__(None, None, None)
            if signal.aborted:
                await self.retries.close_cancelled()
            self._signal = None
            self._leave("run")
            await self.emit({"type": "agent_settled"})

    async def _continue(self, go_on: bool, signal: AbortSignal) -> bool:
        """Start the next low-level run: continue from the transcript, or deliver queued messages.
        Never fails with "Cannot continue from message role: assistant" (spec 03 §12 item 15)."""
        if signal.aborted:
            return False
        if go_on:
            messages = self.messages
            if any(m.get("role") != "system" for m in messages) and messages[-1].get("role") != "assistant":
                await self._consume(run_agent_loop_continue(self._context(), self._loop_config(), signal))
                return True
        queued = self._drain(self._steering, self.steering_mode) or self._drain(self._follow_up, self.follow_up_mode)
        if not queued:
            return False
        await self._consume(run_agent_loop(queued, self._context(), self._loop_config(), signal))
        return True

    def request_options(self) -> StreamOptions:
        """`stream_options` with the session's HTTP client: one client (and so one pooled
        connection per host, kept alive) for every request of the session, turns and summaries
        alike, unless the caller passed its own `client`."""
        options = self.stream_options
        if options.client is not None:
            return options
        loop = asyncio.get_running_loop()
        if self._http is None or self._http_loop is not loop:
            # A client's connections belong to the event loop that opened them.
            self._http, self._http_loop = default_client(), loop
        return dataclasses.replace(options, client=self._http)

    async def aclose(self) -> None:
        """Close the session's own HTTP client (its kept-alive connections)."""
        client, self._http, self._http_loop = self._http, None, None
        if client is not None:
            await client.aclose()

    def _context(self) -> AgentContext:
        return AgentContext(list(self.messages), self.system_prompt, list(self.tools))  # the loop appends to it

    def _loop_config(self) -> AgentLoopConfig:
        options = self.request_options()
        if options.session_id is None:
            options = dataclasses.replace(options, session_id=self.manager.get_session_id())
        return AgentLoopConfig(
            model=self.model,
            thinking_level=self.thinking_level,
            stream_fn=self._recorded_stream,
            stream_options=options,
            hooks=self.hooks,
            prepare_next_turn=self._prepare_next_turn,
            prepare_request=self._prepare_request,
            get_steering_messages=lambda: self._drain(self._steering, self.steering_mode),
            get_follow_up_messages=lambda: self._drain(self._follow_up, self.follow_up_mode),
            tool_execution=self.tool_execution,
            clock=self.clock,
        )

    def _recorded_stream(self, model: Model, context: Any, options: StreamOptions) -> Any:
        """`stream_fn`, remembering the request: a summary may be sent as its cached prefix
        (compaction.reusePromptCache)."""
        self.last_request = SessionRequest(model, context, options, int(time.time() * 1000))
        return self.stream_fn(model, context, options)

    async def _consume(self, events: AsyncIterator[AgentEvent]) -> None:
        async for event in events:
            await self._handle(event)

    async def _handle(self, event: AgentEvent) -> None:
        kind = event["type"]
        message: Any = event.get("message")
        if kind == "message_start" and message.get("role") == "user":
            self.compaction.fuse = False
            await self._emit_queue()  # a queued message was delivered
        elif kind == "message_end":
            async with self.manager.aexclusive(strict=False):  # waiting for the lock yields to the loop
                self._persist(message)
            if message.get("role") == "assistant":
                self._last_assistant = message
                if message.get("stopReason") not in ("error", "length"):
                    self.compaction.fuse = False
        elif kind == "turn_end":
            self._last_tool_results = list(event.get("toolResults") or [])  # type: ignore[call-overload]
        elif kind == "agent_end":
            aborted = self._signal is not None and self._signal.aborted
            will_retry = self.retries.will_retry(event["messages"], aborted)  # type: ignore[typeddict-item]
            event = {**event, "willRetry": will_retry}  # type: ignore[assignment]
        await self.emit(event)
        if kind == "message_end" and message.get("role") == "assistant":
            await self.retries.on_assistant_end(message)

    def _persist(self, message: AgentMessage) -> None:
        role = message.get("role")
        if role == "custom":
            m: Any = message
            entry_id = self.manager.append_custom_message_entry(m["customType"], m["content"], m["display"],
                                                                m.get("details"))
        elif role in _PERSISTED_AS_MESSAGE:
            entry_id = self.manager.append_message(message)  # type: ignore[arg-type]
        else:
            return
        self._entry_of[id(message)] = (message, entry_id)

    async def omit(self, messages: Sequence[Any]) -> list[str]:
        """Remove `messages` from the model's context with `context_edit{replacement: null}` entries
        (the raw entries stay in the file); `entry_appended` for each. Returns the edit ids."""
        ids: list[str] = []
        for message in messages:
            entry_id = self.entry_id_of(message)
            if entry_id is None or not self.manager.contributes_to_context(entry_id):
                continue
            async with self.manager.aexclusive(strict=False):  # waiting for the lock yields to the loop
                edit_id = self.manager.append_context_edit(entry_id, None)
            ids.append(edit_id)
            await self.emit({"type": "entry_appended", "entry": self.manager.get_entry(edit_id)})
        return ids

    # -- the host interfaces (agent/host.py) ---------------------------------------------------------

    async def emit(self, event: Any) -> None:
        """Deliver `event` to every listener, in subscription order."""
        for listener in list(self._listeners):
            result = listener(event)
            if inspect.isawaitable(result):
                await result

    async def report_hook_error(self, path: str, event: str, exc: Exception) -> None:
        await self.emit({"type": "extension_error", "extensionPath": path, "event": event,
                         "error": f"{type(exc).__name__}: {exc}"})

    async def run_hook(self, event: Any, payload: Any) -> list[Any]:
        """Run the `event` handlers; their errors become `extension_error` events."""
        results, errors = await self.hooks.emit(event, payload)
        for err in errors:
            await self.emit({"type": "extension_error", "extensionPath": err.path, "event": err.event,
                             "error": err.error})
        return results

    def summary_completion(self) -> Completion:
        """The model that writes summaries (the `summarizer`, else the session's model)."""
        return self.compaction.completion("branch_summary")

    def estimated_context_tokens(self) -> int:
        return self.compaction.projected_tokens()

    def compaction_threshold(self) -> int | None:
        return self.compaction.threshold()

    def compaction_requests_left(self) -> int:
        return max(0, self.compaction_requests_per_prompt - self.compaction_requests_used)

    def request_compaction(self, instructions: str) -> None:
        """Compact before the next request (the `request_compaction` tool); `ValueError` when
        the per-prompt budget is used up or there is nothing to compact."""
        if self.compaction_requests_used >= self.compaction_requests_per_prompt:
            raise ValueError(
                f"Compaction was already requested {self.compaction_requests_used} time(s) for this prompt "
                f"(limit {self.compaction_requests_per_prompt}); continue the task."
            )
        plan, why = self.compaction.plan("manual")
        if plan is None:
            raise ValueError(f"Nothing to compact now: {why}. Continue the task.")
        self.compaction_requests_used += 1
        self.compaction.requested = instructions

    # -- the three checks ----------------------------------------------------------------------------

    async def _prepare_next_turn(self, turn: TurnContext) -> NextTurn:
        """Between turns of one run, before another request (check A, then a fresh projection)."""
        await self.compaction.check_threshold(self._signal)
        return NextTurn(
            messages=self.messages, tools=list(self.tools), model=self.model, thinking_level=self.thinking_level
        )

    async def _prepare_request(self, request: RequestContext, signal: AbortSignal) -> RequestContext:
        """Before every request: the current projection, tools, model and thinking level."""
        return RequestContext(self.messages, list(self.tools), self.model, self.thinking_level, self.system_prompt)

    async def _after_run(self, signal: AbortSignal) -> bool:
        """After each low-level run (check B, spec 03 §2.3). True = continue the session run."""
        message, results = self._last_assistant, self._last_tool_results
        self._last_assistant, self._last_tool_results = None, []
        if signal.aborted:
            await self.retries.close_cancelled()
            return False
        if message is None:
            return self.has_queued_messages()
        if message.get("stopReason") == "error" and self.retries.is_retryable(message):
            if await self.retries.prepare(message, signal):
                if signal.aborted:
                    return False
                await self.compaction.check_threshold(signal)  # ours: a retry honours the threshold
                return not signal.aborted
        if signal.aborted:
            await self.retries.close_cancelled()
            return False
        if message.get("stopReason") == "error" and self.retries.attempt > 0:
            await self.retries.close_exhausted(message)
        if await self.compaction.check(message, skip_aborted=True, tool_results=results, signal=signal):
            return True
        return self.has_queued_messages()

    async def _before_prompt(self, signal: AbortSignal) -> None:
        """Before a new prompt's run starts (check C; aborted replies count here)."""
        last = next((m for m in reversed(self.messages) if m.get("role") == "assistant"), None)
        if last is not None:
            await self.compaction.check(last, skip_aborted=False, pre_prompt=True, signal=signal)


def reply_context_tokens(message: Any) -> int | None:
    """Context tokens a valid reply reports (None for aborted/error/zero usage)."""
    usage = get_assistant_usage(message)
    return int(calculate_context_tokens(usage)) if usage is not None else None

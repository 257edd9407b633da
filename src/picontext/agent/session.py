"""AgentSession: one conversation, bound to a `SessionManager` (Pi agent-session.ts, first version).

It drives the loop (`picontext.agent.loop`) and consumes its events: every message is persisted
at its `message_end`, then the event goes to the listeners. Each request is built from the
session projection (`manager.build_session_projection().messages`), so whatever the session
file says (compactions, context edits) is what the model sees.

Seams for compaction (spec 03 §2), deliberately empty in this version:

* `_prepare_next_turn` runs between turns of a run, before another request: it calls
  `_check_compaction("threshold", ...)` (check A) and then refreshes the projection;
* `_prepare_request` runs before every request: it swaps in the fresh projection;
* `_after_run` runs after each low-level run (check B) and `_before_prompt` before a new prompt
  (check C); both call `_check_compaction`.

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
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from picontext._clock import Clock, SystemClock
from picontext.agent.events import AgentEvent
from picontext.agent.hooks import Hooks
from picontext.agent.loop import AgentLoopConfig, run_agent_loop, run_agent_loop_continue
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
from picontext.ai.event_stream import AbortSignal
from picontext.ai.models import Model
from picontext.ai.providers import StreamOptions
from picontext.ai.stream import StreamFunction, stream
from picontext.ai.types import AgentMessage, AssistantMessage, ImageContent
from picontext.session.manager import SessionManager

__all__ = ["AgentSession", "ContextUsage", "Listener", "SessionBusyError"]

Listener = Callable[[AgentEvent], Awaitable[None] | None]
CompactionCheck = Literal["threshold", "post_run", "pre_prompt"]
_PERSISTED_AS_MESSAGE = frozenset({"system", "user", "assistant", "toolResult", "bashExecution"})


class SessionBusyError(RuntimeError):
    """`prompt()` while a run is active, without saying whether to steer or follow up."""


@dataclass(frozen=True, slots=True)
class ContextUsage:
    """How full the context window is. `tokens`/`percent` are None when unknown (e.g. right
    after a compaction, until the next reply reports usage)."""

    tokens: int | None
    context_window: int
    percent: float | None


def usage_tokens(message: AssistantMessage) -> int:
    """Context size a reply reports (Pi `calculateContextTokens`): totalTokens, else the sum."""
    usage = message.get("usage") or {}
    total = usage.get("totalTokens") or 0
    if total:
        return int(total)
    return int(sum(usage.get(k, 0) or 0 for k in ("input", "output", "cacheRead", "cacheWrite")))


class AgentSession:
    """One conversation: a model, tools, queues and a session file.

    Invariant: every message the loop finalizes is in the manager (appended at its
    `message_end`) before listeners see that event, and at most one run is active.
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
    ) -> None:
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
        self._listeners: list[Listener] = []
        self._steering: list[AgentMessage] = []
        self._follow_up: list[AgentMessage] = []
        self._shown_queue: tuple[list[str], list[str]] = ([], [])
        self._signal: AbortSignal | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[Any] | None = None
        self.model = model
        self.thinking_level: ThinkingLevel = "off"
        self._record_initial_settings(model, thinking_level)

    # -- state ---------------------------------------------------------------------------------

    @property
    def messages(self) -> list[AgentMessage]:
        """The model-visible transcript: the session projection."""
        return list(self.manager.build_session_projection().messages)

    @property
    def is_streaming(self) -> bool:
        return not self._idle.is_set()

    @property
    def pending_message_count(self) -> int:
        return len(self._steering) + len(self._follow_up)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` (sync or async) with every event; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # -- settings --------------------------------------------------------------------------------

    def _record_initial_settings(self, model: Model, thinking_level: ThinkingLevel | None) -> None:
        fresh = not self.manager.get_entries()
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

    def get_context_usage(self) -> ContextUsage | None:
        """Tokens in the context as the latest valid reply on the projection reported them.

        Placeholder until compaction lands: it does not yet estimate messages after that reply
        nor report None right after a compaction (spec 03 §7).
        """
        window = self.model.get("contextWindow") or 0
        if window <= 0:
            return None
        for message in reversed(self.messages):
            if message.get("role") == "assistant" and message.get("stopReason") not in ("error", "aborted"):
                tokens = usage_tokens(message)  # type: ignore[arg-type]
                return ContextUsage(tokens, window, tokens / window * 100)
        return ContextUsage(None, window, None)

    # -- queues ------------------------------------------------------------------------------------

    def _user_message(self, text: str, images: Sequence[ImageContent] = ()) -> AgentMessage:
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

    def _drain(self, queue: list[AgentMessage], mode: QueueMode) -> list[AgentMessage]:
        taken = queue[:] if mode == "all" else queue[:1]
        del queue[: len(taken)]
        return taken

    def _queue_state(self) -> tuple[list[str], list[str]]:
        def texts(queue: list[AgentMessage]) -> list[str]:
            return [c.get("text", "") for m in queue for c in m["content"] if c.get("type") == "text"]  # type: ignore[union-attr]

        return texts(self._steering), texts(self._follow_up)

    async def _emit_queue(self) -> None:
        """Tell listeners what is queued (Pi `queue_update`), when it changed since the last time."""
        state = self._queue_state()
        if state == self._shown_queue:
            return
        self._shown_queue = state
        await self._emit({"type": "queue_update", "steering": state[0], "followUp": state[1]})

    # -- runs --------------------------------------------------------------------------------------

    async def prompt(
        self,
        text: str,
        *,
        images: Sequence[ImageContent] = (),
        streaming_behavior: Literal["steer", "followUp"] | None = None,
    ) -> None:
        """Send a user message and run until the agent settles (or queue it while a run is active)."""
        if self.is_streaming:
            if streaming_behavior == "steer":
                return await self.steer(text)
            if streaming_behavior == "followUp":
                return await self.follow_up(text)
            raise SessionBusyError(
                "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
            )
        await self._run([self._user_message(text, images)])

    async def abort(self) -> None:
        """Stop the active run: the streamed reply ends "aborted", running tools are stopped; then
        wait until the session is idle (unless called from inside the run itself)."""
        if self._signal is not None:
            self._signal.abort("aborted by user")
        if self._task is not None and asyncio.current_task() is not self._task:
            await self._idle.wait()

    async def wait_for_idle(self) -> None:
        await self._idle.wait()

    async def _run(self, prompts: list[AgentMessage]) -> None:
        self._idle.clear()
        self._task = asyncio.current_task()
        self._signal = signal = AbortSignal()
        try:
            await self._before_prompt()
            await self._consume(run_agent_loop(prompts, self._context(), self._loop_config(), signal))
            while not signal.aborted:
                if await self._after_run():
                    await self._consume(run_agent_loop_continue(self._context(), self._loop_config(), signal))
                    continue
                queued = self._drain(self._steering, self.steering_mode) or self._drain(
                    self._follow_up, self.follow_up_mode
                )
                if not queued:
                    break
                await self._consume(run_agent_loop(queued, self._context(), self._loop_config(), signal))
        finally:
            self._signal = None
            self._task = None
            self._idle.set()
            await self._emit({"type": "agent_settled"})

    def _context(self) -> AgentContext:
        return AgentContext(self.messages, self.system_prompt, list(self.tools))

    def _loop_config(self) -> AgentLoopConfig:
        options = self.stream_options
        if options.session_id is None:
            options = dataclasses.replace(options, session_id=self.manager.get_session_id())
        return AgentLoopConfig(
            model=self.model,
            thinking_level=self.thinking_level,
            stream_fn=self.stream_fn,
            stream_options=options,
            hooks=self.hooks,
            prepare_next_turn=self._prepare_next_turn,
            prepare_request=self._prepare_request,
            get_steering_messages=lambda: self._drain(self._steering, self.steering_mode),
            get_follow_up_messages=lambda: self._drain(self._follow_up, self.follow_up_mode),
            tool_execution=self.tool_execution,
            clock=self.clock,
        )

    async def _consume(self, events: AsyncIterator[AgentEvent]) -> None:
        async for event in events:
            await self._handle(event)

    async def _handle(self, event: AgentEvent) -> None:
        kind = event["type"]
        if kind == "message_start" and event["message"].get("role") == "user":  # type: ignore[typeddict-item]
            await self._emit_queue()  # a queued message was delivered
        elif kind == "message_end":
            self._persist(event["message"])  # type: ignore[typeddict-item]
        elif kind == "agent_end":
            event = {**event, "willRetry": False}  # type: ignore[assignment]
        await self._emit(event)

    def _persist(self, message: AgentMessage) -> None:
        role = message.get("role")
        if role == "custom":
            m: Any = message
            self.manager.append_custom_message_entry(m["customType"], m["content"], m["display"], m.get("details"))
        elif role in _PERSISTED_AS_MESSAGE:
            self.manager.append_message(message)  # type: ignore[arg-type]

    async def _emit(self, event: AgentEvent) -> None:
        for listener in list(self._listeners):
            result = listener(event)
            if inspect.isawaitable(result):
                await result

    # -- seams for compaction ----------------------------------------------------------------------

    async def _check_compaction(self, check: CompactionCheck, message: AssistantMessage | None = None) -> bool:
        """Decide whether to compact now, and do it. No-op in this version; returns False.

        Hook point for the compaction layer (spec 03 §2.5 `_checkCompaction`): it will apply the
        gates (enabled, aborted, same model, usage newer than the latest compaction, projection
        consistency), run threshold compaction or overflow recovery, emit compaction_start/end,
        and return True when the caller should continue the run (e.g. retry after recovery).
        """
        return False

    async def _prepare_next_turn(self, turn: TurnContext) -> NextTurn:
        """Between turns of one run, before another request (check A, then a fresh projection)."""
        await self._check_compaction("threshold", turn.message)
        return NextTurn(
            messages=self.messages, tools=list(self.tools), model=self.model, thinking_level=self.thinking_level
        )

    async def _prepare_request(self, request: RequestContext, signal: AbortSignal) -> RequestContext:
        """Before every request: the current projection, tools, model and thinking level."""
        return RequestContext(self.messages, list(self.tools), self.model, self.thinking_level, self.system_prompt)

    async def _after_run(self) -> bool:
        """After each low-level run (check B). True = continue the session run with another one."""
        return await self._check_compaction("post_run")

    async def _before_prompt(self) -> None:
        """Before a new prompt's run starts (check C; aborted replies count here)."""
        await self._check_compaction("pre_prompt")

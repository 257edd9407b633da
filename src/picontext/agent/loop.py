"""The agent loop: prompt -> stream the reply -> run its tool calls -> next request, until the
model stops (Pi `runAgentLoop`/`runLoop` in packages/agent/src/agent-loop.ts, spec 03 §1.2-§1.3).

`run_agent_loop(prompts, context, config, signal)` is an async generator of `AgentEvent`s. It
appends every message it finalizes to `context.messages` and never writes to disk: persisting
and rendering are consumers of the events. It holds no state between calls.

Two seams keep each request fresh (the session hooks compaction in here):

* `config.prepare_next_turn(TurnContext)`: between turns of one run, only when another request
  follows; may replace the messages, tools, model and thinking level;
* `config.prepare_request(RequestContext, signal)`: immediately before every request, the first
  included; the session swaps in the current session projection.

Abort (`signal.abort()`) at any point leaves a valid transcript: the reply being streamed ends
with stopReason "aborted" and is kept; every tool call of a finished reply gets a result (an
error result "Operation aborted" for calls cut short or never started).

Example::

    context = AgentContext(system_prompt="Be brief.", tools=coding_tools(cwd))
    config = AgentLoopConfig(model=model)
    async for event in run_agent_loop([user_message("hi")], context, config):
        print(event["type"])
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from picontext._clock import Clock, SystemClock
from picontext.agent._validate import validate_arguments
from picontext.agent.events import AgentEvent
from picontext.agent.hooks import HookError, Hooks, ToolCallInfo
from picontext.agent.types import (
    AgentContext,
    AgentTool,
    AgentToolResult,
    NextTurn,
    PrepareNextTurn,
    PrepareRequest,
    RequestContext,
    ThinkingLevel,
    TurnContext,
    tool_declaration,
)
from picontext.ai.event_stream import AbortSignal, wait_unless_aborted
from picontext.ai.models import Model
from picontext.ai.providers import StreamOptions
from picontext.ai.stream import StreamFunction, stream
from picontext.ai.types import AgentMessage, AssistantMessage, ToolCall, ToolResultMessage, empty_usage
from picontext.session.convert import convert_to_llm
from picontext.session.system_prompt import collapse_system_messages, get_current_system_message, system_message_text

__all__ = [
    "ABORTED_TOOL_TEXT",
    "TRUNCATED_CALL_TEXT",
    "AgentLoopConfig",
    "run_agent_loop",
    "run_agent_loop_continue",
    "system_declaration",
    "user_message",
]

ABORTED_TOOL_TEXT = "Operation aborted"
TRUNCATED_CALL_TEXT = (
    "The reply hit the output token limit, so the arguments of this tool call may be truncated. "
    "The tool was not run. Re-issue the call; split large content into smaller pieces."
)
MessageSource = Callable[[], list[AgentMessage]]


@dataclass(slots=True, kw_only=True)
class AgentLoopConfig:
    """Everything one run needs besides its context. Never persisted (snake_case).

    Attributes:
        model: the model of the first request (`prepare_next_turn`/`prepare_request` may change it).
        thinking_level: reasoning level; sent only to reasoning models.
        stream_fn: `stream(model, context, options)`; tests and extensions may wrap it.
        stream_options: per-request options (key, client, ...); the loop sets `signal` and `reasoning`.
        hooks: `context`, `tool_call`, `tool_result` hooks.
        prepare_next_turn / prepare_request: the seams described in the module docstring.
        get_steering_messages: drains queued steering messages (delivered after the current
            turn's tools, before the next request).
        get_follow_up_messages: drains queued follow-ups (delivered when the loop would stop).
        tool_execution: "parallel" (Pi default) or "sequential".
        abort_grace: seconds a tool may take to return after an abort before it is cancelled.
        clock: timestamps of the messages the loop creates.
    """

    model: Model
    thinking_level: ThinkingLevel = "off"
    stream_fn: StreamFunction = stream
    stream_options: StreamOptions = field(default_factory=StreamOptions)
    hooks: Hooks = field(default_factory=Hooks)
    prepare_next_turn: PrepareNextTurn | None = None
    prepare_request: PrepareRequest | None = None
    get_steering_messages: MessageSource | None = None
    get_follow_up_messages: MessageSource | None = None
    tool_execution: Literal["parallel", "sequential"] = "parallel"
    abort_grace: float = 2.0
    clock: Clock = field(default_factory=SystemClock)


def user_message(text: str, *, timestamp: int | None = None) -> AgentMessage:
    """A user message with one text block."""
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ts}


def system_declaration(context: AgentContext, timestamp: int) -> AgentMessage | None:
    """The system message declaring the prompt and tools, when they differ from what the
    transcript already declares (Pi's tool-delta declaration); None when nothing changed.

    The first declaration carries the prompt and every tool; later ones only the tool delta
    (a changed prompt text is not re-declared in this version).
    """
    wanted = {t.name: tool_declaration(t) for t in context.tools}
    current = get_current_system_message(context.messages)
    if current is None:
        if not context.system_prompt and not wanted:
            return None
        message: dict[str, Any] = {"role": "system", "content": context.system_prompt or ""}
        if wanted:
            message["toolsAdded"] = list(wanted.values())
        message["timestamp"] = timestamp
        return message  # type: ignore[return-value]
    declared = current.get("toolsAdded")
    have = {t["name"]: t for t in declared if isinstance(t, dict) and isinstance(t.get("name"), str)} \
        if isinstance(declared, list) else {}
    added = [decl for name, decl in wanted.items() if have.get(name) != decl]
    removed = [{"name": name} for name in have if name not in wanted]
    if not added and not removed:
        return None
    delta: dict[str, Any] = {"role": "system", "content": ""}
    if added:
        delta["toolsAdded"] = added
    if removed:
        delta["toolsRemoved"] = removed
    delta["timestamp"] = timestamp
    return delta  # type: ignore[return-value]


def request_messages(messages: Sequence[AgentMessage]) -> list[dict[str, Any]]:
    """Provider messages: custom roles converted, system messages collapsed into one head whose
    content is the full prompt text (sections included)."""
    llm = collapse_system_messages(convert_to_llm(messages))
    if llm and llm[0].get("role") == "system":
        head = llm[0]
        llm[0] = {"role": "system", "content": system_message_text(head), "timestamp": head.get("timestamp", 0)}
    return llm


def tool_calls_of(message: AssistantMessage) -> list[ToolCall]:
    return [cast(ToolCall, b) for b in message.get("content") or []
            if isinstance(b, dict) and b.get("type") == "toolCall"]


async def run_agent_loop(
    prompts: list[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None = None,
) -> AsyncIterator[AgentEvent]:
    """A prompt run: declare the system prompt/tools if they changed, send `prompts`, loop."""
    run = _Run(context, config, signal or AbortSignal())
    async for event in run.start(prompts):
        yield event


async def run_agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal | None = None,
) -> AsyncIterator[AgentEvent]:
    """A continue run: make the next request from the transcript as it is (Pi `continue`).

    Raises `ValueError` when there is nothing to continue from or the transcript ends with an
    assistant reply (queue a steering or follow-up message instead).
    """
    if not any(m.get("role") != "system" for m in context.messages):
        raise ValueError("No messages to continue from")
    if context.messages[-1].get("role") == "assistant":
        raise ValueError("Cannot continue from message role: assistant")
    run = _Run(context, config, signal or AbortSignal())
    async for event in run.start(None):
        yield event


@dataclass(slots=True)
class _Prepared:
    call: ToolCall
    tool: AgentTool | None
    args: dict[str, Any]
    error: str | None = None  # set when the call fails before running


class _Run:
    """State of one low-level run. Invariant: `new_messages` = every message ended by this run."""

    def __init__(self, context: AgentContext, config: AgentLoopConfig, signal: AbortSignal) -> None:
        self.context = context
        self.config = config
        self.signal = signal
        self.model = config.model
        self.thinking: ThinkingLevel = config.thinking_level
        self.new_messages: list[AgentMessage] = []
        self.last: AssistantMessage | None = None
        self.turn_results: list[ToolResultMessage] = []

    def now(self) -> int:
        return self.config.clock.now_ms()

    # -- driver ------------------------------------------------------------------------------------

    async def start(self, prompts: list[AgentMessage] | None) -> AsyncIterator[AgentEvent]:
        yield {"type": "agent_start"}
        yield {"type": "turn_start"}
        in_turn = True
        try:
            if prompts is not None:
                declaration = system_declaration(self.context, self.now())
                for message in ([declaration] if declaration else []) + list(prompts):
                    for event in self.end_message(message):
                        yield event
            async for event in self.turns():
                if event["type"] == "turn_start":
                    in_turn = True
                elif event["type"] == "turn_end":
                    in_turn = False
                yield event
        except Exception as exc:  # a hook or tool plumbing failed: end the run with a valid transcript
            for event in self.fail(exc, in_turn):
                yield event
            return
        yield {"type": "agent_end", "messages": list(self.new_messages)}

    def fail(self, exc: Exception, in_turn: bool) -> list[AgentEvent]:
        message: AssistantMessage = {
            "role": "assistant",
            "content": [{"type": "text", "text": ""}],
            "api": self.model["api"],
            "provider": self.model["provider"],
            "model": self.model["id"],
            "usage": empty_usage(),
            "stopReason": "aborted" if self.signal.aborted else "error",
            "timestamp": self.now(),
            "errorMessage": str(exc) or type(exc).__name__,
        }
        events: list[AgentEvent] = [] if in_turn else [{"type": "turn_start"}]
        events += self.end_message(message)
        events.append({"type": "turn_end", "message": message, "toolResults": []})
        events.append({"type": "agent_end", "messages": list(self.new_messages)})
        return events

    def end_message(self, message: AgentMessage) -> list[AgentEvent]:
        """message_start + message_end for a message that is complete already; appends it."""
        self.context.messages.append(message)
        self.new_messages.append(message)
        return [{"type": "message_start", "message": message}, {"type": "message_end", "message": message}]

    def poll(self, source: Callable[[], list[AgentMessage]] | None) -> list[AgentMessage]:
        return list(source()) if source is not None else []

    async def turns(self) -> AsyncIterator[AgentEvent]:
        pending = self.poll(self.config.get_steering_messages)
        has_more = True
        first = True
        while True:
            while has_more or pending:
                if not first:
                    await self.next_turn()
                    if not pending:
                        pending = self.poll(self.config.get_steering_messages)
                    yield {"type": "turn_start"}
                first = False
                for queued in pending:
                    for event in self.end_message(queued):
                        yield event
                pending = []
                async for event in self.request():
                    yield event
                message = self.last
                assert message is not None
                if message["stopReason"] in ("error", "aborted"):
                    yield {"type": "turn_end", "message": message, "toolResults": []}
                    return
                self.turn_results = []
                calls = tool_calls_of(message)
                results: list[AgentToolResult] = []
                if calls:
                    async for event in self.run_tools(message, calls, results):
                        yield event
                has_more = bool(calls) and not (results and all(r.terminate for r in results))
                yield {"type": "turn_end", "message": message, "toolResults": list(self.turn_results)}
                if self.signal.aborted:
                    return
                pending = self.poll(self.config.get_steering_messages)
            pending = self.poll(self.config.get_follow_up_messages)
            if not pending:
                return

    async def next_turn(self) -> None:
        hook = self.config.prepare_next_turn
        if hook is None or self.last is None:
            return
        turn = TurnContext(self.context, self.model, self.thinking, self.last, list(self.turn_results))
        update: NextTurn | None = await hook(turn)
        if update is None:
            return
        if update.messages is not None:
            self.context.messages = list(update.messages)
        if update.tools is not None:
            self.context.tools = list(update.tools)
        if update.model is not None:
            self.model = update.model
        if update.thinking_level is not None:
            self.thinking = update.thinking_level

    # -- one request ---------------------------------------------------------------------------

    async def prepared_request(self) -> tuple[RequestContext, list[HookError]]:
        req = RequestContext(
            self.context.messages,  # adopted below as it is: a hook changing it in place changes the same
            list(self.context.tools),
            self.model,
            self.thinking,
            self.context.system_prompt,
        )
        if self.config.prepare_request is not None:
            replaced = await self.config.prepare_request(req, self.signal)
            if replaced is not None:
                req = replaced
        if req.messages is not self.context.messages:  # replaced (AgentSession: a view): a list of our own
            self.context.messages = list(req.messages)
        self.context.tools = list(req.tools)
        self.model, self.thinking = req.model, req.thinking_level
        messages, errors = await self.config.hooks.run_context(req.messages)  # copies only for hooks
        req.messages = messages
        return req, errors

    async def request(self) -> AsyncIterator[AgentEvent]:
        req, errors = await self.prepared_request()
        for err in errors:
            yield {"type": "extension_error", "extensionPath": err.path, "event": err.event, "error": err.error}
        options = dataclasses.replace(
            self.config.stream_options,
            signal=self.signal,
            reasoning=self.thinking if self.model.get("reasoning") and self.thinking != "off" else None,
        )
        provider_context: dict[str, Any] = {"messages": request_messages(req.messages)}
        provider_context["tools"] = [tool_declaration(t) for t in req.tools]
        started = False
        try:
            response = self.config.stream_fn(self.model, provider_context, options)  # type: ignore[arg-type]
            async for ev in response:
                if ev["type"] == "start":
                    started = True
                    yield {"type": "message_start", "message": _snapshot(ev["partial"])}
                elif ev["type"] in ("done", "error"):
                    break
                else:
                    partial = ev["partial"]  # type: ignore[typeddict-item]
                    yield {"type": "message_update", "message": partial, "assistantMessageEvent": ev}
            final = await response.result()
        except Exception as exc:  # the stream function refused before the call (no key, bad api)
            final = self.failed_reply(exc)
        self.last = final
        self.context.messages.append(final)
        self.new_messages.append(final)
        if not started:
            yield {"type": "message_start", "message": final}
        yield {"type": "message_end", "message": final}

    def failed_reply(self, exc: Exception) -> AssistantMessage:
        return {
            "role": "assistant",
            "content": [],
            "api": self.model["api"],
            "provider": self.model["provider"],
            "model": self.model["id"],
            "usage": empty_usage(),
            "stopReason": "aborted" if self.signal.aborted else "error",
            "timestamp": self.now(),
            "errorMessage": str(exc) or type(exc).__name__,
        }

    # -- tools ---------------------------------------------------------------------------------

    async def prepare(self, call: ToolCall, truncated: bool) -> tuple[_Prepared, list[HookError]]:
        args = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
        tool = next((t for t in self.context.tools if t.name == call.get("name")), None)
        if truncated:
            return _Prepared(call, tool, args, TRUNCATED_CALL_TEXT), []
        if tool is None:
            names = ", ".join(t.name for t in self.context.tools) or "none"
            return _Prepared(call, None, args, f"Tool {call.get('name')!r} not found (available: {names})"), []
        problem = validate_arguments(tool.parameters, args)
        if problem:
            return _Prepared(call, tool, args, f"Invalid arguments for tool {tool.name!r}: {problem}"), []
        decision, errors = await self.config.hooks.run_tool_call(ToolCallInfo(call["id"], tool.name, args))
        if decision is not None:
            return _Prepared(call, tool, args, decision.reason or "Tool call was blocked by a hook"), errors
        return _Prepared(call, tool, args), errors

    async def run_tools(
        self, message: AssistantMessage, calls: list[ToolCall], results: list[AgentToolResult]
    ) -> AsyncIterator[AgentEvent]:
        """Execute `calls`; ends with one tool result message per call, in call order."""
        truncated = message["stopReason"] == "length"
        queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        outcomes: dict[int, AgentToolResult] = {}
        tasks: list[asyncio.Task[None]] = []
        try:
            for index, call in enumerate(calls):
                args = call.get("arguments") if isinstance(call.get("arguments"), dict) else {}
                yield _tool_event("tool_execution_start", call, args)
                if self.signal.aborted:
                    outcome = AgentToolResult.text(ABORTED_TOOL_TEXT, is_error=True)
                    outcomes[index] = outcome
                    yield _tool_end(call, outcome)
                    continue
                prepared, errors = await self.prepare(call, truncated)
                for err in errors:
                    yield {"type": "extension_error", "extensionPath": err.path, "event": err.event, "error": err.error}
                if prepared.error is not None:
                    outcomes[index] = AgentToolResult.text(prepared.error, is_error=True)
                    yield _tool_end(call, outcomes[index])
                    continue
                task = asyncio.ensure_future(self.execute(index, prepared, queue, outcomes))
                tasks.append(task)
                if self.config.tool_execution == "sequential":
                    async for event in _drain(queue, tasks):
                        yield event
            async for event in _drain(queue, tasks):
                yield event
        finally:
            for task in tasks:  # only reached undone when the consumer stopped iterating
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
        for index, call in enumerate(calls):
            outcome = outcomes.get(index) or AgentToolResult.text(ABORTED_TOOL_TEXT, is_error=True)
            results.append(outcome)
            result_message = self.result_message(call, outcome)
            self.turn_results.append(result_message)
            for event in self.end_message(result_message):
                yield event

    async def execute(
        self,
        index: int,
        prepared: _Prepared,
        queue: asyncio.Queue[AgentEvent | None],
        outcomes: dict[int, AgentToolResult],
    ) -> None:
        call, tool = prepared.call, prepared.tool
        assert tool is not None

        def on_update(partial: AgentToolResult) -> None:
            event = _tool_event("tool_execution_update", call, prepared.args)
            event["partialResult"] = {"content": partial.content, "details": partial.details}
            queue.put_nowait(event)

        outcome = await self.guarded(tool, call["id"], prepared.args, on_update)
        info = ToolCallInfo(call["id"], tool.name, prepared.args)
        outcome, errors = await self.config.hooks.run_tool_result(info, outcome)
        for err in errors:
            queue.put_nowait(
                {"type": "extension_error", "extensionPath": err.path, "event": err.event, "error": err.error}
            )
        outcomes[index] = outcome
        queue.put_nowait(_tool_end(call, outcome))

    async def guarded(self, tool: AgentTool, call_id: str, args: dict[str, Any], on_update: Any) -> AgentToolResult:
        """Run a tool; failures become error results; after an abort it gets `abort_grace` seconds."""
        task = asyncio.ensure_future(tool.execute(call_id, args, self.signal, on_update))
        try:
            if not await wait_unless_aborted(task, self.signal):
                await asyncio.wait({task}, timeout=self.config.abort_grace)
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                return AgentToolResult.text(ABORTED_TOOL_TEXT, is_error=True)
            if task.cancelled():
                return AgentToolResult.text(ABORTED_TOOL_TEXT, is_error=True)
            exc = task.exception()
            if exc is not None:
                return AgentToolResult.text(str(exc) or type(exc).__name__, is_error=True)
            result = task.result()
            if not isinstance(result, AgentToolResult):
                return AgentToolResult.text(f"Tool {tool.name!r} returned {type(result).__name__}", is_error=True)
            return result
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def result_message(self, call: ToolCall, outcome: AgentToolResult) -> ToolResultMessage:
        message: ToolResultMessage = {
            "role": "toolResult",
            "toolCallId": call["id"],
            "toolName": call.get("name", ""),
            "content": outcome.content,
            "isError": outcome.is_error,
            "timestamp": self.now(),
        }
        if outcome.details is not None:
            message["details"] = outcome.details
        return message


async def _drain(queue: asyncio.Queue[AgentEvent | None], tasks: list[asyncio.Task[None]]) -> AsyncIterator[AgentEvent]:
    """Yield queued tool events until every task has finished and the queue is empty."""
    while True:
        while not queue.empty():
            event = queue.get_nowait()
            if event is not None:
                yield event
        pending = [t for t in tasks if not t.done()]
        if not pending:
            for task in tasks:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            if queue.empty():
                return
            continue
        getter = asyncio.ensure_future(queue.get())
        await asyncio.wait({getter, *pending}, return_when=asyncio.FIRST_COMPLETED)
        if getter.done():
            event = getter.result()
            if event is not None:
                yield event
        else:
            getter.cancel()
            await asyncio.gather(getter, return_exceptions=True)


def _tool_event(kind: str, call: ToolCall, args: dict[str, Any]) -> Any:
    return {"type": kind, "toolCallId": call["id"], "toolName": call.get("name", ""), "args": args}


def _tool_end(call: ToolCall, outcome: AgentToolResult) -> AgentEvent:
    return {
        "type": "tool_execution_end",
        "toolCallId": call["id"],
        "toolName": call.get("name", ""),
        "result": {"content": outcome.content, "details": outcome.details},
        "isError": outcome.is_error,
    }


def _snapshot(message: AssistantMessage) -> AssistantMessage:
    """A shallow copy with its own content list (the partial keeps changing while streaming)."""
    copy: Any = dict(message)
    copy["content"] = list(message.get("content") or [])
    return copy

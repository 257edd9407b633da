"""The agent loop over real HTTP (ScriptedModelServer) with real tools and files."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, ClassVar

from picontext.agent.events import LOOP_EVENT_TYPES
from picontext.agent.hooks import Hooks, ToolCallDecision
from picontext.agent.loop import (
    ABORTED_TOOL_TEXT,
    TRUNCATED_CALL_TEXT,
    AgentLoopConfig,
    run_agent_loop,
    user_message,
)
from picontext.agent.tools import ReadTool
from picontext.agent.types import AgentContext, AgentToolResult, NextTurn, RequestContext
from picontext.ai.event_stream import AbortSignal
from picontext.ai.providers import StreamOptions
from picontext.errors import ConfigError
from picontext.scripted import ScriptedModelServer, reply, text, tool_call


class Probe:
    """A tool that records its calls; `gate` (optional) is awaited before it returns."""

    name = "probe"
    label = "probe"
    description = "test tool"
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"id": {"type": "string"}, "stop": {"type": "boolean"}},
        "required": ["id"],
    }

    def __init__(self) -> None:
        self.log: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.started: dict[str, asyncio.Event] = {}

    def started_event(self, key: str) -> asyncio.Event:
        return self.started.setdefault(key, asyncio.Event())

    async def execute(self, call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: Any) -> AgentToolResult:
        key = args["id"]
        self.log.append(f"start {key}")
        self.started_event(key).set()
        gate = self.gates.get(key)
        if gate is not None:
            await gate.wait()
        self.log.append(f"end {key}")
        result = AgentToolResult.text(f"result {key}")
        result.terminate = bool(args.get("stop"))
        return result


def config(server: ScriptedModelServer, **kw: Any) -> AgentLoopConfig:
    return AgentLoopConfig(model=server.model("openai-completions"), stream_options=StreamOptions(api_key="k"), **kw)


async def collect(
    prompt: str, context: AgentContext, cfg: AgentLoopConfig, signal: AbortSignal | None = None, on_event: Any = None
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async for event in run_agent_loop([user_message(prompt)], context, cfg, signal):
        events.append(event)
        if on_event is not None:
            on_event(event)
    return events


def shape(events: list[dict[str, Any]]) -> list[str]:
    """Event types with roles, message_update runs collapsed to one 'mu'."""
    out: list[str] = []
    for ev in events:
        kind = ev["type"]
        if kind == "message_update":
            if out[-1] != "mu":
                out.append("mu")
            continue
        if kind in ("message_start", "message_end"):
            out.append(("ms" if kind == "message_start" else "me") + f"({ev['message']['role']})")
        else:
            out.append(kind)
    return out


def request_roles(server: ScriptedModelServer, index: int) -> list[str]:
    return [m["role"] for m in server.requests[index].body["messages"]]


async def test_text_reply_event_order(server: ScriptedModelServer) -> None:
    server.expect(text("Hello there"))
    ctx = AgentContext(system_prompt="Be brief.")
    events = await collect("hi", ctx, config(server))
    assert shape(events) == [
        "agent_start",
        "turn_start",
        "ms(system)",
        "me(system)",
        "ms(user)",
        "me(user)",
        "ms(assistant)",
        "mu",
        "me(assistant)",
        "turn_end",
        "agent_end",
    ]
    assert {e["type"] for e in events} <= set(LOOP_EVENT_TYPES)
    assert [m["role"] for m in ctx.messages] == ["system", "user", "assistant"]
    assert ctx.messages[-1]["content"] == [{"type": "text", "text": "Hello there"}]
    assert events[-1]["messages"] == ctx.messages
    assert server.requests[0].body["messages"][0] == {"role": "system", "content": "Be brief."}


async def test_no_second_system_declaration_when_unchanged(server: ScriptedModelServer) -> None:
    server.expect(text("one"), text("two"))
    ctx = AgentContext(system_prompt="S", tools=[Probe()])
    await collect("a", ctx, config(server))
    events = await collect("b", ctx, config(server))
    assert "ms(system)" not in shape(events)
    assert [t["function"]["name"] for t in server.requests[1].body["tools"]] == ["probe"]


async def test_tool_round_trip_with_real_file(server: ScriptedModelServer, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    server.expect(tool_call("read", {"path": "notes.txt"}), text("It says 42."))
    ctx = AgentContext(tools=[ReadTool(str(tmp_path))])
    events = await collect("what does notes.txt say?", ctx, config(server))
    assert shape(events) == [
        "agent_start",
        "turn_start",
        "ms(system)",
        "me(system)",
        "ms(user)",
        "me(user)",
        "ms(assistant)",
        "mu",
        "me(assistant)",
        "tool_execution_start",
        "tool_execution_end",
        "ms(toolResult)",
        "me(toolResult)",
        "turn_end",
        "turn_start",
        "ms(assistant)",
        "mu",
        "me(assistant)",
        "turn_end",
        "agent_end",
    ]
    assert ctx.messages[0]["toolsAdded"][0]["name"] == "read"  # the tool declaration
    result = ctx.messages[3]
    assert result["role"] == "toolResult" and result["toolName"] == "read" and not result["isError"]
    assert result["content"] == [{"type": "text", "text": "the answer is 42"}]
    second = server.requests[1].body["messages"]
    assert second[-1]["role"] == "tool" and second[-1]["content"] == "the answer is 42"


async def test_parallel_tool_calls_results_in_call_order(server: ScriptedModelServer) -> None:
    server.expect(reply(tool_call("probe", {"id": "a"}), tool_call("probe", {"id": "b"})), text("done"))
    probe = Probe()
    probe.gates["a"] = asyncio.Event()  # a finishes only after b has finished

    def on_event(ev: dict[str, Any]) -> None:
        if ev["type"] == "tool_execution_end" and ev["result"]["content"][0]["text"] == "result b":
            probe.gates["a"].set()

    ctx = AgentContext(tools=[probe])
    events = await collect("go", ctx, config(server), on_event=on_event)
    assert probe.log == ["start a", "start b", "end b", "end a"]
    ends = [e["result"]["content"][0]["text"] for e in events if e["type"] == "tool_execution_end"]
    assert ends == ["result b", "result a"]
    results = [m["content"][0]["text"] for m in ctx.messages if m["role"] == "toolResult"]
    assert results == ["result a", "result b"]


async def test_sequential_mode_runs_one_at_a_time(server: ScriptedModelServer) -> None:
    server.expect(reply(tool_call("probe", {"id": "a"}), tool_call("probe", {"id": "b"})), text("done"))
    probe = Probe()
    await collect("go", AgentContext(tools=[probe]), config(server, tool_execution="sequential"))
    assert probe.log == ["start a", "end a", "start b", "end b"]


async def test_abort_mid_stream_keeps_aborted_reply(server: ScriptedModelServer) -> None:
    release = threading.Event()
    server.expect(text("one two three four five six").hold_after(3, release))
    signal = AbortSignal()

    def on_event(ev: dict[str, Any]) -> None:
        if ev["type"] == "message_update" and not signal.aborted:
            signal.abort()

    ctx = AgentContext()
    try:
        events = await collect("talk", ctx, config(server), signal, on_event)
    finally:
        release.set()
    assert shape(events)[-4:] == ["mu", "me(assistant)", "turn_end", "agent_end"]
    last = ctx.messages[-1]
    assert last["role"] == "assistant" and last["stopReason"] == "aborted"
    assert len(server.requests) == 1


async def test_abort_mid_tool_gives_started_calls_results(server: ScriptedModelServer) -> None:
    server.expect(reply(tool_call("probe", {"id": "slow"}), tool_call("probe", {"id": "fast"})))
    probe = Probe()
    probe.gates["slow"] = asyncio.Event()  # never set: only the abort ends it
    signal = AbortSignal()

    def on_event(ev: dict[str, Any]) -> None:
        if ev["type"] == "tool_execution_end":  # fast finished; slow still running
            signal.abort()

    ctx = AgentContext(tools=[probe])
    cfg = config(server, abort_grace=0.05)
    events = await collect("go", ctx, cfg, signal, on_event)
    roles = [m["role"] for m in ctx.messages]
    assert roles == ["system", "user", "assistant", "toolResult", "toolResult"]
    slow, fast = ctx.messages[3], ctx.messages[4]
    assert slow["isError"] and slow["content"][0]["text"] == ABORTED_TOOL_TEXT
    assert not fast["isError"]
    assert shape(events)[-2:] == ["turn_end", "agent_end"]
    assert len(server.requests) == 1


async def test_steering_delivered_before_next_request_and_follow_up_at_end(server: ScriptedModelServer) -> None:
    server.expect(tool_call("probe", {"id": "a"}), text("after steer"), text("after follow-up"))
    steering = [user_message("steer now")]
    follow = [user_message("one more thing")]

    def take(queue: list[Any]) -> Any:
        return lambda: [queue.pop(0)] if queue else []

    probe = Probe()
    ctx = AgentContext(tools=[probe])
    await collect("go", ctx, config(server, get_steering_messages=take([]), get_follow_up_messages=take(follow)))
    server.expect()
    assert [m["role"] for m in ctx.messages][-2:] == ["user", "assistant"]
    # steering: drained after the tool ran, before the second request
    server.reset()
    server.expect(tool_call("probe", {"id": "b"}), text("ok"))
    ctx2 = AgentContext(tools=[probe])
    polls: list[int] = []

    def steer_source() -> list[Any]:
        polls.append(1)
        return [steering.pop(0)] if len(polls) == 2 and steering else []

    events = await collect("go", ctx2, config(server, get_steering_messages=steer_source))
    assert request_roles(server, 1)[-2:] == ["tool", "user"]
    assert server.requests[1].body["messages"][-1]["content"] == "steer now"  # text-only content: one string
    assert shape(events).count("turn_start") == 2


async def test_length_stop_fails_tool_calls_without_running_them(server: ScriptedModelServer) -> None:
    server.expect(tool_call("probe", {"id": "a"}).with_stop("length"), text("retried"))
    probe = Probe()
    ctx = AgentContext(tools=[probe])
    await collect("go", ctx, config(server))
    assert probe.log == []
    result = ctx.messages[3]
    assert result["isError"] and result["content"][0]["text"] == TRUNCATED_CALL_TEXT
    assert len(server.requests) == 2


async def test_unknown_tool_and_invalid_arguments_are_error_results(server: ScriptedModelServer) -> None:
    server.expect(reply(tool_call("nope", {}), tool_call("probe", {"id": 3})), text("ok"))
    ctx = AgentContext(tools=[Probe()])
    await collect("go", ctx, config(server))
    unknown, invalid = ctx.messages[3], ctx.messages[4]
    assert unknown["isError"] and "Tool 'nope' not found (available: probe)" == unknown["content"][0]["text"]
    assert invalid["isError"] and "id: expected string" in invalid["content"][0]["text"]


async def test_terminating_batch_ends_the_run(server: ScriptedModelServer) -> None:
    server.expect(tool_call("probe", {"id": "a", "stop": True}))
    ctx = AgentContext(tools=[Probe()])
    events = await collect("go", ctx, config(server))
    assert shape(events)[-2:] == ["turn_end", "agent_end"]
    assert ctx.messages[-1]["role"] == "toolResult"


async def test_context_hook_and_tool_call_hook(server: ScriptedModelServer) -> None:
    server.expect(tool_call("probe", {"id": "a"}), text("ok"))
    hooks = Hooks()
    hooks.on("context", lambda msgs: [*msgs, user_message("injected")])

    def broken(_msgs: list[Any]) -> None:
        raise RuntimeError("boom")

    hooks.on("context", broken)
    hooks.on("tool_call", lambda call: ToolCallDecision(block=True, reason="blocked: read-only"))
    probe = Probe()
    ctx = AgentContext(tools=[probe])
    events = await collect("go", ctx, config(server, hooks=hooks))
    assert server.requests[0].body["messages"][-1]["content"] == "injected"
    roles = [m["role"] for m in ctx.messages]
    assert roles == ["system", "user", "assistant", "toolResult", "assistant"]  # the injection is per request only
    assert ctx.messages[3]["content"][0]["text"] == "blocked: read-only" and probe.log == []
    errors = [e for e in events if e["type"] == "extension_error"]
    assert len(errors) == 2 and errors[0]["error"] == "RuntimeError: boom" and errors[0]["event"] == "context"


async def test_prepare_request_before_every_request_and_next_turn_between(server: ScriptedModelServer) -> None:
    server.expect(tool_call("probe", {"id": "a"}), text("ok"))
    calls: list[str] = []

    async def prepare_request(req: RequestContext, signal: AbortSignal) -> RequestContext:
        calls.append(f"request:{len(req.messages)}")
        req.messages = [*req.messages]
        return req

    async def prepare_next_turn(turn: Any) -> NextTurn:
        calls.append(f"next:{turn.message['stopReason']}")
        return NextTurn()

    ctx = AgentContext(tools=[Probe()])
    await collect("go", ctx, config(server, prepare_request=prepare_request, prepare_next_turn=prepare_next_turn))
    assert calls == ["request:2", "next:toolUse", "request:4"]  # system declaration + user, then + reply + result


async def test_stream_function_refusal_ends_with_error_reply(server: ScriptedModelServer) -> None:
    def refuse(model: Any, context: Any, options: Any) -> Any:
        raise ConfigError("No API key for provider 'x'")

    ctx = AgentContext()
    events = await collect("hi", ctx, config(server, stream_fn=refuse))
    assert shape(events)[-4:] == ["ms(assistant)", "me(assistant)", "turn_end", "agent_end"]
    assert ctx.messages[-1]["stopReason"] == "error"
    assert ctx.messages[-1]["errorMessage"] == "No API key for provider 'x'"


async def test_hook_exception_in_prepare_request_gives_valid_transcript(server: ScriptedModelServer) -> None:
    async def broken(req: RequestContext, signal: AbortSignal) -> RequestContext:
        raise RuntimeError("projection failed")

    ctx = AgentContext()
    events = await collect("hi", ctx, config(server, prepare_request=broken))
    assert shape(events)[-4:] == ["ms(assistant)", "me(assistant)", "turn_end", "agent_end"]
    assert ctx.messages[-1]["errorMessage"] == "projection failed"


async def test_prepare_request_changing_the_messages_in_place_is_what_is_sent(server: ScriptedModelServer) -> None:
    """The loop hands `prepare_request` its working list without copying it first (issue 20: no
    per-request copies) and adopts what the hook leaves, changed in place or replaced."""
    server.expect(text("ok"))

    async def prepare_request(req: RequestContext, signal: AbortSignal) -> None:
        assert isinstance(req.messages, list)
        req.messages.append(user_message("added in place"))

    ctx = AgentContext()
    await collect("hi", ctx, config(server, prepare_request=prepare_request))
    sent = server.requests[0].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["hi", "added in place"]
    assert [m["role"] for m in ctx.messages] == ["user", "user", "assistant"]

"""AgentSession over real HTTP with a real session file."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from picontext._clock import FrozenClock
from picontext.agent.session import AgentSession, SessionBusyError
from picontext.agent.tools import all_tools
from picontext.ai.providers import StreamOptions
from picontext.ai.retry import RetryPolicy
from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, reply, text, tokens, tool_call


def make(server: ScriptedModelServer, tmp_path: Path, **kw: Any) -> tuple[AgentSession, list[dict[str, Any]]]:
    manager = SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    session = AgentSession(
        manager,
        model=server.model("openai-completions"),
        tools=all_tools(str(tmp_path)),
        system_prompt="You are a test agent.",
        stream_options=StreamOptions(api_key="k"),
        **kw,
    )
    events: list[dict[str, Any]] = []
    session.subscribe(events.append)
    return session, events


def file_entries(session: AgentSession) -> list[dict[str, Any]]:
    path = session.manager.get_session_file()
    assert path is not None
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def kinds(entries: list[dict[str, Any]]) -> list[str]:
    return [e["message"]["role"] if e["type"] == "message" else e["type"] for e in entries]


async def test_session_file_after_tool_run(server: ScriptedModelServer, tmp_path: Path) -> None:
    server.expect(
        reply(tool_call("write", {"path": "out.txt", "content": "data"}), usage=tokens(100, 10)),
        reply(text("Done."), usage=tokens(150, 5)),
    )
    session, events = make(server, tmp_path)
    await session.prompt("write out.txt")
    assert (tmp_path / "out.txt").read_text() == "data"
    entries = file_entries(session)
    assert kinds(entries) == [
        "session",
        "model_change",
        "thinking_level_change",
        "system",
        "user",
        "assistant",
        "toolResult",
        "assistant",
    ]
    assert entries[1]["provider"] == "openai-compatible" and entries[1]["modelId"] == "scripted-model"
    assert entries[-2]["message"]["toolName"] == "write"
    assert events[-1]["type"] == "agent_settled"
    agent_end = next(e for e in events if e["type"] == "agent_end")
    assert agent_end["willRetry"] is False and len(agent_end["messages"]) == 5
    assert session.get_context_usage().tokens == 155  # type: ignore[union-attr]
    # each request is the projection: the second one carries system + user + reply + result
    assert [m["role"] for m in server.requests[1].body["messages"]] == ["system", "user", "assistant", "tool"]


async def test_each_message_persisted_when_it_completes(server: ScriptedModelServer, tmp_path: Path) -> None:
    server.expect(tool_call("ls", {}), text("listed"))
    session, _ = make(server, tmp_path)
    seen: list[int] = []

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "message_end":
            last = session.manager.get_leaf_entry()
            assert last is not None and last["message"] is event["message"]
            seen.append(1)

    session.subscribe(on_event)
    await session.prompt("ls")
    assert len(seen) == 5


async def test_second_prompt_continues_and_resumes_from_file(server: ScriptedModelServer, tmp_path: Path) -> None:
    server.expect(text("first"), text("second"))
    session, _ = make(server, tmp_path)
    await session.prompt("one")
    await session.prompt("two")
    assert [m["role"] for m in server.requests[1].body["messages"]] == ["system", "user", "assistant", "user"]
    reopened = SessionManager.open(session.manager.get_session_file() or "")
    resumed = AgentSession(reopened, model=session.model, tools=session.tools)
    assert [m["role"] for m in resumed.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert reopened.get_entries()[-1]["type"] == "message"  # same model and level: nothing recorded again


async def test_model_and_thinking_changes_recorded(server: ScriptedModelServer, tmp_path: Path) -> None:
    server.expect(text("a"))
    session, _ = make(server, tmp_path)
    await session.prompt("hi")
    other = server.model("openai-completions", id="other-model")
    session.set_model(other)
    session.set_thinking_level("high")
    session.set_thinking_level("high")
    entries = file_entries(session)
    assert kinds(entries)[-2:] == ["model_change", "thinking_level_change"]
    assert entries[-2]["modelId"] == "other-model" and entries[-1]["thinkingLevel"] == "high"
    with pytest.raises(ValueError):
        session.set_thinking_level("max")  # type: ignore[arg-type]


async def test_abort_mid_stream_persists_aborted_reply(server: ScriptedModelServer, tmp_path: Path) -> None:
    release = threading.Event()
    server.expect(text("a b c d e f g").hold_after(3, release))
    session, events = make(server, tmp_path)

    async def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "message_update":
            await session.abort()  # from inside the run: fires and returns

    session.subscribe(on_event)
    try:
        await session.prompt("talk")
    finally:
        release.set()
    entries = file_entries(session)
    assert entries[-1]["message"]["stopReason"] == "aborted"
    assert [e["type"] for e in events].count("agent_end") == 1
    assert events[-1]["type"] == "agent_settled"
    assert not session.is_streaming


async def test_abort_from_outside_mid_tool(server: ScriptedModelServer, tmp_path: Path) -> None:
    server.expect(tool_call("bash", {"command": "echo go; sleep 30"}))
    session, _ = make(server, tmp_path)
    tool_running = asyncio.Event()
    session.subscribe(lambda e: tool_running.set() if e["type"] == "tool_execution_update" else None)
    run = asyncio.ensure_future(session.prompt("run it"))
    await tool_running.wait()
    await session.abort()
    await run
    entries = file_entries(session)
    assert kinds(entries)[-2:] == ["assistant", "toolResult"]
    result = entries[-1]["message"]
    assert result["isError"] and result["content"][0]["text"].endswith("Command aborted")
    assert len(server.requests) == 1


async def test_prompt_while_streaming_needs_a_behaviour_and_steering_works(
    server: ScriptedModelServer, tmp_path: Path
) -> None:
    release = threading.Event()
    server.expect(tool_call("ls", {}).hold_after(1, release), text("saw the steer"))
    session, events = make(server, tmp_path)
    started = asyncio.Event()
    session.subscribe(lambda e: started.set() if e["type"] == "agent_start" else None)
    run = asyncio.ensure_future(session.prompt("start"))
    await started.wait()
    with pytest.raises(SessionBusyError):
        await session.prompt("again")
    await session.prompt("also check README", streaming_behavior="steer")
    release.set()
    await run
    second = server.requests[1].body["messages"]
    assert second[-1] == {"role": "user", "content": "also check README"}  # text-only: one string
    queue_updates = [e for e in events if e["type"] == "queue_update"]
    assert queue_updates[0]["steering"] == ["also check README"] and queue_updates[-1]["steering"] == []


async def test_follow_up_runs_after_the_agent_would_stop(server: ScriptedModelServer, tmp_path: Path) -> None:
    release = threading.Event()
    server.expect(text("first answer").hold_after(1, release), text("follow-up answer"))
    session, _ = make(server, tmp_path)
    started = asyncio.Event()
    session.subscribe(lambda e: started.set() if e["type"] == "agent_start" else None)
    run = asyncio.ensure_future(session.prompt("start"))
    await started.wait()
    await session.follow_up("and then?")
    release.set()
    await run
    roles = [m["role"] for m in session.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]


async def test_unreachable_server_ends_with_error_reply(tmp_path: Path) -> None:
    with ScriptedModelServer() as server:
        model = server.model("openai-completions")
    manager = SessionManager.in_memory(str(tmp_path))
    session = AgentSession(
        manager, model=model, stream_options=StreamOptions(api_key="k"), clock=FrozenClock(),
        retry=RetryPolicy(max_retries=1, base_delay_ms=1),
    )
    await session.prompt("hello?")
    last = session.messages[-1]  # refused on this machine: not transient, so not retried (nothing omitted)
    assert last["stopReason"] == "error" and last["errorMessage"].startswith("Connection error")
    assert [e["type"] for e in session.manager.get_entries()].count("context_edit") == 0

"""PicontextMiddleware in a real `langchain.agents.create_agent` with `ChatOpenAI`, talking over
real HTTP to the scripted OpenAI-compatible server (the summaries go to the same server, through
picontext's own client). The server reports the input tokens of each request from its size
(`measured`), so the threshold works from reported usage as with a real provider."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from picontext.errors import ConfigError, PicontextError, SessionNotFound, StoreUnavailable
from picontext.integrations.langchain import PicontextMiddleware
from picontext.session.manager import SessionManager
from picontext.testing import (
    ScriptedModelServer,
    measured,
    overflow,
    reply,
    request_tokens,
    server_error,
    text,
    tokens,
    tool_call,
)
from picontext.testing.model_server import RecordedRequest, Reply

WINDOW = 6_000
SETTINGS = {"compaction": {"reserveTokens": 1_500, "keepRecentTokens": 1_000}}
SUMMARY = "## Goal\nanswer the numbered questions\n## Progress\nquestions answered so far, with lookups"


@tool
def lookup(topic: str) -> str:
    """Look a topic up in the notes."""
    return f"notes on {topic}: " + "the notes say a great deal about it. " * 32


def is_agent(req: RecordedRequest) -> bool:
    return "tools" in req.body  # the agent binds its tool; picontext's summary requests carry none


def is_summary(req: RecordedRequest) -> bool:
    return not is_agent(req)


def agent_reply(step: Reply) -> Reply:
    return step.with_usage(measured(20)).when(is_agent)


def summary_reply() -> Reply:
    return reply(text(SUMMARY)).with_usage(measured(20)).when(is_summary)


def question(i: int) -> str:
    return f"question {i}: " + "please explain this part in detail. " * 12


def chat_model(server: ScriptedModelServer) -> ChatOpenAI:
    return ChatOpenAI(model="scripted-model", base_url=server.url + "/v1", api_key="test",  # type: ignore[arg-type]
                      streaming=True, stream_usage=True, max_retries=0)


def middleware(server: ScriptedModelServer, session_id: str | None = None, **kw: Any) -> PicontextMiddleware:
    model = server.model(context_window=WINDOW, max_tokens=500)
    return PicontextMiddleware(session_id, model=model, cwd=kw.pop("cwd", os.getcwd()),
                               settings=kw.pop("settings", SETTINGS), **kw)


def script_turn(server: ScriptedModelServer, i: int) -> None:
    """Even turns look something up, odd ones answer directly; keep two summary replies ready
    (a compaction asks for one, or two when it splits a turn)."""
    if i % 2 == 0:
        server.expect(agent_reply(tool_call("lookup", {"topic": f"topic {i}"}, call_id=f"call_{i}")))
    server.expect(agent_reply(text(f"answer {i}")))
    waiting = sum(1 for s in server.pending_steps if s.match is is_summary)
    server.expect(*[summary_reply()] * (2 - waiting))


def drop_unused_summaries(server: ScriptedModelServer) -> None:
    """The summary replies kept ready but never asked for (everything else was checked first)."""
    assert all(s.match is is_summary for s in server.pending_steps), server.pending_steps
    assert not server.unexpected
    server.reset()


def file_messages(manager: SessionManager) -> list[dict[str, Any]]:
    return [e["message"] for e in manager.get_entries() if e.get("type") == "message"]


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


def all_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(text_of(m.get("content") or "") for m in messages)


def check_conversation(server: ScriptedModelServer, memory: PicontextMiddleware, turns: int,
                       requests: list[RecordedRequest]) -> None:
    agent_requests = [r for r in requests if is_agent(r)]
    # No request exceeded the window.
    sizes = [request_tokens(r.body) for r in agent_requests]
    assert max(sizes) <= WINDOW, sizes
    manager = memory.memory.manager
    entries = manager.get_entries()
    compactions = [e for e in entries if e["type"] == "compaction"]
    assert len(compactions) >= 2, f"{len(compactions)} compactions; request sizes {sizes}"
    # Every message stored once: the questions, the lookups' results, one reply per request.
    messages = file_messages(manager)
    users = [text_of(m["content"]) for m in messages if m["role"] == "user"]
    assert users == [question(i) for i in range(turns)]
    results = [m["toolCallId"] for m in messages if m["role"] == "toolResult"]
    assert results == [f"call_{i}" for i in range(0, turns, 2)]
    replies = [m for m in messages if m["role"] == "assistant"]
    assert len(replies) == len(agent_requests)
    assert all(m["usage"]["input"] > 0 for m in replies)  # the usage ChatOpenAI reported
    # After the last compaction the model saw the summary, then the kept tail, then the new turn.
    last = compactions[-1]
    sent = agent_requests[-1].body["messages"]
    assert sent[0] == {"role": "system", "content": "You answer questions."}
    assert SUMMARY in text_of(sent[1]["content"])
    assert question(turns - 1) in all_text(sent) and question(0) not in all_text(sent)
    assert last["summary"].startswith(SUMMARY)  # then the verified ledger picontext adds


def test_thirty_turns_with_tools_compact_and_go_on_sync_without_checkpointer(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    memory = middleware(server, cwd=str(tmp_path))
    agent = create_agent(chat_model(server), tools=[lookup], middleware=[memory], system_prompt="You answer questions.")
    turns = 32
    for i in range(turns):
        script_turn(server, i)
        out = agent.invoke({"messages": [HumanMessage(question(i))]})
        assert out["messages"][-1].content == f"answer {i}"
        # Without a checkpointer the state holds this turn only; the session holds the rest.
        assert isinstance(out["messages"][0], HumanMessage) and out["messages"][0].content == question(i)
    requests = list(server.requests)
    check_conversation(server, memory, turns, requests)
    drop_unused_summaries(server)


async def test_thirty_turns_with_tools_compact_and_go_on_async_with_checkpointer(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    memory = middleware(server, cwd=str(tmp_path))
    agent = create_agent(chat_model(server), tools=[lookup], middleware=[memory], system_prompt="You answer questions.",
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t-1"}}
    turns = 32
    for i in range(turns):
        script_turn(server, i)
        out = await agent.ainvoke({"messages": [HumanMessage(question(i))]}, config)  # type: ignore[arg-type]
        assert out["messages"][-1].content == f"answer {i}"
    # The checkpointer's thread keeps every message; the session stored each of them once.
    assert sum(isinstance(m, HumanMessage) for m in out["messages"]) == turns
    requests = list(server.requests)
    check_conversation(server, memory, turns, requests)
    drop_unused_summaries(server)


def test_session_reads_in_picontext_and_continues_in_a_new_process(server: ScriptedModelServer,
                                                                   tmp_path: Path) -> None:
    """A session written through the middleware opens in `picontext show` and `export`, and a new
    middleware (a new process, say) given its id continues it."""
    memory = middleware(server, cwd=str(tmp_path))
    agent = create_agent(chat_model(server), tools=[lookup], middleware=[memory])
    for i in range(3):
        script_turn(server, i)
        agent.invoke({"messages": [HumanMessage(question(i))]})
    drop_unused_summaries(server)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    show = subprocess.run([sys.executable, "-m", "picontext", "show", memory.session_id, "--no-pager"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert show.returncode == 0, show.stderr
    assert "question 2" in show.stdout and "answer 2" in show.stdout and "lookup" in show.stdout
    html = tmp_path / "s.html"
    export = subprocess.run([sys.executable, "-m", "picontext", "export", memory.session_id, "-o", str(html)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert export.returncode == 0, export.stderr
    assert "answer 2" in html.read_text()

    again = middleware(server, memory.session_id, cwd=str(tmp_path))
    agent = create_agent(chat_model(server), tools=[lookup], middleware=[again])
    server.expect(agent_reply(text("still here")))
    agent.invoke({"messages": [HumanMessage("what did I ask first?")]})
    (sent,) = [r.body["messages"] for r in server.requests]
    assert question(0) in all_text(sent) and sent[-1] == {"role": "user", "content": "what did I ask first?"}


def test_history_passed_back_by_the_caller_is_not_stored_twice(server: ScriptedModelServer, tmp_path: Path) -> None:
    memory = middleware(server, cwd=str(tmp_path))
    agent = create_agent(chat_model(server), tools=[lookup], middleware=[memory])
    server.expect(agent_reply(text("one")), agent_reply(text("two")))
    out = agent.invoke({"messages": [SystemMessage("be terse"), HumanMessage("first")]})
    # The caller keeps its own history and passes it back whole, with its system message again.
    out = agent.invoke({"messages": [*out["messages"], HumanMessage("second")]})
    assert out["messages"][-1].content == "two"
    roles = [(m["role"], text_of(m["content"])) for m in file_messages(memory.memory.manager)]
    assert roles == [("system", "be terse"), ("user", "first"), ("assistant", "one"), ("user", "second"),
                     ("assistant", "two")]
    second = server.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    # A caller without history that sends its system message with every input: one prompt, stored once.
    server.expect(agent_reply(text("three")))
    agent.invoke({"messages": [SystemMessage("be terse"), HumanMessage("third")]})
    assert [m["role"] for m in file_messages(memory.memory.manager)][-3:] == ["assistant", "user", "assistant"]
    assert [m["role"] for m in server.requests[2].body["messages"]] == [
        "system", "user", "assistant", "user", "assistant", "user"]


def test_a_failed_model_call_is_retried_without_duplicates(server: ScriptedModelServer, tmp_path: Path) -> None:
    memory = middleware(server, cwd=str(tmp_path))
    checkpointer = InMemorySaver()
    agent = create_agent(chat_model(server), tools=[lookup], middleware=[memory], checkpointer=checkpointer)
    config: Any = {"configurable": {"thread_id": "t"}}
    server.expect(agent_reply(tool_call("lookup", {"topic": "x"}, call_id="c1")), server_error(500))
    with pytest.raises(Exception, match="500"):
        agent.invoke({"messages": [HumanMessage("look x up")]}, config)
    # The call and its result were stored before the failing request; resuming the thread sends
    # them once and stores nothing twice.
    server.expect(agent_reply(text("x is fine")))
    out = agent.invoke(None, config)
    assert out["messages"][-1].content == "x is fine"
    roles = [m["role"] for m in file_messages(memory.memory.manager)]
    assert roles == ["user", "assistant", "toolResult", "assistant"]
    resumed = server.requests[-1].body["messages"]
    assert [m["role"] for m in resumed] == ["user", "assistant", "tool"]


def test_the_same_input_after_a_failure_without_checkpointer_is_stored_once(server: ScriptedModelServer,
                                                                             tmp_path: Path) -> None:
    memory = middleware(server, cwd=str(tmp_path))
    agent = create_agent(chat_model(server), tools=[lookup], middleware=[memory])
    server.expect(server_error(503))
    with pytest.raises(Exception, match="503"):
        agent.invoke({"messages": [HumanMessage("hello")]})
    server.expect(agent_reply(text("hi")))
    agent.invoke({"messages": [HumanMessage("hello")]})
    assert [text_of(m["content"]) for m in file_messages(memory.memory.manager)] == ["hello", "hi"]


def test_overflow_compacts_and_retries_once(server: ScriptedModelServer, tmp_path: Path) -> None:
    # A window the reported usage never reaches: only the provider's overflow error can trigger.
    memory = middleware(server, cwd=str(tmp_path))
    agent = create_agent(chat_model(server), tools=[lookup], middleware=[memory])
    for i in range(20):
        server.expect(reply(text(f"answer {i}"), usage=tokens(100, 5)).when(is_agent))
        agent.invoke({"messages": [HumanMessage(question(i))]})
    server.expect(overflow().when(is_agent), summary_reply(), agent_reply(text("after overflow")))
    out = agent.invoke({"messages": [HumanMessage("one more")]})
    assert out["messages"][-1].content == "after overflow"
    retried = server.requests[-1].body["messages"]
    assert SUMMARY in all_text(retried) and question(0) not in all_text(retried)
    assert [e["type"] for e in memory.memory.manager.get_entries()].count("compaction") == 1
    # The overflow is not retried twice: a second one reaches the caller.
    server.expect(overflow().when(is_agent), summary_reply(), overflow().when(is_agent))
    with pytest.raises(Exception, match=r"(?i)context"):
        agent.invoke({"messages": [HumanMessage(question(99))]})


def test_a_compaction_whose_summary_model_fails_loses_nothing(server: ScriptedModelServer, tmp_path: Path) -> None:
    fast = {**SETTINGS, "retry": {"maxRetries": 0, "baseDelayMs": 1}}
    memory = middleware(server, cwd=str(tmp_path), settings=fast)
    agent = create_agent(chat_model(server), tools=[lookup], middleware=[memory])
    failing = [server_error(503).when(is_summary)] * 4
    server.expect(*failing)
    turns = 0
    while not any(e["type"] == "compaction" for e in memory.memory.manager.get_entries()):
        server.expect(agent_reply(text(f"answer {turns}")))
        out = agent.invoke({"messages": [HumanMessage(question(turns))]})
        assert out["messages"][-1].content == f"answer {turns}"
        turns += 1
        assert turns < 40
    users = [text_of(m["content"]) for m in file_messages(memory.memory.manager) if m["role"] == "user"]
    assert users == [question(i) for i in range(turns)]
    assert not memory.memory.should_compact()
    assert all(s.match is is_summary for s in server.pending_steps)
    server.reset()


# -- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("make", "error", "words"), [
    (lambda server, tmp: middleware(server, "no-such-session", cwd=tmp), SessionNotFound, "no-such-session"),
    (lambda server, tmp: PicontextMiddleware(model=server.model(), store=os.path.join(tmp, "file"), cwd=tmp),
     StoreUnavailable, "not a directory"),
    (lambda server, tmp: PicontextMiddleware(model="nope/model", cwd=tmp), ConfigError, "nope"),
])
def test_bad_input_raises_one_line_at_construction(server: ScriptedModelServer, tmp_path: Path,
                                                   make: Callable[[ScriptedModelServer, str], Any],
                                                   error: type[PicontextError], words: str) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(error) as info:
        make(server, str(tmp_path))
    assert words in str(info.value) and "\n" not in str(info.value)


def test_a_second_thread_is_refused_not_mixed_in(server: ScriptedModelServer, tmp_path: Path) -> None:
    memory = middleware(server, cwd=str(tmp_path))
    agent = create_agent(chat_model(server), tools=[lookup], middleware=[memory], checkpointer=InMemorySaver())
    server.expect(agent_reply(text("a")))
    agent.invoke({"messages": [HumanMessage("in thread a")]}, {"configurable": {"thread_id": "a"}})
    with pytest.raises(ConfigError, match="thread 'b'") as info:
        agent.invoke({"messages": [HumanMessage("in thread b")]}, {"configurable": {"thread_id": "b"}})
    assert "\n" not in str(info.value)
    assert [text_of(m["content"]) for m in file_messages(memory.memory.manager)] == ["in thread a", "a"]


def test_an_image_is_stored_as_a_pi_image_and_sent_as_a_data_url(server: ScriptedModelServer, tmp_path: Path) -> None:
    memory = middleware(server, cwd=str(tmp_path))
    agent = create_agent(chat_model(server), tools=[lookup], middleware=[memory])
    server.expect(agent_reply(reply(text("final"))))
    out = agent.invoke({"messages": [HumanMessage([{"type": "text", "text": "see"}, {
        "type": "image", "base64": "iVBORw0KGgoAAAANSUhEUg==", "mime_type": "image/png"}])]})
    assert isinstance(out["messages"][-1], AIMessage)
    stored = file_messages(memory.memory.manager)[0]
    assert stored["content"][1] == {"type": "image", "data": "iVBORw0KGgoAAAANSUhEUg==", "mimeType": "image/png"}
    sent = server.requests[0].body["messages"][0]["content"]
    assert sent[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="}}


def test_the_model_gets_a_well_formed_history_from_an_interrupted_session(server: ScriptedModelServer,
                                                                           tmp_path: Path) -> None:
    """A session cut off between a tool call and its result (a crash, a Pi session), with a reply
    that ended in an error: the model is sent what every chat API accepts, as Pi sends it."""
    memory = middleware(server, cwd=str(tmp_path))
    memory.memory.append([
        {"role": "user", "content": "look two things up"},
        {"role": "assistant", "content": [
            {"type": "toolCall", "id": "c1", "name": "lookup", "arguments": {"topic": "a"}},
            {"type": "toolCall", "id": "c2", "name": "lookup", "arguments": {"topic": "b"}}]},
        {"role": "toolResult", "toolCallId": "c1", "toolName": "lookup", "content": "a is fine"},
        {"role": "user", "content": "never mind"},
        {"role": "assistant", "content": [{"type": "text", "text": "half an ans"}], "stopReason": "error",
         "errorMessage": "connection reset"},
    ])
    agent = create_agent(chat_model(server), tools=[lookup], middleware=[memory])
    server.expect(agent_reply(text("ok")))
    agent.invoke({"messages": [HumanMessage("go on")]})
    sent = server.requests[0].body["messages"]
    assert [(m["role"], m.get("tool_call_id"), text_of(m.get("content") or "")) for m in sent] == [
        ("user", None, "look two things up"), ("assistant", None, ""), ("tool", "c1", "a is fine"),
        ("tool", "c2", "No result provided"), ("user", None, "never mind"), ("user", None, "go on")]

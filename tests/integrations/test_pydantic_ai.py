"""PicontextHistory in a real pydantic-ai Agent, against an OpenAI-compatible server over real HTTP.

The server (`AnsweringServer`, the scripted server answering by rule rather than from a list)
reports honest usage: the prompt tokens of each request are chars/4 of what was sent, so Pi's
threshold sees what a provider would report.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, UserPromptPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from picontext.errors import ConfigError, SessionNotFound, StoreUnavailable
from picontext.integrations.pydantic_ai import PicontextHistory
from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, overflow, reply, server_error, text, tokens, tool_call
from picontext.testing.model_server import RecordedRequest, Step

WINDOW = 12_000
SETTINGS = {"compaction": {"reserveTokens": 3_000, "keepRecentTokens": 2_000},
            "retry": {"maxRetries": 1, "baseDelayMs": 1}}
FACT = "The archive notes that every topic has a long and winding history. "  # 68 chars


def request_tokens(body: Any) -> int:
    """What the server counts as the prompt: chars/4 of the messages and tools it received."""
    return math.ceil(len(json.dumps([body.get("messages"), body.get("tools")])) / 4)


def is_summary_request(req: RecordedRequest) -> bool:
    body = req.body  # picontext's summarizer streams, and offers no tools
    return isinstance(body, dict) and body.get("stream") is True and "tools" not in body


class AnsweringServer(ScriptedModelServer):
    """Answers each request with `rule(request)` (or from the script first, when one is given),
    with the usage the request really had."""

    def __init__(self) -> None:
        super().__init__()
        self.rule: Callable[[RecordedRequest], Step] | None = None

    def _take(self, req: RecordedRequest) -> Step | None:
        step = super()._take(req) if self.pending_steps or self.rule is None else None
        if step is None and self.rule is not None and req.dialect is not None:
            with self._lock:
                if req in self.unexpected:
                    self.unexpected.remove(req)
                elif req not in self.requests:
                    self.requests.append(req)
            step = self.rule(req)
        if step is not None and hasattr(step, "usage") and not is_summary_request(req):
            step = replace(step, usage=tokens(request_tokens(req.body), step.usage.output))
        return step


def chat_overflow() -> Step:
    return overflow().when(lambda req: not is_summary_request(req))


def question_of(body: dict[str, Any]) -> str:
    for message in reversed(body["messages"]):
        if message["role"] == "user" and isinstance(message["content"], str) and "Question" in message["content"]:
            return message["content"].split(":")[0]
    raise AssertionError("no question in the request")


def agent_rule(req: RecordedRequest) -> Step:
    body = req.body
    if is_summary_request(req):
        return reply(text("## Goal\nAnswer the questions.\n## Progress\nEarlier questions answered."))
    number = question_of(body).split()[-1]
    if body["messages"][-1]["role"] == "tool":
        return reply(text(f"Answer {number}: " + "it has a long history. " * 15), usage=tokens(1, 90))
    return reply(tool_call("lookup", {"topic": f"topic {number}"}, call_id=f"call-{number}"), usage=tokens(1, 20))


@pytest.fixture(scope="module")
def answering() -> Iterator[AnsweringServer]:
    with AnsweringServer() as server:
        yield server


@pytest.fixture
def srv(answering: AnsweringServer) -> Iterator[AnsweringServer]:
    answering.reset()
    answering.rule = agent_rule
    yield answering
    answering.rule = None
    answering.assert_complete()


def make_history(server: ScriptedModelServer, tmp_path: Path, session_id: str | None = None,
                 **kw: Any) -> PicontextHistory:
    model = server.model(context_window=kw.pop("window", WINDOW), max_tokens=1_000)
    return PicontextHistory(session_id, model=model, cwd=str(tmp_path), api_key="test",
                            settings=kw.pop("settings", SETTINGS), **kw)


def make_agent(server: ScriptedModelServer, history: PicontextHistory, **kw: Any) -> Agent[None, str]:
    model = OpenAIChatModel("scripted-model", provider=OpenAIProvider(base_url=server.url + "/v1", api_key="test"))
    agent: Agent[None, str] = Agent(model, capabilities=[history], **kw)

    @agent.tool_plain
    def lookup(topic: str) -> str:
        """Look a topic up in the archive."""
        return f"{topic}: " + FACT * 25

    return agent


def chat_requests(server: ScriptedModelServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if not is_summary_request(r)]


def assert_well_formed(body: dict[str, Any]) -> None:
    """Every tool result answers a call made earlier in the same request (providers reject
    anything else) and every call is answered."""
    calls: set[str] = set()
    answered: set[str] = set()
    for message in body["messages"]:
        for call in message.get("tool_calls") or []:
            calls.add(call["id"])
        if message["role"] == "tool":
            assert message["tool_call_id"] in calls, f"orphan tool result {message['tool_call_id']}"
            answered.add(message["tool_call_id"])
    assert calls == answered


def stored_messages(manager: SessionManager, role: str) -> list[dict[str, Any]]:
    return [e["message"] for e in manager.get_entries()
            if e.get("type") == "message" and e["message"]["role"] == role]


def picontext_cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "PICONTEXT_DIR": str(home)}
    return subprocess.run([sys.executable, "-m", "picontext", *args], capture_output=True, text=True,
                          timeout=120, env=env)


async def test_thirty_turns_with_tools_compact_and_keep_working(srv: AnsweringServer, tmp_path: Path,
                                                                _isolated_home: Path) -> None:
    history = make_history(srv, tmp_path)
    agent = make_agent(srv, history, system_prompt="You answer questions about topics.")
    compactions: list[str] = []
    history.memory.subscribe(lambda e: compactions.append(e["type"]) if e["type"] == "compaction_end" else None)
    turns = 32
    for turn in range(turns):
        result = await agent.run(f"Question {turn}: what does the archive say about topic {turn}?")
        assert result.output.startswith(f"Answer {turn}:")
    manager = history.memory.manager
    entries = manager.get_entries()
    assert sum(e.get("type") == "compaction" for e in entries) >= 2 and len(compactions) >= 2
    # No request reached the window, every request was one a provider accepts.
    bodies = chat_requests(srv)
    assert len(bodies) == 2 * turns
    assert max(request_tokens(b) for b in bodies) < WINDOW
    for body in bodies:
        assert_well_formed(body)
    # The requests after a compaction carry its summary and the latest question, once.
    last = bodies[-1]
    texts = [m["content"] for m in last["messages"] if m["role"] == "user"]
    assert any("Earlier questions answered." in t for t in texts)
    assert sum(f"Question {turns - 1}:" in t for t in texts) == 1
    assert "Question 0:" not in json.dumps(last)
    assert last["messages"][0] == {"role": "system", "content": "You answer questions about topics."}
    # Nothing was lost or stored twice: every question, call, result and answer is in the file.
    users = [m["content"] for m in stored_messages(manager, "user")]
    assert users == [f"Question {t}: what does the archive say about topic {t}?" for t in range(turns)]
    assert len(stored_messages(manager, "toolResult")) == turns
    assert len(stored_messages(manager, "assistant")) == 2 * turns
    assert len(stored_messages(manager, "system")) == 1  # stated by every run, stored once
    # Usage is the run's reported usage.
    first = stored_messages(manager, "assistant")[0]
    assert first["usage"]["input"] == request_tokens(bodies[0]) and first["usage"]["output"] == 20
    # The session is an ordinary picontext session: show and export read it.
    path = manager.get_session_file()
    assert path is not None
    shown = picontext_cli("show", str(path), "--no-pager", "--width", "200", home=_isolated_home)
    assert shown.returncode == 0, shown.stderr
    assert f"Question {turns - 1}" in shown.stdout and "compaction" in shown.stdout
    out = tmp_path / "session.html"
    exported = picontext_cli("export", history.session_id, "-o", str(out), home=_isolated_home)
    assert exported.returncode == 0, exported.stderr
    assert f"Question {turns - 1}" in out.read_text()
    tree = picontext_cli("tree", str(path), home=_isolated_home)
    assert tree.returncode == 0 and "compaction" in tree.stdout, tree.stderr
    # picontext's own chat continues it, with the model the session recorded.
    (_isolated_home / "models.json").write_text(json.dumps({"providers": {"openai-compatible": {
        "baseUrl": srv.url + "/v1", "api": "openai-completions", "apiKey": "test",
        "models": [{"id": "scripted-model", "contextWindow": WINDOW, "maxTokens": 1_000}]}}}))
    srv.expect(text("Answer 40: picontext carried on.").when(lambda r: "tools" in r.body and r.body.get("stream")))
    chat = picontext_cli("run", "--session", str(path), "-p", "Question 40: still there?", home=_isolated_home)
    assert chat.returncode == 0, chat.stderr
    assert "Answer 40: picontext carried on." in chat.stdout
    continued = json.dumps(srv.requests[-1].body)
    assert "Earlier questions answered." in continued and f"Question {turns - 1}:" in continued
    # Reopened by id, it carries on where it stopped.
    again = make_history(srv, tmp_path, history.session_id)
    assert again.messages()[-1].parts[0].content == "Answer 40: picontext carried on."  # the chat's turn too
    assert len(again.messages()) == len(history.messages()) + 2
    result = await make_agent(srv, again).run(f"Question {turns}: and topic {turns}?")
    assert result.output.startswith(f"Answer {turns}:")
    assert "Earlier questions answered." in json.dumps(chat_requests(srv)[-1])


async def test_passing_message_history_stores_nothing_twice(srv: AnsweringServer, tmp_path: Path) -> None:
    history = make_history(srv, tmp_path)
    agent = make_agent(srv, history, system_prompt="Be brief.")
    first = await agent.run("Question 1: one?")
    second = await agent.run("Question 2: two?", message_history=first.all_messages())
    # A history that went through JSON (a caller's database) is recognized by content.
    loaded = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(second.all_messages()))
    third = await agent.run("Question 3: three?", message_history=loaded)
    manager = history.memory.manager
    assert [m["content"] for m in stored_messages(manager, "user")] == [
        "Question 1: one?", "Question 2: two?", "Question 3: three?"]
    assert len(stored_messages(manager, "assistant")) == 6
    assert len(stored_messages(manager, "system")) == 1
    # A history that stops at an earlier turn continues from there, on a branch of the session.
    await agent.run("Question 4: four?", message_history=first.all_messages())
    assert len(stored_messages(manager, "user")) == 4  # nothing re-stored
    context = [m.get("content") for m in history.memory.messages() if m["role"] == "user"]
    assert context == ["Question 1: one?", "Question 4: four?"]
    last_request = json.dumps(chat_requests(srv)[-1])
    assert "Question 2" not in last_request and "Question 3" not in last_request
    # A history the session never saw is stored, then the new turn.
    foreign = [ModelRequest(parts=[UserPromptPart("Question 5: from elsewhere?")])]
    await agent.run("Question 6: six?", message_history=foreign)
    users = [m["content"] for m in stored_messages(manager, "user")]
    assert users[-2:] == ["Question 5: from elsewhere?", "Question 6: six?"]
    assert third.output.startswith("Answer 3:")


async def test_a_changed_system_prompt_is_stored_as_a_change(srv: AnsweringServer, tmp_path: Path) -> None:
    history = make_history(srv, tmp_path)
    await make_agent(srv, history, system_prompt="Be brief.").run("Question 1: one?")
    await make_agent(srv, history, system_prompt="Be brief.").run("Question 2: two?")
    await make_agent(srv, history, system_prompt="Be thorough.", instructions="Cite the archive.").run(
        "Question 3: three?")
    systems = stored_messages(history.memory.manager, "system")
    assert [s["sections"] for s in systems] == [{"system_prompt": "Be brief."}, {"system_prompt": "Be thorough."}]
    # The model gets the current prompt once, and pydantic-ai's instructions as pydantic-ai sends them.
    body = chat_requests(srv)[-1]
    system_texts = [m["content"] for m in body["messages"] if m["role"] == "system"]
    assert system_texts == ["Be thorough.", "Cite the archive."]
    # After a clear (a new root in the same session) the prompt is stated again.
    history.memory.clear()
    await make_agent(srv, history, system_prompt="Be thorough.").run("Question 4: four?")
    assert len(stored_messages(history.memory.manager, "system")) == 3
    body = chat_requests(srv)[-1]
    assert body["messages"][0] == {"role": "system", "content": "Be thorough."}
    assert "Question 3" not in json.dumps(body)


async def test_an_overflow_is_compacted_and_attempted_once_more(srv: AnsweringServer, tmp_path: Path) -> None:
    history = make_history(srv, tmp_path, window=200_000)  # the threshold never fires; the provider does
    agent = make_agent(srv, history)
    for turn in range(6):
        await agent.run(f"Question {turn}: topic {turn}?")
    before = history.memory.manager.entry_count()
    srv.expect(chat_overflow())  # the next chat request is refused as too long
    result = await agent.run("Question 6: topic 6?")
    assert result.output.startswith("Answer 6:")
    entries = history.memory.manager.get_entries()
    assert sum(e.get("type") == "compaction" for e in entries) == 1
    retried = chat_requests(srv)[-2]  # the attempt after the refusal: the compacted context
    assert "Earlier questions answered." in json.dumps(retried) and "Question 0:" not in json.dumps(retried)
    assert history.memory.manager.entry_count() > before
    # A second refusal of the same request is the caller's: one retry, as Pi does.
    srv.expect(chat_overflow(), chat_overflow())
    with pytest.raises(Exception, match=r"(?i)context|too long|maximum"):
        await agent.run("Question 7: topic 7?")
    # The prompt of the failed run is kept.
    assert stored_messages(history.memory.manager, "user")[-1]["content"] == "Question 7: topic 7?"


async def test_a_failing_summary_model_never_blocks_the_conversation(srv: AnsweringServer, tmp_path: Path) -> None:
    history = make_history(srv, tmp_path)
    agent = make_agent(srv, history)

    def failing_summaries(req: RecordedRequest) -> Step:
        return server_error(503) if is_summary_request(req) else agent_rule(req)

    srv.rule = failing_summaries
    for turn in range(14):
        result = await agent.run(f"Question {turn}: topic {turn}?")
        assert result.output.startswith(f"Answer {turn}:")
    assert max(request_tokens(b) for b in chat_requests(srv)) < WINDOW
    assert len(stored_messages(history.memory.manager, "user")) == 14


def test_bad_input_is_one_line_at_construction(server: ScriptedModelServer, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SessionNotFound) as missing:
        make_history(server, tmp_path, "0199aa00-0000-7000-8000-000000000000")
    assert "\n" not in str(missing.value) and "0199aa00" in str(missing.value)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(StoreUnavailable) as unusable:
        make_history(server, tmp_path, store=str(blocker))
    assert "\n" not in str(unusable.value)
    with pytest.raises(ConfigError) as unknown:
        PicontextHistory(model="nowhere/no-such-model", cwd=str(tmp_path))
    assert "\n" not in str(unknown.value)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="No API key") as keyless:
        PicontextHistory(model="openai/gpt-4.1-mini", cwd=str(tmp_path))
    assert "\n" not in str(keyless.value)


def test_picontext_history_is_the_agents_capability(server: ScriptedModelServer, tmp_path: Path) -> None:
    history = make_history(server, tmp_path)
    agent = make_agent(server, history)
    server.expect(reply(text("hello")))
    assert agent.run_sync("Hi").output == "hello"
    assert [m["content"] for m in stored_messages(history.memory.manager, "user")] == ["Hi"]
    assert history.session_id == history.memory.manager.get_session_id()


def test_the_example_runs_offline_and_compacts(_isolated_home: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "pydantic_ai_memory.py"
    run = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert "  [compacted]" in lines
    answers = [line for line in lines if line[:1].isdigit()]
    assert answers == [f"{n}: Chapter {n} is about the sea." for n in range(1, 9)]
    session_id = lines[-1].split()[1].rstrip(":")
    shown = picontext_cli("show", session_id, "--no-pager", home=_isolated_home)
    assert shown.returncode == 0 and "chapter 8" in shown.stdout.lower(), shown.stderr


def test_any_store_by_url(server: ScriptedModelServer, tmp_path: Path) -> None:
    history = make_history(server, tmp_path, store="memory:i21-pydantic")
    server.expect(reply(text("kept in memory")))
    make_agent(server, history).run_sync("Hi")
    again = make_history(server, tmp_path, history.session_id, store="memory:i21-pydantic")
    assert [type(m).__name__ for m in again.messages()] == ["ModelRequest", "ModelResponse"]
    assert again.messages()[1].parts[0].content == "kept in memory"
    assert history.memory.manager.get_session_file() is None  # no file: the memory store holds it

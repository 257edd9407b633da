"""PicontextSession under the real OpenAI Agents SDK Runner, over real HTTP (scripted server)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from agents import Runner, SQLiteSession
from agents.memory import OpenAIResponsesCompactionAwareSession, Session, is_openai_responses_compaction_aware_session
from agents_script import SUMMARY_MARK, Conversation, make_agent, session_for, tool_output

from picontext.errors import ConfigError, SessionNotFound, StoreUnavailable
from picontext.integrations.openai_agents import PicontextSession
from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, measured, reply, request_tokens, text

WINDOW = 4_000


def _picontext(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "picontext", *args], capture_output=True, text=True,
                          encoding="utf-8", timeout=120)


def test_is_a_session_of_the_sdk(server: ScriptedModelServer, tmp_path: Path) -> None:
    session = session_for(server, str(tmp_path / "store"), str(tmp_path))
    assert isinstance(session, Session) and isinstance(session, OpenAIResponsesCompactionAwareSession)
    assert is_openai_responses_compaction_aware_session(session)


async def test_thirty_turns_with_tools_compact_and_keep_working(server: ScriptedModelServer, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    session = session_for(server, store, str(tmp_path), window=WINDOW)
    talk = Conversation(server, session, make_agent(server))
    for i in range(32):
        assert await talk.turn(i) == f"answer {i}: topic {i} is about lorem ipsum."
    assert session.compactions >= 3
    assert talk.largest_request() <= WINDOW  # no request exceeded the window
    # A compaction between the two requests of one run shrank the run's second request
    # (model_input_filter): the run's own copy of the conversation was replaced.
    sizes = [request_tokens(r.body) for r in talk.agent_requests()]
    assert any(sizes[k + 1] < sizes[k] for k in range(0, len(sizes), 2))
    agent_requests = talk.agent_requests()
    assert len(agent_requests) == 64
    # The model saw the summary, and after the first compaction never again the first question.
    first_summary = next(i for i, r in enumerate(agent_requests) if SUMMARY_MARK in json.dumps(r.body))
    assert all("question 0:" not in json.dumps(r.body) for r in agent_requests[first_summary:])
    # The tool's output reached the model through the SDK and the stored session.
    assert tool_output("topic 31") in json.dumps(agent_requests[-1].body)
    # Usage the SDK reported is on the stored replies (Pi's usage record).
    replies = [e["message"] for e in session.memory.manager.get_entries()
               if e["type"] == "message" and e["message"]["role"] == "assistant"]
    assert len(replies) == 64 and all(r["usage"]["totalTokens"] > 0 for r in replies)
    # Nothing was lost: all 32 questions are in the file.
    questions = [e for e in session.memory.manager.get_entries()
                 if e["type"] == "message" and e["message"]["role"] == "user"]
    assert len(questions) == 32
    talk.drain()

    # A new object on the same id carries on from the compacted conversation.
    again = session_for(server, store, str(tmp_path), window=WINDOW, session_id=session.session_id)
    items = await again.get_items()
    assert SUMMARY_MARK in json.dumps(items[0]) and items[-1] == {"role": "assistant", "content": (
        "answer 31: topic 31 is about lorem ipsum.")}
    talk2 = Conversation(server, again, make_agent(server))
    assert await talk2.turn(32) == "answer 32: topic 32 is about lorem ipsum."
    talk2.drain()

    # The file opens with picontext's own tools.
    path = again.memory.manager.get_session_file()
    assert path is not None
    shown = _picontext("show", path, "--no-pager")
    assert shown.returncode == 0, shown.stderr
    assert "question 32" in shown.stdout and "compaction" in shown.stdout.lower()
    tree = _picontext("tree", path, "--json")
    assert tree.returncode == 0, tree.stderr
    assert json.loads(tree.stdout)
    out = tmp_path / "session.html"
    exported = _picontext("export", path, "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    assert out.stat().st_size > 0 and "question 32" in out.read_text(encoding="utf-8")


async def test_pop_and_clear_branch_and_never_delete(server: ScriptedModelServer, tmp_path: Path) -> None:
    session = session_for(server, str(tmp_path / "store"), str(tmp_path))
    talk = Conversation(server, session, make_agent(server))
    await talk.turn(0)
    await talk.turn(1)
    talk.drain()
    before = await session.get_items()
    entries = session.memory.manager.entry_count()
    popped = await session.pop_item()
    assert popped == before[-1]
    assert await session.get_items() == before[:-1]
    # A response of several items loses only its last one (the rest is stored again on the branch).
    await session.add_items([{"role": "user", "content": "q"},
                             {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                              "content": [{"type": "output_text", "text": "checking", "annotations": []}]},
                             {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}])
    assert (await session.pop_item())["call_id"] == "c1"  # type: ignore[index]
    items = await session.get_items()
    assert items[-1]["id"] == "msg_1" and items[-2] == {"role": "user", "content": "q"}
    await session.clear_session()
    assert await session.get_items() == []
    reopened = session_for(server, str(tmp_path / "store"), str(tmp_path), session_id=session.session_id)
    assert await reopened.get_items() == []
    assert reopened.memory.manager.entry_count() > entries  # everything still in the file
    texts = json.dumps([e for e in reopened.memory.manager.get_entries()])
    assert "question 0" in texts and "answer 1" in texts


async def test_limit_and_session_settings(server: ScriptedModelServer, tmp_path: Path) -> None:
    from agents.memory import SessionSettings

    session = session_for(server, str(tmp_path / "store"), str(tmp_path))
    await session.add_items([{"role": "user", "content": str(i)} for i in range(5)])
    assert [i["content"] for i in await session.get_items(limit=2)] == ["3", "4"]
    assert await session.get_items(limit=0) == []
    session.session_settings = SessionSettings(limit=3)
    assert len(await session.get_items()) == 3


async def test_forced_run_compaction(server: ScriptedModelServer, tmp_path: Path) -> None:
    session = session_for(server, str(tmp_path / "store"), str(tmp_path), window=200_000)
    talk = Conversation(server, session, make_agent(server))
    for i in range(4):
        await talk.turn(i)
    await session.run_compaction()  # far under the threshold: nothing
    assert session.compactions == 0
    await session.run_compaction({"force": True})
    assert session.compactions == 1
    assert SUMMARY_MARK in json.dumps((await session.get_items())[0])
    talk.drain()


def test_bad_input_raises_at_construction(server: ScriptedModelServer, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SessionNotFound):
        session_for(server, str(tmp_path / "store"), str(tmp_path), session_id="missing-id")
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreUnavailable):
        session_for(server, str(tmp_path / "file"), str(tmp_path))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        PicontextSession(model="openai/gpt-4.1-mini", store=str(tmp_path / "store"), cwd=str(tmp_path))


async def test_written_session_opens_in_the_session_manager(server: ScriptedModelServer, tmp_path: Path) -> None:
    session = session_for(server, str(tmp_path / "store"), str(tmp_path))
    talk = Conversation(server, session, make_agent(server))
    await talk.turn(0)
    talk.drain()
    plain = SessionManager.open(session.memory.manager.get_session_file() or "")
    roles = [m["role"] for m in plain.build_session_projection().messages]
    assert roles == ["user", "assistant", "toolResult", "assistant"]


async def test_sdk_sqlite_session_sees_the_same_run(server: ScriptedModelServer, tmp_path: Path) -> None:
    """The same script through the SDK's own SQLiteSession and through ours: the model gets the
    same requests (the adapter changes nothing while no compaction is due)."""
    bodies = []
    for session in (SQLiteSession("s"), session_for(server, str(tmp_path / "store"), str(tmp_path))):
        server.reset()
        agent = make_agent(server)
        for i in range(3):
            server.expect(reply(text(f"answer {i}"), usage=measured()))
            await Runner.run(agent, f"question {i}", session=session)
        bodies.append([r.body for r in server.requests])
    assert bodies[0] == bodies[1]

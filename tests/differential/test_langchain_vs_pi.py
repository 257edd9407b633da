"""A session written by a LangChain agent through PicontextMiddleware reads the same in Pi 0.87.0.

A real `create_agent` with `ChatOpenAI` talks to the scripted server over HTTP: tool calls and
their results, an image, a system message passed by the caller, two threshold compactions. Pi
must project the file exactly as picontext does at every entry (`buildSessionContext`), estimate
and plan its next compaction the same way, and picontext's own reader must accept it unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sessiongen
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pi_reference import PiReference
from test_compaction_vs_pi import PythonSide as CompactionSide
from test_fallback_vs_pi import pi_reads_it_identically
from test_projection_vs_pi import PythonSide as ProjectionSide
from test_projection_vs_pi import compare_file

from picontext.integrations.langchain import PicontextMiddleware
from picontext.testing import ScriptedModelServer, measured, reply, text, tool_call
from picontext.testing.model_server import RecordedRequest, Reply

pytestmark = pytest.mark.differential
PNG = "iVBORw0KGgoAAAANSUhEUg=="


@tool
def lookup(topic: str) -> str:
    """Look a topic up in the notes."""
    return f"notes on {topic}: " + "the notes say a great deal about it. " * 24


def is_agent(req: RecordedRequest) -> bool:
    return "tools" in req.body


def is_summary(req: RecordedRequest) -> bool:
    return not is_agent(req)


def agent(step: Reply) -> Reply:
    return step.with_usage(measured(20)).when(is_agent)


def test_a_langchain_session_reads_the_same_in_pi(pi: PiReference, server: ScriptedModelServer,
                                                  tmp_path: Path) -> None:
    memory = PicontextMiddleware(model=server.model(context_window=4_000, max_tokens=500), cwd=str(tmp_path),
                                 settings={"compaction": {"reserveTokens": 1_000, "keepRecentTokens": 700}})
    llm = ChatOpenAI(model="scripted-model", base_url=server.url + "/v1", api_key="test",  # type: ignore[arg-type]
                     streaming=True, stream_usage=True, max_retries=0)
    graph = create_agent(llm, tools=[lookup], middleware=[memory])
    summary = reply(text("## Goal\nanswer questions\n## Progress\nsome answered"), usage=measured(20)).when(is_summary)
    turn = 0
    while sum(e["type"] == "compaction" for e in memory.memory.manager.get_entries()) < 2:
        assert turn < 40, "two compactions expected well before 40 turns"
        pending = sum(1 for s in server.pending_steps if s.match is is_summary)
        server.expect(*[summary] * (2 - pending))
        content: Any = f"question {turn}: " + "tell me more about it. " * 10
        messages: list[Any] = [HumanMessage(content)]
        if turn == 0:
            messages = [SystemMessage("answer briefly"),
                        HumanMessage([{"type": "text", "text": content},
                                      {"type": "image", "base64": PNG, "mime_type": "image/png"}])]
        if turn % 2 == 0:
            server.expect(agent(tool_call("lookup", {"topic": f"t{turn}"}, call_id=f"call_{turn}")))
        server.expect(agent(text(f"answer {turn}")))
        graph.invoke({"messages": messages})
        turn += 1
    assert all(s.match is is_summary for s in server.pending_steps) and not server.unexpected
    server.reset()

    path = Path(memory.memory.manager.get_session_file() or "")
    ids = [json.loads(line).get("id") for line in path.read_text().splitlines()[1:]]
    assert compare_file(pi, ProjectionSide(tmp_path), path, [sessiongen.UNDEFINED, None, *ids],
                        label="langchain session") == len(ids) + 2
    pi_reads_it_identically(pi, CompactionSide(tmp_path), path, "langchain session")

"""A session written by pydantic-ai through PicontextHistory is one Pi 0.87.0 reads as picontext does.

A real Agent talks to the scripted server over HTTP: a system prompt, text and an image from the
user, thinking, parallel tool calls, a structured tool result, a tool retry, a manual compaction
and more turns after it. The reference loads the file and builds its context; picontext's CLI
must build the same one, and the tree must be whole (no duplicate ids, no dangling parents).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from pi_reference import UNDEFINED, PiReference
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import BinaryContent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from test_projection_vs_pi import first_difference, normalise, run_cli

from picontext.integrations.pydantic_ai import PicontextHistory
from picontext.testing import ScriptedModelServer, reply, text, thinking, tool_call

PNG = b"\x89PNG\r\n\x1a\n not really"


async def test_a_pydantic_ai_session_reads_the_same_in_pi(server: ScriptedModelServer, tmp_path: Path,
                                                           pi: PiReference) -> None:
    history = PicontextHistory(model=server.model(), cwd=str(tmp_path), api_key="test",
                               settings={"compaction": {"keepRecentTokens": 40}})
    model = OpenAIChatModel("scripted-model", provider=OpenAIProvider(base_url=server.url + "/v1", api_key="test"))
    agent: Agent[None, str] = Agent(model, system_prompt="You are a careful archivist.", capabilities=[history])
    tries = {"n": 0}

    @agent.tool_plain
    def lookup(topic: str) -> dict[str, object]:
        """Look a topic up."""
        return {"topic": topic, "years": [1901, 1950]}

    @agent.tool_plain
    def fussy(value: str) -> str:
        """Needs a second try."""
        tries["n"] += 1
        if tries["n"] == 1:
            raise ModelRetry("value must be upper case")
        return value

    server.expect(
        reply(thinking("two lookups"), text("Looking."), tool_call("lookup", {"topic": "cats"}, call_id="c1"),
              tool_call("lookup", {"topic": "dogs"}, call_id="c2")),
        text("Cats since 1901, dogs since 1950."),
        reply(tool_call("fussy", {"value": "a"}, call_id="c3")),
        reply(tool_call("fussy", {"value": "A"}, call_id="c4")),
        text("Done: A."),
        text("## Goal\nArchive questions.\n## Progress\nCats, dogs and a fussy value."),  # the compaction
        text("A picture of nothing."),
    )
    await agent.run("When did cats and dogs arrive?")
    await agent.run(["What is fussy about this?", BinaryContent(PNG, media_type="image/png")])
    assert await history.acompact() is not None
    await agent.run("And this picture?")
    path = history.memory.manager.get_session_file()
    assert path is not None
    facts = pi.op("session.treeFacts", str(path))
    assert facts["duplicates"] == [] and facts["dangling"] == []
    reference = pi.op("session.contextOfFile", str(path), UNDEFINED)
    ours = run_cli(path, UNDEFINED)
    assert first_difference(normalise(reference), normalise(ours)) is None
    roles = [m["role"] for m in reference["messages"]]
    assert "compactionSummary" in roles and roles[-1] == "assistant"
    assert facts["messages"] == len(ours["messages"])
    # What the reference reads holds the pydantic-ai specifics Pi has room for.
    text_of_file = await asyncio.to_thread(Path(path).read_text)
    assert '{"type":"thinking","thinking":"two lookups"' in text_of_file
    assert '"type":"image"' in text_of_file
    stored = [json.loads(line) for line in text_of_file.splitlines()]
    results = [e["message"] for e in stored if e.get("type") == "message" and e["message"]["role"] == "toolResult"]
    assert [r["isError"] for r in results] == [False, False, True, False]
    assert results[0]["details"] == {"pydantic_ai": {"content": {"topic": "cats", "years": [1901, 1950]}}}

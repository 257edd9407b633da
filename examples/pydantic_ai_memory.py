"""A pydantic-ai agent whose conversation lives in a picontext session and survives its window.

    pip install 'picontext[pydantic-ai]'
    python examples/pydantic_ai_memory.py              # offline: a scripted OpenAI-compatible server
    OPENAI_API_KEY=... python examples/pydantic_ai_memory.py --real   # gpt-4.1-mini

Offline, the agent talks over HTTP to picontext's scripted server with an 8k-token window, so a
few turns of long tool results fill it: the session compacts, the agent keeps answering, and
every message stays in the file. Afterwards:

    picontext show SESSION_ID      # the transcript, compacted entries dimmed
    picontext export SESSION_ID    # one HTML file
    picontext -r SESSION_ID        # continue the conversation in picontext's own chat
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import tempfile
from dataclasses import replace
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from picontext.integrations.pydantic_ai import PicontextHistory
from picontext.testing import ScriptedModelServer, reply, text, tokens, tool_call
from picontext.testing.model_server import RecordedRequest, Step


class OfflineModel(ScriptedModelServer):
    """Calls `read_chapter` for every question, then answers; summarizes when asked to."""

    def _take(self, req: RecordedRequest) -> Step | None:
        with self._lock:
            self.requests.append(req)
        body = req.body
        if body.get("stream"):  # picontext's summarizer streams; the agent does not
            return reply(text("## Goal\nRead the book.\n## Progress\nThe earlier chapters were read."))
        asked = [m["content"] for m in body["messages"] if m["role"] == "user"][-1].split()[-2]
        prompt = tokens(math.ceil(len(json.dumps(body["messages"])) / 4), 30)
        if body["messages"][-1]["role"] == "tool":
            return replace(text(f"Chapter {asked} is about the sea."), usage=prompt)
        return replace(reply(tool_call("read_chapter", {"number": int(asked)}, call_id=f"call-{len(self.requests)}")),
                       usage=prompt)


async def main(real: bool) -> None:
    server: OfflineModel | None = None
    if real:
        history = PicontextHistory(model="openai/gpt-4.1-mini")
        model: Any = "openai:gpt-4.1-mini"
    else:
        server = OfflineModel().start()
        window = server.model(context_window=8_000, max_tokens=500)
        history = PicontextHistory(model=window, api_key="offline", cwd=tempfile.mkdtemp(),
                                   settings={"compaction": {"reserveTokens": 2_000, "keepRecentTokens": 1_500}})
        model = OpenAIChatModel("offline", provider=OpenAIProvider(base_url=server.url + "/v1", api_key="offline"))
    agent = Agent(model, system_prompt="You read chapters and say what they are about.", capabilities=[history])

    @agent.tool_plain
    def read_chapter(number: int) -> str:
        """The text of a chapter."""
        return f"Chapter {number}. " + "The waves rolled in and the gulls cried over the harbour. " * 80

    history.memory.subscribe(lambda e: print("  [compacted]") if e["type"] == "compaction_end" else None)
    for n in range(1, 9):
        result = await agent.run(f"What is chapter {n} about?")  # no message_history: the session has it
        print(f"{n}: {result.output}")
    print(f"session {history.session_id}: {history.memory.manager.entry_count()} entries, "
          f"{len(history.messages())} messages in the model's next input")
    if server is not None:
        server.close()


if __name__ == "__main__":
    asyncio.run(main("--real" in sys.argv))

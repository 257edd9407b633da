"""A long OpenAI Agents SDK conversation against the scripted model server (shared by the
integration test and the Pi differential test).

Every turn is one `Runner.run`: the model calls the `lookup` tool, reads its output and answers.
Replies report `measured()` usage (the request's own size), so the threshold works from the
usage the SDK reports, as with a real server. Summary requests (picontext's, streamed) and the
agent's requests (the SDK's, not streamed) are told apart by the `stream` flag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from picontext.integrations.openai_agents import PicontextSession
from picontext.testing import RecordedRequest, ScriptedModelServer, measured, reply, request_tokens, text, tool_call

set_tracing_disabled(True)

SUMMARY_MARK = "SUMMARY-MARK"
TOOL_CHARS = 1600


def is_summary(req: RecordedRequest) -> bool:
    return isinstance(req.body, dict) and req.body.get("stream") is True


def is_agent(req: RecordedRequest) -> bool:
    return isinstance(req.body, dict) and not req.body.get("stream")


def tool_output(q: str) -> str:
    return f"facts about {q}: " + ("lorem ipsum dolor sit amet " * (TOOL_CHARS // 27))[:TOOL_CHARS]


@function_tool
def lookup(q: str) -> str:
    """Look a topic up in the knowledge base."""
    return tool_output(q)


def make_agent(server: ScriptedModelServer) -> Agent[Any]:
    client = AsyncOpenAI(base_url=server.url + "/v1", api_key="scripted", max_retries=0)
    return Agent(name="assistant", instructions="Answer with the lookup tool.", tools=[lookup],
                 model=OpenAIChatCompletionsModel("scripted-model", client))


@dataclass
class Conversation:
    server: ScriptedModelServer
    session: PicontextSession
    agent: Agent[Any]
    outputs: list[str] = field(default_factory=list)
    summaries: int = 0

    def _top_up_summaries(self, keep: int = 3) -> None:
        pending = sum(1 for s in self.server.pending_steps if getattr(s, "match", None) is is_summary)
        for _ in range(keep - pending):
            self.summaries += 1
            body = (f"## Goal\nAnswer questions with lookup ({SUMMARY_MARK} {self.summaries}).\n"
                    "## Progress\nEarlier questions were answered from the knowledge base.")
            self.server.expect(reply(text(body), usage=measured(60)).when(is_summary))

    async def turn(self, i: int, *, input_filter: bool = True) -> str:
        self._top_up_summaries()
        self.server.expect(
            reply(tool_call("lookup", {"q": f"topic {i}"}, call_id=f"call_{i}"), usage=measured(20)).when(is_agent),
            reply(text(f"answer {i}: topic {i} is about lorem ipsum."), usage=measured(15)).when(is_agent),
        )
        config = RunConfig(call_model_input_filter=self.session.model_input_filter) if input_filter else None
        result = await Runner.run(self.agent, f"question {i}: tell me about topic {i}, please.",
                                  session=self.session, run_config=config)
        output = str(result.final_output)
        self.outputs.append(output)
        return output

    def agent_requests(self) -> list[RecordedRequest]:
        return [r for r in self.server.requests if is_agent(r)]

    def largest_request(self) -> int:
        return max(request_tokens(r.body) for r in self.agent_requests())

    def drain(self) -> None:
        """Forget the summary replies never asked for (the script keeps a few in reserve)."""
        assert not self.server.unexpected, self.server.unexpected
        assert all(getattr(s, "match", None) is is_summary for s in self.server.pending_steps)
        self.server.reset()


def session_for(server: ScriptedModelServer, store: str, cwd: str, *, window: int = 4_000,
                session_id: str | None = None, **kw: Any) -> PicontextSession:
    model = server.model("openai-completions", context_window=window, max_tokens=1_000)
    settings = {"compaction": {"reserveTokens": 1_000, "keepRecentTokens": 800}}
    return PicontextSession(session_id, model=model, store=store, cwd=cwd, settings=settings, **kw)

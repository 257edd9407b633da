"""An OpenAI Agents SDK agent whose memory is a picontext session (`picontext[openai-agents]`).

Offline, against picontext's scripted model server (a real HTTP server on 127.0.0.1 with a
4,000-token window, so the conversation outgrows it within a few turns)::

    python examples/openai_agents_memory.py --scripted --turns 12

Against a real OpenAI-compatible model from picontext's catalog or models.json (its key from
the environment or `picontext auth set`); one prompt per line on stdin::

    echo "What is 17 * 23?" | python examples/openai_agents_memory.py --model openai/gpt-4.1-mini
    python examples/openai_agents_memory.py --model openai/gpt-4.1-mini --session ID   # continue

Either way the session is an ordinary picontext session: `picontext show ID`, `picontext tree
ID`, `picontext export FILE`, or continue it in the chat with `picontext -r ID`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from picontext.ai.auth import require_api_key
from picontext.ai.models import default_catalog
from picontext.integrations.openai_agents import PicontextSession


@function_tool
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


def build_agent(base_url: str, api_key: str, model_id: str) -> Agent[Any]:
    client = AsyncOpenAI(base_url=base_url, api_key=api_key)
    return Agent(name="assistant", instructions="Be brief. Use word_count to count words.",
                 tools=[word_count], model=OpenAIChatCompletionsModel(model_id, client))


async def ask(agent: Agent[Any], session: PicontextSession, prompt: str) -> str:
    # The input filter lets a compaction made during a run also shrink that run's next request.
    config = RunConfig(call_model_input_filter=session.model_input_filter)
    result = await Runner.run(agent, prompt, session=session, run_config=config)
    return str(result.final_output)


def report(session: PicontextSession) -> str:
    memory = session.memory
    return f"context ~{memory.context_tokens()} tokens of {memory.context_window}, compactions {session.compactions}"


async def scripted(turns: int, store: str | None) -> None:
    from picontext.testing import ScriptedModelServer, measured, reply, text, tool_call

    with ScriptedModelServer() as server:
        model = server.model("openai-completions", context_window=4_000, max_tokens=1_000)
        session = PicontextSession(model=model, store=store,
                                   settings={"compaction": {"reserveTokens": 1_000, "keepRecentTokens": 800}})
        agent = build_agent(server.url + "/v1", "scripted", model["id"])
        summary = reply(text("## Goal\nCount words of the user's texts.\n## Progress\nEarlier texts were counted."),
                        usage=measured(40)).when(lambda req: bool(req.body.get("stream")))
        for turn in range(turns):
            server.expect(summary, summary)  # at most two summary requests per turn (history, split turn)
            server.expect(reply(tool_call("word_count", {"text": "lorem " * 300}, call_id=f"call_{turn}"),
                                usage=measured(20)),
                          reply(text(f"Text {turn} has 300 words."), usage=measured(10)))
            answer = await ask(agent, session, f"Text {turn}: " + "lorem ipsum " * 150 + " How many words?")
            print(f"turn {turn}: {answer}  [{report(session)}]")
        print(f"\nsession {session.session_id}: {session.memory.manager.get_session_file()}")


async def real(model_ref: str, session_id: str | None, store: str | None) -> None:
    model = default_catalog().get(model_ref)
    key = require_api_key(model["provider"], model=model)
    session = PicontextSession(session_id, model=model_ref, store=store)
    agent = build_agent(model["baseUrl"], key, model["id"])
    print(f"session {session.session_id} ({report(session)}); one prompt per line, end with EOF", file=sys.stderr)
    for line in sys.stdin:
        if line.strip():
            print(await ask(agent, session, line.strip()))
            print(f"[{report(session)}]", file=sys.stderr)
    print(f"session {session.session_id}: {session.memory.manager.get_session_file()}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scripted", action="store_true", help="offline, against the scripted model server")
    parser.add_argument("--turns", type=int, default=12, help="turns of the scripted conversation")
    parser.add_argument("--model", help="provider/id of an OpenAI-compatible model (catalog or models.json)")
    parser.add_argument("--session", help="continue this session id")
    parser.add_argument("--store", help="where sessions live (default: picontext's session directory)")
    args = parser.parse_args(argv)
    set_tracing_disabled(True)
    if args.scripted:
        asyncio.run(scripted(args.turns, args.store))
    elif args.model:
        asyncio.run(real(args.model, args.session, args.store))
    else:
        parser.error("give --scripted or --model provider/id")
    return 0


if __name__ == "__main__":
    sys.exit(main())

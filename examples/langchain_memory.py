"""A LangChain agent whose memory is a picontext session (`picontext[langchain]`).

Offline, against picontext's scripted model server (a real HTTP server on 127.0.0.1 with a
4,000-token window, so the conversation outgrows it within a few turns)::

    python examples/langchain_memory.py --scripted --turns 12

Against a real OpenAI-compatible model from picontext's catalog or models.json (its key from
the environment or `picontext auth set`); one prompt per line on stdin::

    echo "What is 17 * 23?" | python examples/langchain_memory.py --model openai/gpt-4.1-mini
    python examples/langchain_memory.py --model openai/gpt-4.1-mini --session ID   # continue

Either way the session is an ordinary picontext session: `picontext show ID`, `picontext tree
ID`, `picontext export ID`, or continue it in the chat with `picontext -r ID`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from picontext.ai.auth import require_api_key
from picontext.ai.models import default_catalog
from picontext.integrations.langchain import PicontextMiddleware


@tool
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


def build_agent(memory: PicontextMiddleware, base_url: str, api_key: str, model_id: str) -> Any:
    chat = ChatOpenAI(model=model_id, base_url=base_url, api_key=api_key,  # type: ignore[arg-type]
                      streaming=True, stream_usage=True)  # usage on each reply: the threshold starts from it
    # No checkpointer needed: the session is the conversation. PicontextMiddleware goes first, so
    # other middleware see the projection it gives the model.
    return create_agent(chat, tools=[word_count], middleware=[memory],
                        system_prompt="Be brief. Use word_count to count words.")


def ask(agent: Any, prompt: str) -> str:
    out = agent.invoke({"messages": [HumanMessage(prompt)]})  # only the new message: the session has the rest
    return str(out["messages"][-1].text)


def report(memory: PicontextMiddleware) -> str:
    conversation = memory.memory
    compactions = sum(e["type"] == "compaction" for e in conversation.manager.get_entries())
    tokens = conversation.context_tokens()
    return f"context ~{tokens} tokens of {conversation.context_window}, compactions {compactions}"


def scripted(turns: int, store: str | None) -> None:
    from picontext.testing import ScriptedModelServer, measured, reply, text, tool_call

    with ScriptedModelServer() as server:
        model = server.model("openai-completions", context_window=4_000, max_tokens=1_000)
        memory = PicontextMiddleware(model=model, store=store,
                                     settings={"compaction": {"reserveTokens": 1_000, "keepRecentTokens": 800}})
        agent = build_agent(memory, server.url + "/v1", "scripted", model["id"])
        # The agent's requests offer its tool; picontext's summary requests offer none.
        summary = reply(text("## Goal\nCount words of the user's texts.\n## Progress\nEarlier texts were counted."),
                        usage=measured(40)).when(lambda req: "tools" not in req.body)
        for turn in range(turns):
            waiting = sum(1 for step in server.pending_steps if step is summary)
            server.expect(*[summary] * (2 - waiting))  # at most two summary requests a turn (history, split turn)
            server.expect(reply(tool_call("word_count", {"text": "lorem " * 300}, call_id=f"call_{turn}"),
                                usage=measured(20)).when(lambda req: "tools" in req.body),
                          reply(text(f"Text {turn} has 300 words."), usage=measured(10)).when(
                              lambda req: "tools" in req.body))
            answer = ask(agent, f"Text {turn}: " + "lorem ipsum " * 150 + " How many words?")
            print(f"turn {turn}: {answer}  [{report(memory)}]")
        print(f"\nsession {memory.session_id}: {memory.memory.manager.get_session_file()}")
        server.reset()  # the summary replies kept ready but not needed


def real(model_ref: str, session_id: str | None, store: str | None) -> None:
    model = default_catalog().get(model_ref)
    key = require_api_key(model["provider"], model=model)
    memory = PicontextMiddleware(session_id, model=model_ref, store=store)
    agent = build_agent(memory, model["baseUrl"], key, model["id"])
    print(f"session {memory.session_id} ({report(memory)}); one prompt per line, end with EOF", file=sys.stderr)
    for line in sys.stdin:
        if line.strip():
            print(ask(agent, line.strip()))
            print(f"[{report(memory)}]", file=sys.stderr)
    print(f"session {memory.session_id}: {memory.memory.manager.get_session_file()}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scripted", action="store_true", help="offline, against the scripted model server")
    parser.add_argument("--turns", type=int, default=12, help="turns of the scripted conversation")
    parser.add_argument("--model", help="provider/id of an OpenAI-compatible model (catalog or models.json)")
    parser.add_argument("--session", help="continue this session id")
    parser.add_argument("--store", help="where sessions live (default: picontext's session directory)")
    args = parser.parse_args(argv)
    if args.scripted:
        scripted(args.turns, args.store)
    elif args.model:
        real(args.model, args.session, args.store)
    else:
        parser.error("give --scripted or --model provider/id")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Per-turn cost of PicontextMiddleware in a LangChain agent, against LangChain's own default memory.

The same `create_agent` graph answers one prompt per turn with a chat model that costs nothing
(`GenericFakeChatModel`: model time is the same with either memory and is left out), four ways:

* `floor`         no memory at all: a one-message state, no middleware (what the graph itself costs);
* `plain-state`   LangChain's default: an `InMemorySaver` checkpointer whose thread holds `--entries`
                  messages, no SummarizationMiddleware (the model is sent all of them);
* `picontext`     PicontextMiddleware on a JSONL session of `--entries` entries with a compaction near
                  its end (the usual state of a long session), no checkpointer;
* `picontext-uncompacted`  the same session without the compaction (a window far larger than it):
                  the projection is the whole session;
* `no memory, same input`  after each picontext case: the graph with no memory, given the same
                  model input (the projection's messages and the prompt) as its input state.

Reported: median and p90 ms per turn, and the middleware's own time per turn (inside its hook,
the model call excluded; wall and this thread's CPU time, which a loaded machine does not
inflate), median and mean over the timed turns, the number docs/performance.md holds against
the 2 ms budget, and apart from them the first turn (it converts the whole context once).

    python bench/bench_integrations_langchain.py --entries 10000 --rounds 200
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from picontext.integrations.langchain import PicontextMiddleware

FILLER = "lorem ipsum dolor sit amet " * 12


USAGE: Any = {"input_tokens": 50_000, "output_tokens": 40, "total_tokens": 50_040}


def model() -> GenericFakeChatModel:
    # Replies carry usage, as chat models report it: the threshold check starts from it.
    return GenericFakeChatModel(messages=itertools.cycle([AIMessage(f"answer: {FILLER}", usage_metadata=USAGE)]))


def conversation(entries: int) -> list[BaseMessage]:
    """`entries` messages, 4 a turn: question, tool call, its result, answer."""
    out: list[BaseMessage] = []
    for i in range(entries // 4):
        out += [HumanMessage(f"question {i}: {FILLER}"),
                AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": i}, "id": f"call_{i}"}],
                          usage_metadata=USAGE),
                ToolMessage(f"result {i}: {FILLER * 3}", tool_call_id=f"call_{i}", name="lookup"),
                AIMessage(f"answer {i}: {FILLER}", usage_metadata=USAGE)]
    return out


def timed_rounds(run: Callable[[int], Any], rounds: int) -> list[float]:
    for i in range(5):
        run(10_000_000 + i)  # warm-up
    times = []
    for i in range(rounds):
        start = time.perf_counter()
        run(i)
        times.append((time.perf_counter() - start) * 1000)
    return times


class Timed(PicontextMiddleware):
    """The middleware, with the time spent in its hook outside the model call, per turn."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.own: list[tuple[float, float]] = []  # (wall ms, CPU ms) of each turn

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        inner = inner_cpu = 0.0

        def timed_handler(req: Any) -> Any:
            nonlocal inner, inner_cpu
            start, start_cpu = time.perf_counter(), time.thread_time()
            try:
                return handler(req)
            finally:
                inner += time.perf_counter() - start
                inner_cpu += time.thread_time() - start_cpu

        start, start_cpu = time.perf_counter(), time.thread_time()
        result = super().wrap_model_call(request, timed_handler)
        # CPU time of this thread: the work itself, without the waits for a core a loaded machine adds.
        self.own.append(((time.perf_counter() - start - inner) * 1000,
                         (time.thread_time() - start_cpu - inner_cpu) * 1000))
        return result


Own = tuple[float, float, float, float, float, float]  # median wall, median CPU, mean wall, mean CPU, first turn


def picontext_case(entries: int, rounds: int, compacted: bool, store: str
                   ) -> tuple[list[float], Own, tuple[list[float], list[BaseMessage]]]:
    window = 2_000_000_000  # never over the threshold: the turn is measured, not a compaction
    record = {"id": "fake", "name": "fake", "api": "openai-completions", "provider": "bench",
              "baseUrl": "http://127.0.0.1:9/v1", "reasoning": False, "input": ["text"],
              "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
              "contextWindow": window, "maxTokens": 1000}
    middleware = Timed(model=record, store=store, cwd=store, summarizer=object())  # type: ignore[arg-type]
    from picontext.integrations.langchain_messages import from_langchain_messages

    ids = middleware.memory.append(from_langchain_messages(conversation(entries), origin={
        "api": "openai-completions", "provider": "bench", "model": "fake"}))
    if compacted:  # keep the last ~200 messages, as a compaction of a long session does
        middleware.memory.manager.append_compaction("## Goal\nbench\n## Progress\nmany turns", ids[-200], 150_000)
    agent = create_agent(model(), tools=[], middleware=[middleware])
    times = timed_rounds(lambda i: agent.invoke({"messages": [HumanMessage(f"turn {i}: {FILLER}")]}), rounds)
    # No memory, the same model input: the projection handed to the graph as its input messages
    # (copies: the graph's reducer gives each message an id).
    context = [message.model_copy() for message in middleware._langchain_context()]
    bare = create_agent(model(), tools=[])
    same_input = timed_rounds(lambda i: bare.invoke({"messages": [*context, HumanMessage(f"turn {i}: {FILLER}")]}),
                              rounds)
    first, steady = middleware.own[0], middleware.own[5:]  # the first turn converts the whole context once
    walls, cpus = [w for w, _ in steady], [c for _, c in steady]
    return times, (statistics.median(walls), statistics.median(cpus), statistics.fmean(walls),
                   statistics.fmean(cpus), first[0], first[1]), (same_input, context)


def report(name: str, times: list[float], own: Own | None = None) -> None:
    ordered = sorted(times)
    p90 = ordered[int(len(ordered) * 0.9)]
    print(f"{name:24s} median {statistics.median(times):7.2f} ms   p90 {p90:7.2f} ms")
    if own is not None:
        print(f"{'':24s} middleware's own per turn: median {own[0]:5.2f} ms wall, {own[1]:5.2f} ms CPU; "
              f"mean {own[2]:5.2f} ms wall, {own[3]:5.2f} ms CPU; first turn {own[4]:.1f} ms wall, {own[5]:.1f} ms CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PICONTEXT_DIR"] = tmp
        floor = create_agent(model(), tools=[])
        report("floor", timed_rounds(lambda i: floor.invoke({"messages": [HumanMessage(f"turn {i}")]}), args.rounds))

        plain = create_agent(model(), tools=[], checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "bench"}}
        plain.invoke({"messages": conversation(args.entries)}, config)
        report("plain-state", timed_rounds(
            lambda i: plain.invoke({"messages": [HumanMessage(f"turn {i}: {FILLER}")]}, config), args.rounds))

        for name, compacted in (("picontext", True), ("picontext-uncompacted", False)):
            times, own, same_input = picontext_case(args.entries, args.rounds, compacted, os.path.join(tmp, name))
            report(name, times, own)
            report(f"  no memory, same input ({len(same_input[1]) + 1} messages)", same_input[0])


if __name__ == "__main__":
    main()

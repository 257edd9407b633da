"""What PicontextHistory adds to a pydantic-ai turn, against pydantic-ai's own memory (`message_history`).

One conversation of `--entries` messages (short user/assistant pairs, no compaction: the model
gets all of them either way), then `--turns` more turns timed two ways in the same process:

* `no memory`        `agent.run(prompt)` alone: what the framework costs with nothing to remember;
* `message_history`  pydantic-ai's default: `agent.run(prompt, message_history=previous.all_messages())`;
* `PicontextHistory` `agent.run(prompt)` with the capability: every message appended to the
  session file (JSONL), the model input rebuilt from the session's projection, Pi's threshold
  checked before each request.

and then once more after a compaction that keeps the last `--kept` entries (what a long session
looks like: 10k entries in the file, a window's worth in the model input). Besides whole turns,
the time spent inside the capability's own hooks (storing, the threshold, the projection and
its conversion) is measured directly, per turn, as wall and CPU time (which a loaded machine
does not inflate): that is what the adapter adds to a turn. Every agent has a system prompt.

The model is pydantic-ai's in-process `FunctionModel` (answers "ok" at once), so the numbers are
the framework plus the memory, with no network. Reported: ms per turn (median) and the difference.
Not a test: numbers go to stdout and docs/performance.md.

    .venv/bin/python bench/bench_integrations_pydantic.py [--entries 10000] [--turns 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from picontext.integrations.memory import ConversationMemory
from picontext.integrations.pydantic_ai import PicontextHistory, from_pi

HOOK = [0.0, 0.0]  # inside the capability's hooks: wall ms, CPU ms (this turn)
APPEND = [0.0, 0.0]  # of which: ConversationMemory.append (the session store's write)


def _timed(method: Any, total: list[float]) -> Any:
    """The method, adding its wall and CPU time to `total` (sync or async)."""
    if asyncio.iscoroutinefunction(method):
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            start, start_cpu = time.perf_counter(), time.thread_time()
            try:
                return await method(*args, **kwargs)
            finally:
                total[0] += (time.perf_counter() - start) * 1000
                total[1] += (time.thread_time() - start_cpu) * 1000
        return run_async

    def run(*args: Any, **kwargs: Any) -> Any:
        start, start_cpu = time.perf_counter(), time.thread_time()
        try:
            return method(*args, **kwargs)
        finally:
            total[0] += (time.perf_counter() - start) * 1000
            total[1] += (time.thread_time() - start_cpu) * 1000
    return run


# wrap_run and before_model_request do nothing but call _store; for_run copies the capability.
for _name in ("_store", "prepare_model_request", "for_run", "before_run"):
    setattr(PicontextHistory, _name, _timed(getattr(PicontextHistory, _name), HOOK))
ConversationMemory.append = _timed(ConversationMemory.append, APPEND)  # type: ignore[method-assign]

MODEL: dict[str, Any] = {
    "id": "bench", "name": "bench", "api": "openai-completions", "provider": "bench", "baseUrl": "http://127.0.0.1:9",
    "reasoning": False, "input": ["text"], "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    "contextWindow": 100_000_000, "maxTokens": 1_000,
}


SYSTEM_PROMPT = "You answer questions about items."


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("ok")])


def seed(history: PicontextHistory, entries: int) -> None:
    batch: list[dict[str, Any]] = []
    for i in range(entries // 2):
        batch.append({"role": "user", "content": f"question {i}: what about item {i}?", "timestamp": i})
        batch.append({"role": "assistant", "content": [{"type": "text", "text": f"item {i} is fine"}],
                      "usage": {"input": 10 + i, "output": 4}, "timestamp": i})
        if len(batch) >= 2_000:
            history.memory.append(batch)
            batch = []
    if batch:
        history.memory.append(batch)


async def timed(run: Any, turns: int, hooks: list[tuple[float, ...]] | None = None) -> list[float]:
    times = []
    for turn in range(turns):
        HOOK[:] = APPEND[:] = [0.0, 0.0]
        start = time.perf_counter()
        await run(f"turn {turn}: anything new?")
        times.append((time.perf_counter() - start) * 1000)
        if hooks is not None:
            hooks.append((*HOOK, *APPEND))
    return times


async def compare(history: PicontextHistory, turns: int, label: str) -> None:
    plain_history: list[ModelMessage] = from_pi(history.memory.messages())
    bare = Agent(FunctionModel(answer), system_prompt=SYSTEM_PROMPT)
    plain = Agent(FunctionModel(answer), system_prompt=SYSTEM_PROMPT)
    kept = Agent(FunctionModel(answer), system_prompt=SYSTEM_PROMPT, capabilities=[history])

    async def bare_turn(prompt: str) -> None:
        await bare.run(prompt)  # no memory: the model sees the prompt alone

    async def plain_turn(prompt: str) -> None:
        nonlocal plain_history
        plain_history = (await plain.run(prompt, message_history=plain_history)).all_messages()

    async def kept_turn(prompt: str) -> None:
        await kept.run(prompt)

    await timed(bare_turn, 2)  # warm all paths (the first turn with the capability converts the context)
    await timed(plain_turn, 2)
    await timed(kept_turn, 2)
    floor: list[float] = []
    base: list[float] = []
    ours: list[float] = []
    hooks: list[tuple[float, ...]] = []
    for _ in range(3):  # interleaved rounds: a load spike hits every side
        floor += await timed(bare_turn, turns // 3)
        base += await timed(plain_turn, turns // 3)
        ours += await timed(kept_turn, turns // 3, hooks)
    f, b, o = statistics.median(floor), statistics.median(base), statistics.median(ours)
    print(f"{label}: {history.memory.manager.entry_count()} entries, model input {len(plain_history)} messages "
          f"(message_history) / {len(history.memory.messages())} (PicontextHistory), {len(base)} turns each")
    print(f"  no memory         {f:9.2f} ms/turn (median)")
    print(f"  message_history   {b:9.2f} ms/turn (median)")
    print(f"  PicontextHistory  {o:9.2f} ms/turn (median)   difference {o - b:+.2f} ms, ratio {o / b:.2f}")
    columns = list(zip(*hooks, strict=True))
    median = [statistics.median(c) for c in columns]
    mean = [statistics.fmean(c) for c in columns]
    print(f"  in PicontextHistory's hooks per turn: median {median[0]:.2f} ms wall, {median[1]:.2f} ms CPU; "
          f"mean {mean[0]:.2f} ms wall, {mean[1]:.2f} ms CPU")
    print(f"    of which the session appends: median {median[2]:.2f} ms wall, {median[3]:.2f} ms CPU")


async def main(entries: int, turns: int, kept: int) -> None:
    print(f"load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PICONTEXT_DIR"] = tmp
        history = PicontextHistory(model=MODEL, cwd=tmp, api_key="bench")
        seed(history, entries)
        await compare(history, turns, "uncompacted")
        manager = history.memory.manager
        ids = [e["id"] for e in manager.get_entries()]
        manager.append_compaction("## Goal\nAnswer about items.", ids[-kept], 1_000_000)
        await compare(history, turns, f"after a compaction keeping {kept} entries")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--kept", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.entries, args.turns, args.kept))

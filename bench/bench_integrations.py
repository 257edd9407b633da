"""Per-turn cost of picontext as a framework's memory, against the framework's own default.

OpenAI Agents SDK: `PicontextSession` (JSONL store) against the SDK's `SQLiteSession` (a file),
both holding the same conversation of `--entries` items. One turn is what `Runner.run` asks of
its session for a prompt that makes one tool call: `get_items()` once, then `add_items` of the
user input, of the tool call with its output (with the run's usage) and of the answer. Model
calls are not part of it (they cost the same with either memory). Two picontext cases:

* `uncompacted`: the whole conversation is the context (a window far larger than it), so
  `get_items` converts all of it, as SQLiteSession returns all of it;
* `compacted`: a compaction near the end (the usual state of a long picontext session): the
  context is the summary and the kept tail.

    python bench/bench_integrations.py --entries 10000 --rounds 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from agents import SQLiteSession

from picontext.integrations.openai_agents import PicontextSession
from picontext.testing import ScriptedModelServer

FILLER = "lorem ipsum dolor sit amet " * 12


def turn_items(i: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    user = [{"role": "user", "content": f"question {i}: {FILLER}"}]
    call = [{"type": "function_call", "call_id": f"call_{i}", "name": "lookup", "arguments": json.dumps({"q": i})},
            {"type": "function_call_output", "call_id": f"call_{i}", "output": f"result {i}: {FILLER * 3}"}]
    answer = [{"id": f"msg_{i}", "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": f"answer {i}: {FILLER}", "annotations": []}]}]
    return user, call, answer


class FakeUsage:
    """What the Runner's context wrapper carries: per-request usage entries."""

    def __init__(self) -> None:
        self.request_usage_entries: list[Any] = []

    def add(self, tokens: int) -> None:
        self.request_usage_entries.append(SimpleNamespace(
            input_tokens=tokens, output_tokens=20, total_tokens=tokens + 20,
            input_tokens_details=SimpleNamespace(cached_tokens=0)))


async def fill(session: Any, entries: int) -> None:
    """`entries` items: 4 per turn (user, call, output, answer)."""
    for i in range(entries // 4):
        user, call, answer = turn_items(i)
        await session.add_items(user + call + answer)


async def one_turn(session: Any, i: int, wrapper: Any) -> float:
    user, call, answer = turn_items(i)
    start = time.perf_counter()
    await session.get_items()
    await session.add_items(user, wrapper=wrapper) if wrapper else await session.add_items(user)
    wrapper and wrapper.usage.add(50_000)
    await session.add_items(call, wrapper=wrapper) if wrapper else await session.add_items(call)
    wrapper and wrapper.usage.add(50_100)
    await session.add_items(answer, wrapper=wrapper) if wrapper else await session.add_items(answer)
    return time.perf_counter() - start


async def measure(session: Any, rounds: int, with_wrapper: bool) -> float:
    times = []
    for r in range(rounds):
        wrapper = SimpleNamespace(usage=FakeUsage()) if with_wrapper else None
        times.append(await one_turn(session, 1_000_000 + r, wrapper))
    return statistics.median(times) * 1000


async def run(entries: int, rounds: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, ScriptedModelServer() as server:
        sqlite = SQLiteSession("bench", db_path=str(Path(tmp) / "sdk.db"))
        await fill(sqlite, entries)
        out["sqlite"] = await measure(sqlite, rounds, False)
        for case, window in (("uncompacted", 100_000_000), ("compacted", 100_000_000)):
            model = server.model("openai-completions", context_window=window)
            session = PicontextSession(model=model, store=str(Path(tmp) / case), cwd=tmp,
                                       settings={"compaction": {"keepRecentTokens": 4_000}})
            session.auto_compact = False  # filling is not what is measured
            await fill(session, entries)
            session.auto_compact = True
            if case == "compacted":
                from picontext.compaction.completion import ScriptedCompletion

                session.memory._host.summarizer = ScriptedCompletion(default="## Goal\nbench\n## Progress\nfilled")
                assert await session.memory.acompact(reason="manual") is not None
            out[case] = await measure(session, rounds, True)
            out[f"{case}_items"] = float(len(await session.get_items()))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    result = asyncio.run(run(args.entries, args.rounds))
    sqlite = result["sqlite"]
    print(f"openai-agents, {args.entries} entries, median of {args.rounds} turns (ms per turn)")
    print(f"  SQLiteSession                   {sqlite:8.2f}")
    for case in ("uncompacted", "compacted"):
        ms = result[case]
        print(f"  PicontextSession {case:<14} {ms:8.2f}  added {ms - sqlite:+.2f} ms"
              f"  (context: {int(result[case + '_items'])} items)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The agent's per-turn session work on a realistic long session, in process: the after-run
compaction check (`CompactionRuntime.check` on the last assistant message, window large enough
that nothing is compacted) and append + context of one message, on a 1k and a large session.
The first check after opening is timed on its own (a `picontext -p` run makes exactly one);
the others are averaged.

    python bench/bench_turn.py --sizes 1000,50000
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gen_realistic import generate  # noqa: E402
from picontext.agent.session import AgentSession  # noqa: E402
from picontext.ai.providers import StreamOptions  # noqa: E402
from picontext.scripted import ScriptedModelServer  # noqa: E402
from picontext.session.manager import SessionManager  # noqa: E402


def measure(path: Path, server: ScriptedModelServer, rounds: int) -> tuple[float, float, float, float]:
    manager = SessionManager.open(str(path))
    t0 = time.perf_counter()
    session = AgentSession(manager, model=server.model("openai-completions", context_window=10_000_000),
                           stream_options=StreamOptions(api_key="k"))
    messages = manager.build_session_projection().messages
    first = time.perf_counter() - t0
    last = next(m for m in reversed(messages) if m.get("role") == "assistant")

    async def checks() -> tuple[float, float]:
        start = time.perf_counter()
        await session.compaction.check(last)
        first_check = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(rounds):
            await session.compaction.check(last)
        return first_check, (time.perf_counter() - start) / rounds

    first_check, check = asyncio.run(checks())
    start = time.perf_counter()
    for i in range(rounds):
        manager.append_message({"role": "user", "content": f"more {i}", "timestamp": i})
        manager.build_session_context()
    append = (time.perf_counter() - start) / rounds
    return first, first_check, check, append


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,50000")
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    print("| entries | open + first projection ms | first after-run check ms | after-run check ms "
          "| append + context ms |")
    print("|---:|---:|---:|---:|---:|")
    with ScriptedModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            source = Path(tempfile.gettempdir()) / f"picontext-bench-realistic-{size}.jsonl"
            if not source.exists():
                generate(str(source), size)
            copy = Path(tmp) / source.name
            shutil.copy(source, copy)
            first, first_check, check, append = measure(copy, server, args.rounds)
            print(f"| {size:,} | {first * 1000:.0f} | {first_check * 1000:.3f} | {check * 1000:.3f} "
                  f"| {append * 1000:.3f} |")


if __name__ == "__main__":
    main()

"""Background compaction, paced, with split turns: does any turn wait for a summary, and what does
compaction cost in wall time, summary requests and compactions?

One scripted conversation (ScriptedModelServer on 127.0.0.1, real HTTP, real session file) of
`--turns` turns. Each turn is a prompt, a tool call (~`--turn-delay`/2 s), a tool result of ~700
tokens and an answer (~`--turn-delay`/2 s): ~900 tokens a turn, and most cuts fall inside a turn,
so most compactions are split turns (history and turn-prefix summaries). Every summary request
takes ~`--summary-delay` s. Run in the same process, one after the other:

* `off`            compaction disabled, a window large enough for everything (the baseline);
* `blocking`       Pi's behaviour: threshold compaction, the turn waits for the summary;
* `bg N`           compaction.backgroundTokens N (a fixed mark);
* `bg N serial`    the same with the model's compat.serialRequests: the two summaries of a split
                   turn one after the other (what every local server got before issue 18), and
                   the conversation's requests queued behind the summary's;
* `bg auto`        backgroundTokens "auto": the mark learned from the session's pace.

Window 12000, reserveTokens 2000 (threshold 10000), keepRecentTokens 3000; the default fixed mark
5500 is ~5 turns of growth below the threshold, 8200 ~2 turns. Reported: wall time (and ratio to
`off`), compactions, split ones, turns that waited, summary requests (and per compaction),
compactions per 100 turns, the slowest turn. Not a test: numbers go to stdout and docs/compaction.md.

    .venv/bin/python bench/bench_background_compaction.py [--turns 36] [--turn-delay 1] [--summary-delay 2.5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

from picontext.agent.session import AgentSession
from picontext.agent.types import AgentToolResult
from picontext.ai.providers import StreamOptions
from picontext.compaction.settings import Settings
from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, reply, text, tokens, tool_call

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_summaries import is_summary, paced

SUMMARY = "## Goal\nKeep answering the numbered questions.\n## Progress\n- answered them in order"
SPLIT = "**Turn Context (split turn):**"
WINDOW = 12_000
COMPACTION = {"reserveTokens": 2000, "keepRecentTokens": 3000}
MODES: dict[str, tuple[int, dict[str, Any], bool]] = {
    "off": (10_000_000, {"enabled": False}, False),
    "blocking": (WINDOW, COMPACTION, False),
    "bg 5500": (WINDOW, {**COMPACTION, "backgroundTokens": 5500}, False),
    "bg 5500 serial": (WINDOW, {**COMPACTION, "backgroundTokens": 5500}, True),
    "bg 8200": (WINDOW, {**COMPACTION, "backgroundTokens": 8200}, False),
    "bg auto": (WINDOW, {**COMPACTION, "backgroundTokens": "auto"}, False),
}


class ReadTool:
    """`read`: ~2,800 characters of file content (~700 tokens), at once."""

    name: ClassVar[str] = "read"
    label: ClassVar[str] = "read"
    description: ClassVar[str] = "read a file"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"path": {"type": "string"}}}

    async def execute(self, call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        line = f"# {args.get('path')}: line of source code that the agent reads\n"
        return AgentToolResult.text((line * (2800 // len(line) + 1))[:2800])


async def run(mode: str, turns: int, turn_delay: float, summary_delay: float) -> dict[str, Any]:
    window, compaction, serial = MODES[mode]
    with ScriptedModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.expect(*[paced(text(SUMMARY), summary_delay).when(is_summary) for _ in range(4 * turns)])
        model: Any = server.model(context_window=window, max_tokens=4096)
        if serial:
            model["compat"] = {"serialRequests": True}
        session = AgentSession(
            SessionManager.create(tmp, tmp), model=model, system_prompt="Bench agent.",
            stream_options=StreamOptions(api_key="k"), settings=Settings({"compaction": compaction}),
            tools=[ReadTool()],
        )
        events: list[dict[str, Any]] = []
        session.subscribe(lambda e: events.append(e) if e["type"].startswith("compaction") else None)
        slowest = 0.0
        began = time.perf_counter()
        for i in range(turns):
            # No usage reported: the session's own estimate sizes the context at every boundary (a
            # usage scripted before the prompt would be stale after a compaction inside the turn).
            call = reply(tool_call("read", {"path": f"src/module_{i}.py"}), usage=tokens(0, 0))
            answer = reply(text(f"answer {i}: module {i} " + "looks fine; " * 20), usage=tokens(0, 0))
            server.expect(paced(call, turn_delay / 2).when(lambda r: not is_summary(r)),
                          paced(answer, turn_delay / 2).when(lambda r: not is_summary(r)))
            t0 = time.perf_counter()
            await session.prompt(f"question {i}: please review module {i} " + "and its tests " * 20)
            slowest = max(slowest, time.perf_counter() - t0)
        wall = time.perf_counter() - began
        ends = [e for e in events if e["type"] == "compaction_end" and e.get("result")]
        return {
            "mode": mode, "wall": wall, "compactions": len(ends), "slowestTurn": slowest,
            "split": sum(1 for e in ends if SPLIT in e["result"]["summary"]),
            "waited": sum(1 for e in ends if not e.get("background") or e.get("waited")),
            "summaries": sum(1 for r in server.requests if is_summary(r)),
            "discarded": sum(1 for e in events if e["type"] == "compaction_background_discarded"),
            "marks": [e.get("mark") for e in events if e["type"] == "compaction_background_start"],
        }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=36)
    parser.add_argument("--turn-delay", type=float, default=1.0)
    parser.add_argument("--summary-delay", type=float, default=2.5)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    modes = args.modes.split(",")
    await run("off", 2, args.turn_delay, args.summary_delay)  # warm-up: first imports and connections
    results = [await run(mode, args.turns, args.turn_delay, args.summary_delay) for mode in modes]
    base = results[0]["wall"] if modes[0] == "off" else float("nan")
    print(f"{args.turns} turns (~900 tokens, ~{args.turn_delay}s each, a tool call per turn), "
          f"~{args.summary_delay}s per summary request, window {WINDOW}, threshold {WINDOW - 2000}; "
          f"load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"{'mode':<16}{'wall s':>8}{'vs off':>8}{'compactions':>12}{'split':>7}{'waited':>8}{'summary req':>12}"
          f"{'req/compaction':>15}{'per 100 turns':>14}{'slowest s':>10}")
    for r in results:
        n = r["compactions"]
        per = f"{r['summaries'] / n:.2f}" if n else "-"
        print(f"{r['mode']:<16}{r['wall']:>8.1f}{r['wall'] / base:>8.3f}{n:>12}{r['split']:>7}{r['waited']:>8}"
              f"{r['summaries']:>12}{per:>15}{100 * n / args.turns:>14.1f}{r['slowestTurn']:>10.2f}")
        if r["discarded"] or (r["marks"] and r["mode"] == "bg auto"):
            print(f"{'':<16}discarded {r['discarded']}; marks {r['marks']}")


if __name__ == "__main__":
    asyncio.run(main())

"""Background compaction: does any turn wait for a summary, and what does compaction cost in wall time?

One scripted conversation (ScriptedModelServer on 127.0.0.1, real HTTP, real session file) of
`--turns` turns, each answer taking ~`--turn-delay` seconds and each summary ~`--summary-delay`
seconds, run three ways in the same process:

* `off`        compaction disabled, a window large enough for everything (the baseline);
* `blocking`   Pi's behaviour: threshold compaction, the turn waits for the summary;
* `background` compaction.backgroundTokens: the summary is written while the conversation goes on.

Reported: wall time (and ratio to `off`), compactions, how many of them a turn waited for, the
slowest turn. Not a test: numbers go to stdout and docs/compaction.md.

    .venv/bin/python bench/bench_background_compaction.py [--turns 200] [--summary-delay 2] [--turn-delay 0.25]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from typing import Any

from picontext.agent.session import AgentSession
from picontext.ai.providers import StreamOptions
from picontext.compaction.compact import estimated_tokens
from picontext.compaction.settings import Settings
from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, reply, text, tokens
from picontext.testing.model_server import RecordedRequest

SUMMARY_MARK = "hand-off notes"
SUMMARY = "## Goal\nKeep answering the numbered questions.\n## Progress\n- answered them in order"
WINDOW = 20_000
COMPACTION = {"reserveTokens": 2000, "keepRecentTokens": 4000}
MODES: dict[str, tuple[int, dict[str, Any]]] = {
    "off": (10_000_000, {"enabled": False}),
    "blocking": (WINDOW, COMPACTION),
    "background": (WINDOW, {**COMPACTION, "backgroundTokens": 16_000}),
}
"""Threshold 18000; the background mark sits ~5 turns of growth below it (enough for a 2 s summary)."""


def is_summary(req: RecordedRequest) -> bool:
    """The summarizer's system prompt is the first message (cheap: the bodies grow to ~100 kB)."""
    messages = req.body.get("messages") or [{}] if isinstance(req.body, dict) else [{}]
    return SUMMARY_MARK in json.dumps(messages[0])


async def run(mode: str, turns: int, turn_delay: float, summary_delay: float) -> dict[str, Any]:
    window, compaction = MODES[mode]
    pieces = max(1, len(SUMMARY.split()))
    with ScriptedModelServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.expect(*[text(SUMMARY).slow(summary_delay / pieces).when(is_summary) for _ in range(turns)])
        session = AgentSession(
            SessionManager.create(tmp, tmp), model=server.model(context_window=window, max_tokens=4096),  # type: ignore[arg-type]
            system_prompt="Bench agent.", stream_options=StreamOptions(api_key="k"),
            settings=Settings({"compaction": compaction}),
        )
        events: list[dict[str, Any]] = []
        session.subscribe(lambda e: events.append(e) if e["type"].startswith("compaction") else None)
        slowest = 0.0
        began = time.perf_counter()
        for i in range(turns):
            reported = estimated_tokens(session.manager) + 420
            answer = f"answer {i}: " + "fine " * 4
            server.expect(reply(text(answer), usage=tokens(reported - 5, 5))
                          .slow(turn_delay / 4).when(lambda r: not is_summary(r)))
            t0 = time.perf_counter()
            await session.prompt(f"question {i} " + "q" * 1600)
            slowest = max(slowest, time.perf_counter() - t0)
        wall = time.perf_counter() - began
        ends = [e for e in events if e["type"] == "compaction_end" and e.get("result")]
        waited = sum(1 for e in ends if not e.get("background") or e.get("waited"))
        summaries = sum(1 for r in server.requests if is_summary(r))
        return {"mode": mode, "wall": wall, "compactions": len(ends), "waited": waited, "slowestTurn": slowest,
                "summaries": summaries,
                "background": sum(1 for e in ends if e.get("background")),
                "discarded": sum(1 for e in events if e["type"] == "compaction_background_discarded")}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--turn-delay", type=float, default=0.25)
    parser.add_argument("--summary-delay", type=float, default=2.0)
    args = parser.parse_args()
    results = [await run(mode, args.turns, args.turn_delay, args.summary_delay) for mode in MODES]
    base = results[0]["wall"]
    print(f"{args.turns} turns, ~{args.turn_delay}s per answer, ~{args.summary_delay}s per summary, window {WINDOW}")
    print(f"{'mode':<12}{'wall s':>9}{'vs off':>9}{'compactions':>13}{'waited':>8}{'no-wait %':>11}{'slowest s':>11}"
          f"{'summary requests':>18}")
    for r in results:
        n = r["compactions"]
        no_wait = f"{100 * (n - r['waited']) / n:.0f}" if n else "-"
        print(f"{r['mode']:<12}{r['wall']:>9.2f}{r['wall'] / base:>9.3f}{n:>13}{r['waited']:>8}{no_wait:>11}"
              f"{r['slowestTurn']:>11.2f}{r['summaries']:>18}")


if __name__ == "__main__":
    asyncio.run(main())

"""compaction.backgroundTokens "auto": the mark is learned from this session's growth and time per
turn and its summaries' time, so a background summary is ready before the threshold (issue 18 §4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import HeldSummaries, make

from picontext.agent.background_compaction import PRIOR_SUMMARY_TURNS, Pace
from picontext.compaction.compact import estimated_tokens
from picontext.testing import ScriptedModelServer, reply, text, tokens
from picontext.testing.model_server import RecordedRequest

SUMMARY_MARK = "hand-off notes"


def is_summary(req: RecordedRequest) -> bool:
    return SUMMARY_MARK in json.dumps(req.body)


def test_the_mark_leaves_the_summary_its_time_in_turns_of_growth() -> None:
    pace = Pace()
    pace.boundary(0.0, 1000)
    assert pace.mark(10_000, 2000) is None  # nothing known yet
    for second, tokens_now in [(1.0, 1400), (1.0, 1400), (2.0, 1800), (3.0, 2200)]:  # a repeated boundary: no turn
        pace.boundary(second, tokens_now)
    assert list(pace.growth) == [400, 400, 400] and list(pace.turn_seconds) == [1.0, 1.0, 1.0]
    # no summary timed yet: PRIOR_SUMMARY_TURNS turns, plus one for the boundary it is applied at,
    # and no later than halfway from what a compaction leaves (2000) to the threshold
    assert pace.mark(10_000, 2000) == 6000 < 10_000 - 400 * (PRIOR_SUMMARY_TURNS + 1)
    assert pace.mark(10_000, 7000) == 10_000 - 400 * (PRIOR_SUMMARY_TURNS + 1)
    pace.summary_took(2.5)  # 2.5 turns -> 3, plus one
    assert pace.mark(10_000, 2000) == 10_000 - 400 * 4
    pace.summary_took(9.0)  # the slowest recent summary counts
    assert pace.mark(10_000, 2000) == 10_000 - 400 * 10
    assert pace.mark(5000, 2000) == 2000  # never below what a compaction leaves


def test_idle_time_counts_and_a_compaction_starts_the_count_again() -> None:
    pace = Pace()
    pace.boundary(0.0, 1000)
    pace.boundary(1.0, 1400)   # after the reply
    pace.boundary(30.0, 1400)  # before the next prompt: the user read for 29 s
    pace.boundary(31.0, 1800)
    assert list(pace.turn_seconds) == [1.0, 30.0]
    pace.boundary(32.0, 600)   # compacted: no sample, counting starts here
    pace.boundary(33.0, 1000)
    assert list(pace.growth) == [400, 400, 400] and list(pace.turn_seconds) == [1.0, 30.0, 1.0]


async def _run(server: ScriptedModelServer, tmp_path: Path, background: Any, turns: int = 48,
               summary_turns: int = 3) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`turns` exchanges of ~420 tokens, one second apart on the session's clock; every background
    summary takes `summary_turns` turns (held until then), measured on the same clock."""
    session, events = make(server, tmp_path, window=8000,
                           compaction={"reserveTokens": 1000, "keepRecentTokens": 1500, "backgroundTokens": background})
    now = [0.0]
    session.compaction.background.clock = lambda: now[0]
    held = HeldSummaries(session, is_summary)
    server.expect(*held.steps(40, lambda k: f"## Goal\nsummary {k}"))
    for i in range(turns):
        now[0] = float(i)
        await held.release_due(i, after=summary_turns)
        reported = estimated_tokens(session.manager) + 420
        server.expect(reply(text(f"answer {i}"), usage=tokens(reported - 5, 5)).when(lambda r: not is_summary(r)))
        await session.prompt(f"question {i} " + "q" * 1600)
    held.release_all()
    server.reset()  # the summaries never asked for
    ends = [e for e in events if e["type"] == "compaction_end"]
    starts = [e for e in events if e["type"] == "compaction_background_start"]
    return ends, starts


async def test_auto_starts_early_enough_that_no_turn_waits(server: ScriptedModelServer, tmp_path: Path) -> None:
    ends, starts = await _run(server, tmp_path, "auto")
    assert len(ends) >= 3, f"{len(ends)} compactions"
    waited = [e for e in ends if not e.get("background") or e.get("waited")]
    assert not waited, f"{len(waited)} of {len(ends)} compactions made a turn wait"
    # before a summary is timed: halfway from what a compaction leaves (1500 kept + 800 summary
    # budget) to the threshold, earlier than PRIOR_SUMMARY_TURNS + 1 turns of ~405 tokens; later,
    # 3 + 1 turns (the summaries were timed at 3 s, turns at 1 s)
    assert starts[0]["mark"] == (2300 + 7000) // 2 < 7000 - 405 * (PRIOR_SUMMARY_TURNS + 1)
    lead = [(7000 - s["mark"]) / 405 for s in starts[1:]]
    assert all(3.9 < x < 4.1 for x in lead), lead


@pytest.mark.parametrize("mark", [6300, 6700])
async def test_a_fixed_mark_too_close_to_the_threshold_makes_turns_wait(
        server: ScriptedModelServer, tmp_path: Path, mark: int) -> None:
    """The control: the same session and summaries with marks one or two turns below the threshold."""
    ends, _ = await _run(server, tmp_path, mark, turns=30)
    assert ends and all(e["waited"] for e in ends)

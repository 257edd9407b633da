"""Background compaction (compaction.backgroundTokens): summaries written while the conversation goes on."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import GUARD, HeldSummaries, file_entries, make, summary_finished, wait_for_requests

from picontext.compaction.compact import estimated_tokens
from picontext.compaction.prepare import prepare_compaction
from picontext.compaction.resumable import SPAN_END_TYPE, SPAN_TYPE, find_pending_span, record_span
from picontext.compaction.settings import CompactionSettings
from picontext.testing import ScriptedModelServer, reply, text, tokens
from picontext.testing.model_server import RecordedRequest

SUMMARY_MARK = "hand-off notes"  # in the summarizer's system prompt only
BG = {"reserveTokens": 1000, "keepRecentTokens": 500, "backgroundTokens": 1500}
WINDOW = 4000  # threshold 3000


def is_summary(req: RecordedRequest) -> bool:
    return SUMMARY_MARK in json.dumps(req.body)


def conversation(value: str, total: int) -> Any:
    return reply(text(value), usage=tokens(total - 5, 5)).when(lambda r: not is_summary(r))


def summary(value: str) -> Any:
    return text(value).when(is_summary)


async def turns(session: Any, server: ScriptedModelServer, start: int, count: int, total: list[int]) -> None:
    """`count` exchanges of ~420 tokens each (a 1600-char question, a short answer); the reply
    reports what the request really held (the context as it is now, plus the question)."""
    for i in range(start, start + count):
        total[0] = estimated_tokens(session.manager) + 420
        server.expect(conversation(f"answer {i}", total[0]))
        await session.prompt(f"question {i} " + "q" * 1600)


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


async def until(predicate: Any, what: str) -> None:
    """Wait for a state of the session that no event announces (checked every 10 ms)."""
    for _ in range(int(GUARD / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{what}: not after {GUARD:.0f} s")


async def test_summary_written_in_background_is_applied_at_the_next_boundary(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, window=WINDOW, compaction=BG)
    release = threading.Event()
    server.expect(summary("## Goal\nBACKGROUND SUMMARY").hold_after(1, release))
    total = [0]
    await turns(session, server, 0, 4, total)  # 1680 tokens > 1500 after the 4th answer
    started = of(events, "compaction_background_start")
    assert len(started) == 1 and started[0]["tokens"] > 1500
    assert not of(events, "compaction_start")  # nobody waited: the conversation went on
    await wait_for_requests(server, 5)
    assert is_summary(server.requests[4])
    release.set()
    await summary_finished(session)
    await turns(session, server, 4, 1, total)  # the pre-prompt boundary applies it
    start, end = of(events, "compaction_start"), of(events, "compaction_end")
    assert len(start) == len(end) == 1 and start[0]["background"] is True
    assert end[0]["background"] is True and end[0]["waited"] is False and end[0]["reason"] == "threshold"
    entries = file_entries(session)
    compaction = next(e for e in entries if e["type"] == "compaction")
    assert compaction["firstKeptEntryId"] == started[0]["firstKeptEntryId"]
    assert "BACKGROUND SUMMARY" in compaction["summary"]
    last_request = json.dumps(server.requests[-1].body)
    assert "BACKGROUND SUMMARY" in last_request and "question 4" in last_request and "question 0 " not in last_request
    assert session.compaction.background.applied == 1 and session.compaction.background.waited == 0


async def test_invalidated_summary_is_discarded_and_the_blocking_path_runs(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, window=WINDOW, compaction=BG)
    release = threading.Event()
    server.expect(summary("## Goal\nSTALE").hold_after(1, release))
    total = [0]
    await turns(session, server, 0, 4, total)
    await wait_for_requests(server, 5)
    first_question = next(e for e in file_entries(session)
                          if e["type"] == "message" and e["message"]["role"] == "user")
    session.manager.append_context_edit(first_question["id"], {"content": "redacted"})
    release.set()
    await summary_finished(session)
    # the blocking fallback once the threshold is reached; the 4000-token window makes it two
    # chunk notes and their merge
    server.expect(*[summary("## Goal\nFRESH") for _ in range(3)])
    await turns(session, server, 4, 5, total)
    discarded = of(events, "compaction_background_discarded")
    assert len(discarded) == 1 and discarded[0]["discarded"] == 1 and "edited" in discarded[0]["reason"]
    compactions = [e for e in file_entries(session) if e["type"] == "compaction"]
    assert len(compactions) >= 1 and all("STALE" not in c["summary"] for c in compactions)
    assert any("FRESH" in c["summary"] for c in compactions)


async def test_threshold_reached_before_the_summary_waits_for_it_without_a_second_request(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, window=WINDOW, compaction={**BG, "backgroundTokens": 2800})
    release = threading.Event()
    server.expect(summary("## Goal\nLATE").hold_after(1, release))
    total = [0]
    await turns(session, server, 0, 7, total)  # ~2880 after the 7th answer: background starts
    assert len(of(events, "compaction_background_start")) == 1
    await wait_for_requests(server, 8)
    signals: list[Any] = []  # the run's signal: the wait must take its abort listener off it
    session.subscribe(lambda e: signals.append(session._signal) if e["type"] == "agent_start" else None)
    server.expect(conversation("answer 7", estimated_tokens(session.manager) + 420))
    prompt = asyncio.ensure_future(session.prompt("question 7 " + "q" * 1600))
    # the 8th answer reports ~3290 > 3000: that turn waits for the held summary
    await until(lambda: session.compaction.background.waited == 1, "the turn at the threshold waiting")
    assert not prompt.done()
    release.set()
    await prompt
    end = of(events, "compaction_end")
    assert len(end) == 1 and end[0]["waited"] is True and "LATE" in end[0]["result"]["summary"]
    assert sum(is_summary(r) for r in server.requests) == 1
    assert signals and all(s.listener_count == 0 for s in signals)


async def test_a_span_recorded_before_a_crash_is_resumed_in_the_background(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    settings = {**BG, "resumable": True, "backgroundTokens": 100_000}
    session, _ = make(server, tmp_path, window=WINDOW, compaction=settings)
    total = [0]
    await turns(session, server, 0, 4, total)
    manager = session.manager
    prep = prepare_compaction(manager.get_branch(), CompactionSettings.from_json(settings))
    assert prep is not None
    span_id = record_span(manager, prep, CompactionSettings.from_json(settings), reason="threshold")
    # "crash": a new process opens the file; the span is pending
    from picontext.session.manager import SessionManager

    reopened = SessionManager.open(manager.get_session_file() or "", str(tmp_path / "sessions"))
    pending = find_pending_span(reopened.get_branch())
    assert pending is not None and pending.entry_id == span_id
    again, events = make(server, tmp_path, window=WINDOW, compaction={**settings, "backgroundTokens": 2500},
                         manager=reopened)
    server.expect(summary("## Goal\nRESUMED"))
    await turns(again, server, 4, 1, total)  # starts the resumed span in the background (check C)
    # ready by the end of this turn's request (then applied after it), or at the next boundary
    if again.compaction.background.job is not None:
        await summary_finished(again)
    await turns(again, server, 5, 1, total)
    compactions = [e for e in file_entries(again) if e["type"] == "compaction"]
    assert len(compactions) == 1 and compactions[0]["details"]["spanId"] == span_id
    assert compactions[0]["firstKeptEntryId"] == prep.first_kept_entry_id
    spans = [e for e in file_entries(again) if e.get("customType") in (SPAN_TYPE, SPAN_END_TYPE)]
    assert [e["id"] for e in spans] == [span_id]  # no second span, no end marker
    assert sum(is_summary(r) for r in server.requests) == 1
    assert of(events, "compaction_end")[0]["background"] is True


async def test_manual_compaction_and_abort_cancel_a_running_background_summary(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, window=WINDOW, compaction=BG)
    release = threading.Event()
    server.expect(summary("## Goal\nNEVER USED").hold_after(1, release))
    total = [0]
    await turns(session, server, 0, 4, total)
    await wait_for_requests(server, 5)
    server.expect(summary("## Goal\nMANUAL"))
    await session.compact()
    release.set()
    discarded = of(events, "compaction_background_discarded")
    assert [d["reason"] for d in discarded] == ["a manual compaction replaces it"]
    compactions = [e for e in file_entries(session) if e["type"] == "compaction"]
    assert len(compactions) == 1 and "MANUAL" in compactions[0]["summary"]
    # abort() stops a background summary too; the next boundary reports it as cancelled
    second, streaming = threading.Event(), threading.Event()
    server.expect(summary("## Goal\nABORTED").hold_after(1, second, streaming))
    session.compaction.background.paused = False
    for i in range(4, 12):
        await turns(session, server, i, 1, total)
        if session.compaction.background.job is not None:
            break
    assert session.compaction.background.job is not None
    assert await asyncio.to_thread(streaming.wait, GUARD), "the background summary request never arrived"
    await session.abort()
    second.set()
    await turns(session, server, 12, 1, total)
    assert [d["reason"] for d in of(events, "compaction_background_discarded")][-1] == "cancelled"
    assert len([e for e in file_entries(session) if e["type"] == "compaction"]) == 1


async def test_applied_background_summary_calls_the_session_compact_hook(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    from picontext.agent.hooks import Hooks

    hooks = Hooks()
    seen: list[dict[str, Any]] = []
    hooks.on("session_compact", seen.append)
    session, _ = make(server, tmp_path, window=WINDOW, compaction=BG, hooks=hooks)
    server.expect(summary("## Goal\nHOOKED"))
    total = [0]
    await turns(session, server, 0, 4, total)
    await summary_finished(session)
    await turns(session, server, 4, 1, total)
    assert len(seen) == 1 and seen[0]["reason"] == "threshold" and seen[0]["fromExtension"] is False
    assert "HOOKED" in seen[0]["compactionEntry"]["summary"]


async def test_long_session_no_turn_waits_when_summaries_take_two_turns(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    """The bench's claim in event terms: every summary is held until the conversation has made two
    more turns (a slow summarizer), yet no turn waits, and nothing is discarded. No clock decides:
    a summary is released before the third turn after its start, and that turn begins only once
    the summary has arrived (~4.7 turns of growth lie between the mark and the threshold)."""
    settings = {"reserveTokens": 1000, "keepRecentTokens": 1500, "backgroundTokens": 5000}
    session, events = make(server, tmp_path, window=8000, compaction=settings)
    held = HeldSummaries(session, is_summary)
    server.expect(*held.steps(40, lambda k: f"## Goal\nsummary {k}"))
    total = [0]
    for i in range(60):
        await held.release_due(i, after=3)
        await turns(session, server, i, 1, total)
    held.release_all()
    ends = of(events, "compaction_end")
    assert len(ends) >= 4, f"{len(ends)} compactions in 60 turns"
    waited = [e for e in ends if not e.get("background") or e.get("waited")]
    assert not waited, f"{len(waited)} of {len(ends)} compactions made a turn wait"
    assert not of(events, "compaction_background_discarded") and not of(events, "compaction_skipped")
    assert len(held.jobs) - len(ends) <= 1  # at most one still being written
    server.reset()  # the summaries never asked for


async def test_a_summarizer_that_cannot_start_is_reported_and_the_conversation_goes_on(
        server: ScriptedModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    session, events = make(server, tmp_path, window=WINDOW,
                           compaction={**BG, "model": "anthropic/claude-sonnet-4-5"})  # no key in this test
    total = [0]
    await turns(session, server, 0, 5, total)
    discarded = of(events, "compaction_background_discarded")
    assert len(discarded) == 1 and discarded[0]["reason"].startswith("cannot start: No API key")
    assert not any(is_summary(r) for r in server.requests)


async def test_overflow_recovery_cancels_a_running_background_summary(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    from picontext.compaction.completion import CompletionRequest, ScriptedCompletion
    from picontext.testing import overflow

    never, writing = asyncio.Event(), asyncio.Event()
    calls: list[str] = []

    async def write(request: CompletionRequest) -> str:
        calls.append("bg" if not calls else "blocking")
        if len(calls) == 1:
            writing.set()
            await never.wait()  # the background summary is still being written when the overflow comes
        return "## Goal\nRECOVERY SUMMARY"

    summarizer = ScriptedCompletion(default=write)
    session, events = make(server, tmp_path, window=WINDOW, compaction=BG, summarizer=summarizer)
    total = [0]
    await turns(session, server, 0, 4, total)
    await asyncio.wait_for(writing.wait(), GUARD)
    server.expect(overflow().when(lambda r: not is_summary(r)), conversation("after recovery", 900))
    await session.prompt("question 4 " + "q" * 1600)
    discarded = of(events, "compaction_background_discarded")
    assert [d["reason"] for d in discarded] == ["overflow recovery compacts the usual way"]
    ends = of(events, "compaction_end")
    assert [e["reason"] for e in ends] == ["overflow"] and ends[0]["willRetry"] is True
    assert "RECOVERY SUMMARY" in ends[0]["result"]["summary"] and "blocking" in calls


def test_an_edit_whose_target_is_not_a_string_does_not_break_the_check() -> None:
    """A context edit written by another writer with a list as `targetId` (a hostile file) edits
    nothing the summary holds: the summary still applies (it raised TypeError: unhashable)."""
    from types import SimpleNamespace

    from picontext.agent.background_compaction import BackgroundCompaction, _Job

    ts = "2026-01-01T00:00:00.000Z"
    branch = [{"type": "message", "id": "a", "parentId": None, "timestamp": ts, "message": {"role": "user"}},
              {"type": "context_edit", "id": "b", "parentId": "a", "timestamp": ts, "targetId": ["a"],
               "replacement": None}]
    runtime: Any = SimpleNamespace(branch=lambda: branch)
    plan: Any = SimpleNamespace(preparation=SimpleNamespace(first_kept_entry_id="a"))
    job = _Job(plan=plan, task=None, signal=None, leaf_id="a", previous_id=None, summarized=frozenset({"a"}),
               span_id=None, model_ref=None, tokens=0, failures=[])
    assert BackgroundCompaction(runtime).invalid_reason(job) is None
    branch[1]["targetId"] = "a"
    assert BackgroundCompaction(runtime).invalid_reason(job) == "an entry it summarizes was edited meanwhile"

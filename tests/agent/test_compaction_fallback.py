"""A compaction that always frees the window, on every path of a live session, over real HTTP.

For each failure kind the scripted model server answers every summary request with it: the
threshold compaction, overflow recovery (then its one retry), a manual compaction and a
background summary (which falls to the blocking path) all end with the mechanical summary,
one `picontext.compaction-failed` record per failed attempt, and one line (`notice`) on the
`compaction_end` event. Summary requests are routed by a predicate (the summarizer's system
prompt), so the order in which conversation and summaries reach the server does not matter.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import file_entries, make

from picontext.testing import ScriptedModelServer, http_error, overflow, reply, text, tokens, tool_call
from picontext.testing.model_server import RecordedRequest, Step

SUMMARY_MARK = "hand-off notes"  # in the summarizer's system prompt only
KINDS = ("length", "empty", "toolCall", "error", "garbage", "refusal", "oversize", "timeout", "overflow")


def is_summary(request: RecordedRequest) -> bool:
    return SUMMARY_MARK in json.dumps(request.body)


def is_conversation(request: RecordedRequest) -> bool:
    return not is_summary(request)


@pytest.fixture
def never() -> Iterator[threading.Event]:
    """Holds the `timeout` kind's replies until the test is over (the server's thread then ends). A
    minute later the reply is let through anyway: without the summary timeout the test then fails
    on its assertions instead of hanging."""
    event = threading.Event()
    watchdog = threading.Timer(60, event.set)
    watchdog.start()
    yield event
    event.set()
    watchdog.cancel()


def failing(kind: str, never: threading.Event) -> Step:
    """One summary reply that fails with `kind`."""
    step: Step = {
        "length": text("## Goal\nhalf a summ").with_stop("length"),
        "empty": text(""),
        "toolCall": reply(tool_call("read", {"path": "a.py"})),
        "error": http_error(400, {"error": {"message": "malformed summary request"}}),
        "garbage": text("?!?! ... --- !!! ***"),
        "refusal": text("I'm sorry, but I can't help with that request."),
        "oversize": text("## Goal\n" + "words and more words " * 1000),  # ~5,000 tokens, budget 1,600
        "timeout": text("## Goal\nNever finished").hold_after(1, never),
        "overflow": overflow(),
    }[kind]
    return step.when(is_summary)


def conversation(value: str, input_tokens: int) -> Step:
    return reply(text(value), usage=tokens(input_tokens, 5)).when(is_conversation)


def settings(kind: str, **extra: Any) -> dict[str, Any]:
    # reserve 2000: threshold 198,000 of 200,000, history budget 1,600 tokens. Only the held kind
    # meets the deadline: the others answer at once, whatever the machine's load.
    return {"reserveTokens": 2000, "keepRecentTokens": 50, **({"summaryTimeoutMs": 200} if kind == "timeout" else {}),
            **extra}


async def history(session: Any, server: ScriptedModelServer) -> None:
    """Two exchanges of long questions and short answers (~420 tokens: one summary request each)."""
    for i in range(2):
        server.expect(conversation(f"answer {i}", 300 + 210 * i))
        await session.prompt(f"question {i} " + "q" * 800)


def records(session: Any) -> list[tuple[str, int, str, str]]:
    return [(e["data"]["reason"], e["data"]["attempt"], e["data"]["kind"], e["data"]["next"])
            for e in file_entries(session) if e.get("customType") == "picontext.compaction-failed"]


def fallback_compaction(session: Any, kind: str) -> dict[str, Any]:
    [compaction] = [e for e in file_entries(session) if e["type"] == "compaction"]
    assert compaction["details"]["fallback"]["reason"] == kind
    assert compaction["summary"].startswith("[picontext: the model could not write this summary")
    return compaction


def notice_of(events: list[dict[str, Any]]) -> str:
    [end] = [e for e in events if e["type"] == "compaction_end"]
    assert end["result"] is not None and end["aborted"] is False
    assert end["notice"].startswith("the model's summary failed twice")
    return str(end["notice"])


@pytest.mark.parametrize("kind", KINDS)
async def test_threshold_compaction_falls_back(server: ScriptedModelServer, tmp_path: Path, kind: str,
                                               never: threading.Event) -> None:
    session, events = make(server, tmp_path, compaction=settings(kind))
    await history(session, server)
    server.expect(conversation("a", 199_000), failing(kind, never), failing(kind, never))
    await session.prompt("x")
    notice_of(events)
    fallback_compaction(session, kind)
    assert records(session) == [("threshold", 1, kind, "retry"), ("threshold", 2, kind, "fallback")]


@pytest.mark.parametrize("kind", KINDS)
async def test_overflow_recovery_falls_back_and_retries_once(server: ScriptedModelServer, tmp_path: Path, kind: str,
                                                             never: threading.Event) -> None:
    session, events = make(server, tmp_path, compaction=settings(kind))
    await history(session, server)
    server.expect(overflow().when(is_conversation), failing(kind, never), failing(kind, never),
                  conversation("recovered", 1000))
    await session.prompt("x")
    [end] = [e for e in events if e["type"] == "compaction_end"]
    assert end["reason"] == "overflow" and end["willRetry"] is True and "notice" in end
    fallback_compaction(session, kind)
    last = file_entries(session)[-1]["message"]
    assert last["role"] == "assistant" and last["content"][0]["text"] == "recovered"
    assert records(session) == [("overflow", 1, kind, "retry"), ("overflow", 2, kind, "fallback")]
    assert sum(1 for r in server.requests if is_conversation(r)) == 4  # history 2, overflow, one retry


@pytest.mark.parametrize("kind", KINDS)
async def test_manual_compaction_falls_back(server: ScriptedModelServer, tmp_path: Path, kind: str,
                                            never: threading.Event) -> None:
    session, events = make(server, tmp_path, compaction=settings(kind))
    await history(session, server)
    server.expect(failing(kind, never), failing(kind, never))
    result = await session.compact()
    assert result["details"]["fallback"]["reason"] == kind
    notice_of(events)
    fallback_compaction(session, kind)
    assert records(session) == [("manual", 1, kind, "retry"), ("manual", 2, kind, "fallback")]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_failed_background_summary_falls_to_the_blocking_path_which_falls_back(
        server: ScriptedModelServer, tmp_path: Path, kind: str, never: threading.Event) -> None:
    session, events = make(server, tmp_path, compaction=settings(kind, backgroundTokens=100_000))
    await history(session, server)
    server.expect(conversation("above the mark", 150_000), failing(kind, never))
    await session.prompt("y")  # the boundary starts the background summary, which fails
    job = session.compaction.background.job
    assert job is not None
    await asyncio.wait({job.task})  # an event (the task's end), not a clock
    server.expect(conversation("over the threshold", 199_000), failing(kind, never), failing(kind, never))
    await session.prompt("z")  # discarded at this boundary, then the blocking path
    [discarded] = [e for e in events if e["type"] == "compaction_background_discarded"]
    assert discarded["reason"].startswith("the summary failed")
    notice_of(events)
    fallback_compaction(session, kind)
    assert records(session) == [("background", 1, kind, "blocking"), ("threshold", 1, kind, "retry"),
                                ("threshold", 2, kind, "fallback")]


async def test_the_chat_shows_one_line_for_a_fallback(server: ScriptedModelServer, tmp_path: Path,
                                                      never: threading.Event) -> None:
    import io

    from rich.console import Console

    from picontext.cli.modes.reply_view import ReplyView

    session, events = make(server, tmp_path, compaction=settings("length"))
    await history(session, server)
    server.expect(failing("length", never), failing("length", never))
    await session.compact()
    out = io.StringIO()
    view = ReplyView(Console(file=out, force_terminal=False, width=300))
    for event in events:
        view(event)
    lines = [line for line in out.getvalue().splitlines() if "compact" in line.lower() or "summary" in line]
    assert len(lines) == 1 and "Context compacted (manual)" in lines[0]
    assert "the model's summary failed twice (last: it hit its token cap); a mechanical summary replaced it" in lines[0]


async def test_with_fallback_off_the_compaction_fails_as_in_pi_and_records_stay(
        server: ScriptedModelServer, tmp_path: Path, never: threading.Event) -> None:
    session, events = make(server, tmp_path, compaction=settings("length", fallbackSummary=False))
    await history(session, server)
    server.expect(conversation("a", 199_000), failing("length", never), failing("length", never))
    await session.prompt("x")
    [end] = [e for e in events if e["type"] == "compaction_end"]
    assert end["errorMessage"].startswith("Auto-compaction failed: Summarization failed: generation hit the token cap")
    assert "compaction" not in [e["type"] for e in file_entries(session)]
    assert records(session) == [("threshold", 1, "length", "retry"), ("threshold", 2, "length", "none")]


async def test_an_aborted_compaction_stays_aborted(server: ScriptedModelServer, tmp_path: Path) -> None:
    hold = threading.Event()
    held = threading.Event()
    session, events = make(server, tmp_path, compaction=settings("length"))
    await history(session, server)
    server.expect(text("## Goal\nnever used").hold_after(1, hold, held).when(is_summary))
    task = asyncio.ensure_future(session.compact())
    await asyncio.to_thread(held.wait, 30)  # the summary request is streaming
    try:
        await session.abort()
        with pytest.raises(Exception, match="Compaction cancelled"):
            await task
    finally:
        hold.set()
    [end] = [e for e in events if e["type"] == "compaction_end"]
    assert end["aborted"] is True and "notice" not in end
    assert [e["type"] for e in file_entries(session)].count("compaction") == 0
    assert records(session) == []  # an abort is not a failure

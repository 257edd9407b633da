"""The one retry loop as the agent session uses it: Retry-After, announced waits, one connection."""

from __future__ import annotations

from pathlib import Path

from runtime_helpers import make, types

from picontext.ai.retry import RetryPolicy
from picontext.scripted import ScriptedModelServer, rate_limit, text, tool_call


class Sleeps:
    """Records each back-off instead of waiting it out."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


async def test_the_agent_waits_what_the_server_asked(server: ScriptedModelServer, tmp_path: Path) -> None:
    sleeps = Sleeps()
    session, events = make(server, tmp_path, retry=RetryPolicy(base_delay_ms=2000), sleep=sleeps)
    server.expect(rate_limit(retry_after=1), text("fine"))
    await session.prompt("hi")
    [start] = [e for e in events if e["type"] == "auto_retry_start"]
    assert start["delayMs"] == 1000 and start["serverRequested"] is True  # not the 2 s back-off
    assert sleeps.seconds == [1.0]
    assert session.messages[-1]["content"][0]["text"] == "fine"


async def test_without_retry_after_the_backoff_is_announced(server: ScriptedModelServer, tmp_path: Path) -> None:
    sleeps = Sleeps()
    session, events = make(server, tmp_path, retry=RetryPolicy(base_delay_ms=2000), sleep=sleeps)
    server.expect(rate_limit(retry_after=None), text("fine"))
    await session.prompt("hi")
    [start] = [e for e in events if e["type"] == "auto_retry_start"]
    assert start["delayMs"] == 2000 and "serverRequested" not in start
    assert sleeps.seconds == [2.0]


async def test_a_server_delay_above_the_cap_is_not_waited_out(server: ScriptedModelServer, tmp_path: Path) -> None:
    sleeps = Sleeps()
    session, events = make(server, tmp_path, retry=RetryPolicy(max_agent_delay_ms=60_000), sleep=sleeps)
    server.expect(rate_limit(retry_after=120))
    await session.prompt("hi")
    assert [e["willRetry"] for e in events if e["type"] == "agent_end"] == [False]
    [end] = [e for e in events if e["type"] == "auto_retry_end"]
    assert end["success"] is False and "Server requested 120s retry delay (max: 60s)" in end["finalError"]
    assert sleeps.seconds == [] and len(server.requests) == 1


async def test_one_connection_for_every_request_of_a_session(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path, compaction={"keepRecentTokens": 10})
    server.expect(tool_call("big", {"size": 100}), text("done"), text("second"), text("SUMMARY"))
    await session.prompt("first")
    await session.prompt("again")
    await session.compact()
    assert len(server.requests) == 4
    assert server.connections == 1  # measured on the server: one TCP connection, kept alive
    await session.aclose()


async def test_summary_retry_waits_are_announced(server: ScriptedModelServer, tmp_path: Path) -> None:
    session, events = make(server, tmp_path, compaction={"keepRecentTokens": 50})
    server.expect(text("one"), text("two"), rate_limit(retry_after=0.05), text("SUMMARY"))
    await session.prompt("first " + "q" * 800)
    await session.prompt("second " + "q" * 800)
    events.clear()
    result = await session.compact()
    assert result["summary"].startswith("SUMMARY")
    assert types(events, "summarization_retry_scheduled", "summarization_retry_attempt_start",
                 "summarization_retry_finished") == [
        "summarization_retry_scheduled", "summarization_retry_attempt_start", "summarization_retry_finished"]
    scheduled = next(e for e in events if e["type"] == "summarization_retry_scheduled")
    assert scheduled["delayMs"] == 50 and scheduled["source"] == "compaction" and "429" in scheduled["errorMessage"]

"""Shared helpers for the agent runtime tests (real HTTP via ScriptedModelServer, real files)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, ClassVar

from picontext.agent.session import AgentSession
from picontext.agent.types import AgentToolResult
from picontext.ai.providers import StreamOptions
from picontext.ai.retry import RetryPolicy
from picontext.compaction.settings import Settings
from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer


class BigTool:
    """`big{size}`: returns `size` characters of text (a large tool result)."""

    name: ClassVar[str] = "big"
    label: ClassVar[str] = "big"
    description: ClassVar[str] = "big output"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"size": {"type": "integer"}}}

    async def execute(self, call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        size = int(args.get("size") or 4000)
        return AgentToolResult.text(("lorem ipsum " * (size // 12 + 1))[:size])


def make(
    server: ScriptedModelServer,
    tmp_path: Path,
    *,
    api: str = "openai-completions",
    window: int = 200_000,
    max_tokens: int = 8192,
    compaction: dict[str, Any] | None = None,
    retry: RetryPolicy | None = None,
    manager: SessionManager | None = None,
    **kw: Any,
) -> tuple[AgentSession, list[dict[str, Any]]]:
    manager = manager or SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    settings = Settings({"compaction": compaction}) if compaction else Settings()
    kw.setdefault("tools", [BigTool()])
    session = AgentSession(
        manager,
        model=server.model(api, context_window=window, max_tokens=max_tokens),  # type: ignore[arg-type]
        system_prompt="Test agent.",
        stream_options=StreamOptions(api_key="k"),
        settings=settings,
        retry=retry or RetryPolicy(base_delay_ms=1),
        **kw,
    )
    events: list[dict[str, Any]] = []
    session.subscribe(events.append)
    return session, events


def file_entries(session: AgentSession) -> list[dict[str, Any]]:
    path = session.manager.get_session_file()
    assert path is not None
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def kinds(entries: list[dict[str, Any]]) -> list[str]:
    return [e["message"]["role"] if e["type"] == "message" else e["type"] for e in entries]


def types(events: list[dict[str, Any]], *only: str) -> list[str]:
    return [e["type"] for e in events if not only or e["type"] in only]


def compact_types(events: list[dict[str, Any]]) -> list[str]:
    """Event types without streaming noise (message_update, tool updates)."""
    return [e["type"] for e in events if e["type"] not in ("message_update", "tool_execution_update")]


def request_roles(server: ScriptedModelServer, index: int) -> list[str]:
    return [m["role"] for m in server.requests[index].body["messages"]]


def request_text(server: ScriptedModelServer, index: int) -> str:
    return json.dumps(server.requests[index].body)


async def wait_for_requests(server: ScriptedModelServer, count: int, seconds: float = 10.0) -> None:
    """Wait until the server has received `count` requests (a held stream is in flight)."""
    import asyncio

    await asyncio.to_thread(server.wait_for_requests, count, seconds)


GUARD = 120.0
"""Seconds before a wait that should end gives up: a failure guard, never what decides a pass."""


async def summary_finished(session: AgentSession) -> None:
    """Until the running background summary has finished, whatever its outcome (its task: an event)."""
    import asyncio

    job = session.compaction.background.job
    assert job is not None, "no background summary is running"
    await asyncio.wait({job.task}, timeout=GUARD)
    assert job.task.done(), f"the background summary did not finish within {GUARD:.0f} s"


class _Job:
    def __init__(self, turn: int, waits_before: int) -> None:
        self.gate = threading.Event()
        self.turn = turn
        self.waits_before = waits_before


class _Hold:
    """The hold of one scripted summary step: bound, when its request arrives, to the background
    job running then (a split turn's two requests share it); it ends when the test releases that
    job or a turn starts waiting for it (so a late summary shows as `waited`, never as a hang)."""

    def __init__(self, held: HeldSummaries) -> None:
        self.held = held
        self.job: _Job | None = None

    def take(self, req: Any) -> bool:
        if not self.held.is_summary(req):
            return False
        self.job = self.held.jobs[-1] if self.held.jobs else None
        return True

    def is_set(self) -> bool:
        job = self.job
        return job is None or job.gate.is_set() or self.held.background.waited > job.waits_before

    def wait(self, timeout: float) -> bool:
        if self.job is not None:
            self.job.gate.wait(timeout)
        return self.is_set()


class HeldSummaries:
    """Background summaries over real HTTP that take as many turns as the test says: each is held
    until `release_due(turn, after)` finds `after` turns have passed since its job started, and
    that turn begins only once the summary has arrived. Events decide, never a clock."""

    def __init__(self, session: AgentSession, is_summary: Any) -> None:
        self.is_summary = is_summary
        self.background = session.compaction.background
        self.session = session
        self.jobs: list[_Job] = []
        self.turn = 0
        session.subscribe(self._seen)  # called before the summary task can send anything

    def _seen(self, event: dict[str, Any]) -> None:
        if event["type"] == "compaction_background_start":
            self.jobs.append(_Job(self.turn, self.background.waited))

    def steps(self, count: int, text_of: Any) -> list[Any]:
        from picontext.testing import text

        holds = [_Hold(self) for _ in range(count)]
        return [text(text_of(k)).when(hold.take).hold_after(1, hold) for k, hold in enumerate(holds)]  # type: ignore[arg-type]

    async def release_due(self, turn: int, after: int) -> None:
        self.turn = turn
        for job in self.jobs:
            if not job.gate.is_set() and turn >= job.turn + after:
                job.gate.set()
                running = self.background.job
                if running is not None and not running.task.done():
                    await summary_finished(self.session)

    def release_all(self) -> None:
        for job in self.jobs:
            job.gate.set()

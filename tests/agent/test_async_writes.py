"""Every write the agent makes from async code waits for the session file's lock in the store's
non-blocking writer section: another process holding the lock for 2 s never stalls the event loop
(abort, RPC and timers keep running) for more than 50 ms.

The loop's stall is measured by a heartbeat task (a 5 ms timer): the time between two beats less
the timer's own 5 ms and less the time the thread waited for a CPU (its run-queue delay, from
/proc/thread-self/schedstat). A loop that sleeps in `time.sleep` waiting for the lock shows that
whole sleep; a loaded machine that merely keeps the thread off the CPU does not count against it.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from runtime_helpers import BigTool, file_entries, kinds, make

from picontext.agent.session import AgentSession
from picontext.ai.providers import StreamOptions
from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, overflow, reply, text, tokens

HOLD_SECONDS = 2.0
MAX_STALL = 0.050
BEAT = 0.005


def _run_delay_ns() -> int:
    """Nanoseconds this thread has spent runnable but waiting for a CPU (0 where unknown)."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0


class Heartbeat:
    """Beats on the event loop; records each gap that overlaps the window [start, end]."""

    def __init__(self) -> None:
        self.stalls: list[tuple[float, float, float]] = []  # (begin, end, stall seconds)
        self.beats = 0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        last, last_wait = time.monotonic(), _run_delay_ns()
        while not self._stop.is_set():
            await asyncio.sleep(BEAT)
            now, wait = time.monotonic(), _run_delay_ns()
            self.stalls.append((last, now, (now - last) - BEAT - (wait - last_wait) / 1e9))
            self.beats += 1
            last, last_wait = now, wait

    def stop(self) -> None:
        self._stop.set()

    def worst_within(self, start: float, end: float) -> float:
        return max((s for b, e, s in self.stalls if e > start and b < end), default=0.0)

    def beats_within(self, start: float, end: float) -> int:
        return sum(1 for b, e, _ in self.stalls if b >= start and e <= end)


class ForeignLock:
    """Another writer's advisory lock on the session file, taken at once (from a listener, the
    moment the scenario reaches the write under test) and released after HOLD_SECONDS."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.taken_at: float | None = None
        self.released_at: float | None = None
        self.released = threading.Event()

    def take(self) -> None:
        if self.taken_at is not None:
            return
        fd = os.open(self.path, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # nobody holds it now: must not wait
        self.taken_at = time.monotonic()

        def release() -> None:
            # Marked released before the lock goes: an operation waiting for it can end the
            # instant `close` returns, before this thread would run another line.
            self.released_at = time.monotonic()
            self.released.set()
            os.close(fd)

        threading.Timer(HOLD_SECONDS, release).start()


async def _measured(lock: ForeignLock, operation: Callable[[], Awaitable[Any]]) -> Heartbeat:
    heart = Heartbeat()
    beating = asyncio.ensure_future(heart.run())
    try:
        await operation()
    finally:
        heart.stop()
        await beating
    assert lock.taken_at is not None, "the scenario never reached the write under test"
    assert lock.released.is_set(), "the operation ended while the lock was held: it did not wait for it"
    assert lock.released_at is not None
    assert heart.beats_within(lock.taken_at, lock.released_at) >= 10  # the loop ran while it waited
    worst = heart.worst_within(lock.taken_at, lock.released_at)
    assert worst < MAX_STALL, f"the event loop stalled {worst * 1000:.0f} ms behind a foreign lock"
    return heart


def _take_on(session: AgentSession, lock: ForeignLock, kind: str) -> None:
    session.subscribe(lambda event: lock.take() if event["type"] == kind else None)


async def _two_exchanges(session: AgentSession, server: ScriptedModelServer) -> str:
    for i in range(2):
        server.expect(reply(text(f"answer {i}"), usage=tokens(300 * (i + 1), 5)))
        await session.prompt(f"question {i} " + "q" * 800)
    path = session.manager.get_session_file()
    assert path is not None
    return path


async def test_overflow_recovery_omits_and_compacts_without_blocking_the_loop(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    """The failed attempt's omission (`context_edit`) and the compaction wait for the lock."""
    session, _ = make(server, tmp_path, compaction={"keepRecentTokens": 50})
    lock = ForeignLock(await _two_exchanges(session, server))
    _take_on(session, lock, "agent_end")  # the failed reply is written; its omission is next
    server.expect(overflow(), text("SUMMARY of questions"), text("recovered answer"))
    await _measured(lock, lambda: session.prompt("one more"))
    assert kinds(file_entries(session))[-5:] == ["user", "assistant", "context_edit", "compaction", "assistant"]


@pytest.mark.parametrize("resumable", [False, True])
async def test_a_manual_compaction_writes_its_span_and_entry_without_blocking_the_loop(
        server: ScriptedModelServer, tmp_path: Path, resumable: bool) -> None:
    """compaction.resumable writes a span before the summary request: that write waits too."""
    session, _ = make(server, tmp_path, compaction={"keepRecentTokens": 50, "resumable": resumable})
    lock = ForeignLock(await _two_exchanges(session, server))
    _take_on(session, lock, "compaction_start")
    server.expect(text("SUMMARY of questions"))
    await _measured(lock, lambda: session.compact())
    entries = file_entries(session)
    assert entries[-1]["type"] == "compaction"
    assert any(e["type"] == "custom" for e in entries) is resumable  # the span record


async def test_a_navigation_with_a_summary_writes_without_blocking_the_loop(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    session, _ = make(server, tmp_path)
    lock = ForeignLock(await _two_exchanges(session, server))
    target = next(e for e in session.manager.get_entries()
                  if e["type"] == "message" and e["message"]["role"] == "user"
                  and e["message"]["content"][0]["text"].startswith("question 1"))
    server.expect(text("We asked question 1."))

    async def navigate() -> None:
        lock.take()
        await session.navigate_tree(target["id"], summarize=True, label="left")

    await _measured(lock, navigate)
    assert [e["type"] for e in file_entries(session)][-2:] == ["branch_summary", "label"]


@pytest.mark.parametrize("command", [
    {"type": "set_session_name", "name": "renamed"},
    {"type": "set_thinking_level", "level": "high"},
])
async def test_rpc_commands_that_write_do_not_block_the_loop(
        server: ScriptedModelServer, tmp_path: Path, command: dict[str, Any]) -> None:
    """An RPC client's command waits for the lock while the loop keeps answering (abort included)."""
    from picontext.cli.modes.common import Controller
    from picontext.cli.modes.rpc import RpcServer

    session, _ = make(server, tmp_path)
    lock = ForeignLock(await _two_exchanges(session, server))
    written: list[dict[str, Any]] = []
    rpc = RpcServer(Controller(session), write=written.append)

    async def send() -> None:
        lock.take()
        await rpc.handle(command)

    await _measured(lock, send)
    assert [w["success"] for w in written if w.get("type") == "response"] == [True]
    assert file_entries(session)[-1]["type"] in ("session_info", "thinking_level_change")


LIBRARY_WRITES: dict[str, Callable[[AgentSession], Awaitable[Any]]] = {
    "aset_model": lambda s: s.aset_model({**s.model, "id": "another-model"}),
    "aset_thinking_level": lambda s: s.aset_thinking_level("high"),
    "aset_session_name": lambda s: s.aset_session_name("renamed"),
    "aset_label": lambda s: s.aset_label(s.manager.get_entries()[1]["id"], "here"),
}
WRITTEN = {"aset_model": "model_change", "aset_thinking_level": "thinking_level_change",
           "aset_session_name": "session_info", "aset_label": "label"}


@pytest.mark.parametrize("method", list(LIBRARY_WRITES))
async def test_the_library_s_async_writes_do_not_block_the_loop(
        server: ScriptedModelServer, tmp_path: Path, method: str) -> None:
    """The AgentSession methods a library user calls from async code (the RPC and chat front
    ends use them too) wait for the lock in the non-blocking writer section."""
    session, _ = make(server, tmp_path)
    lock = ForeignLock(await _two_exchanges(session, server))

    async def write() -> None:
        lock.take()
        await LIBRARY_WRITES[method](session)

    await _measured(lock, write)
    assert file_entries(session)[-1]["type"] == WRITTEN[method]


def _resumed(server: ScriptedModelServer) -> dict[str, Any]:
    """What a second AgentSession on the session file is built with: another model and thinking
    level, so its constructor records a `model_change` and a `thinking_level_change`."""
    return {"model": server.model(id="another-model"), "thinking_level": "high", "system_prompt": "Test agent.",
            "tools": [BigTool()], "stream_options": StreamOptions(api_key="k")}


async def test_constructing_a_session_inside_the_loop_does_not_block_it(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    """The constructor's initial entries find the lock held: they wait in memory, and the first
    prompt writes them, in order and before its message, once the lock is free."""
    first, _ = make(server, tmp_path)
    path = await _two_exchanges(first, server)
    last_id = file_entries(first)[-1]["id"]
    lock = ForeignLock(path)
    sessions: list[AgentSession] = []

    async def construct_and_prompt() -> None:
        lock.take()
        session = AgentSession(SessionManager.open(path), **_resumed(server))
        sessions.append(session)
        assert session.manager.pending_writes() == 2  # the lock is held: nothing waited for it
        server.expect(text("answer 2"))
        await session.prompt("question 2")

    await _measured(lock, construct_and_prompt)
    entries = file_entries(sessions[0])
    assert kinds(entries)[-4:] == ["model_change", "thinking_level_change", "user", "assistant"]
    ids = [last_id] + [e["id"] for e in entries[-4:]]
    assert [e["parentId"] for e in entries[-4:]] == ids[:-1]  # one chain, in file order
    assert entries[-4]["modelId"] == "another-model" and entries[-3]["thinkingLevel"] == "high"
    assert SessionManager.open(path).get_entries() == sessions[0].manager.get_entries()


async def test_acreate_returns_with_the_initial_entries_stored_without_blocking_the_loop(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    first, _ = make(server, tmp_path)
    path = await _two_exchanges(first, server)
    lock = ForeignLock(path)
    sessions: list[AgentSession] = []

    async def create() -> None:
        lock.take()
        sessions.append(await AgentSession.acreate(SessionManager.open(path), **_resumed(server)))

    await _measured(lock, create)
    assert sessions[0].manager.pending_writes() == 0
    assert kinds(file_entries(sessions[0]))[-2:] == ["model_change", "thinking_level_change"]


async def test_constructing_inside_the_loop_writes_at_once_when_nobody_holds_the_lock(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    first, _ = make(server, tmp_path)
    path = await _two_exchanges(first, server)
    session = AgentSession(SessionManager.open(path), **_resumed(server))
    assert session.manager.pending_writes() == 0
    assert kinds(file_entries(session))[-2:] == ["model_change", "thinking_level_change"]


async def test_a_synchronous_write_after_a_deferred_construction_writes_the_initial_entries_first(
        server: ScriptedModelServer, tmp_path: Path) -> None:
    first, _ = make(server, tmp_path)
    path = await _two_exchanges(first, server)
    lock = ForeignLock(path)
    lock.take()
    session = AgentSession(SessionManager.open(path), **_resumed(server))
    assert session.manager.pending_writes() == 2
    await asyncio.to_thread(lock.released.wait, 60)
    session.set_thinking_level("low")  # synchronous: may wait for the lock, and writes them first
    entries = file_entries(session)
    assert [e["type"] for e in entries[-3:]] == ["model_change", "thinking_level_change", "thinking_level_change"]
    assert [e["thinkingLevel"] for e in entries[-2:]] == ["high", "low"]

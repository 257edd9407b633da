"""Continuing a long session: what the agent does before its first request and after each run
reads the index and the live projection; it does not parse the entries outside the context
(a long file's lines stay unparsed `RawLine`s)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime_helpers import make

from picontext.scripted import ScriptedModelServer, text
from picontext.session.manager import SessionManager
from picontext.session.store import RawLine


def _long_session(tmp_path: Path, turns: int = 300) -> str:
    """A session of `turns` question/answer pairs, compacted near its end (the context is small)."""
    sm = SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    for i in range(turns):
        sm.append_message({"role": "user", "content": f"question {i}", "timestamp": i})
        sm.append_message({"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}],
                           "api": "openai-completions", "provider": "p", "model": "m", "stopReason": "stop",
                           "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15},
                           "timestamp": i})
    sm.append_compaction("## Goal\nkeep going", sm.get_branch()[-2]["id"], 5000)
    path = sm.get_session_file()
    assert path is not None
    return path


def _unparsed(manager: SessionManager) -> int:
    index: Any = manager._index  # counting the entries still unparsed is the point
    return sum(type(e) is RawLine for e in index.entries)


async def test_a_continued_long_session_parses_only_its_context(server: ScriptedModelServer, tmp_path: Path) -> None:
    manager = SessionManager.open(_long_session(tmp_path), str(tmp_path / "sessions"))
    manager.build_session_projection()
    before = _unparsed(manager)
    assert before > 500
    # resumable: the first check also looks for a span recorded before a crash
    session, _ = make(server, tmp_path, manager=manager, compaction={"resumable": True})
    assert _unparsed(manager) == before  # opening the agent session (model, thinking level recorded)
    server.expect(text("fine"))
    await session.prompt("and now?")  # the after-run check runs on the reply
    assert _unparsed(manager) == before
    await session.compaction.check_threshold()
    assert _unparsed(manager) == before
    assert manager.get_branch()[-1]["message"]["content"][0]["text"] == "fine"

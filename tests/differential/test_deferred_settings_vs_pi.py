"""An AgentSession constructed inside a running event loop while another process holds the
session file's lock records its model and thinking level at its first prompt (issue 20 item 6).
Pi 0.87.0 reads the resulting file as picontext does: one tree, and the context's model and
thinking level are the ones the session was constructed with."""

from __future__ import annotations

import asyncio
import fcntl
import os
from pathlib import Path

from pi_reference import UNDEFINED, PiReference
from test_projection_vs_pi import first_difference, normalise, run_cli

from picontext.agent.session import AgentSession
from picontext.ai.providers import StreamOptions
from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, text


async def test_initial_settings_written_after_a_held_lock_read_the_same_in_pi(
        server: ScriptedModelServer, tmp_path: Path, pi: PiReference) -> None:
    options = {"system_prompt": "Be brief.", "stream_options": StreamOptions(api_key="k")}
    first = AgentSession(SessionManager.create(str(tmp_path), str(tmp_path / "s")), model=server.model(), **options)
    server.expect(text("first answer"))
    await first.prompt("first question")
    path = first.manager.get_session_file()
    assert path is not None

    fd = os.open(path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another writer holds the session
    try:
        resumed = AgentSession(SessionManager.open(path), model=server.model(id="another-model"),
                               thinking_level="high", **options)
        assert resumed.manager.pending_writes() == 2
        server.expect(text("second answer"))
        prompting = asyncio.ensure_future(resumed.prompt("second question"))
        for _ in range(20):
            await asyncio.sleep(0.001)
        assert not prompting.done()
    finally:
        os.close(fd)
    await prompting

    facts = pi.op("session.treeFacts", path)
    assert facts["duplicates"] == [] and facts["dangling"] == []
    reference = pi.op("session.contextOfFile", path, UNDEFINED)
    ours = run_cli(Path(path), UNDEFINED)
    assert first_difference(normalise(reference), normalise(ours)) is None
    assert reference["thinkingLevel"] == "high"
    assert reference["model"]["modelId"] == "another-model"
    assert [m["role"] for m in reference["messages"]][-2:] == ["user", "assistant"]

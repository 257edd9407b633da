"""A session written through the OpenAI Agents SDK adapter reads the same in Pi 0.87.0.

The real SDK Runner talks to the scripted server; the session goes through compactions, a
`pop_item` (a branch) and a `clear_session` (a new root) and a few more turns; then Pi's
`buildSessionContext` of the file must equal picontext's (`picontext context --json`), at the
file's leaf and at a leaf before the clear, and Pi must find every id and parent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "integrations"))
from agents_script import Conversation, make_agent, session_for
from test_projection_vs_pi import UNDEFINED, first_difference, normalise

from picontext.testing import ScriptedModelServer

PiReference = Any


def _context(path: str, leaf: str) -> Any:
    cmd = [sys.executable, "-m", "picontext", "context", path, "--json"]
    if leaf != UNDEFINED:
        cmd += ["--leaf", leaf]
    proc = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


async def test_adapter_session_reads_the_same_in_pi(server: ScriptedModelServer, tmp_path: Path,
                                                     pi: PiReference) -> None:
    session = session_for(server, str(tmp_path / "store"), str(tmp_path), window=4_000)
    talk = Conversation(server, session, make_agent(server))
    for i in range(12):
        await talk.turn(i)
    assert session.compactions >= 1
    await session.pop_item()
    before_clear = session.memory.manager.get_leaf_id()
    await session.clear_session()
    for i in range(12, 14):
        await talk.turn(i)
    talk.drain()
    path = session.memory.manager.get_session_file()
    assert path is not None
    assert before_clear is not None
    for leaf in (UNDEFINED, before_clear):
        ref = pi.op("session.contextOfFile", path, leaf)
        ours = _context(path, leaf)
        assert ref["messages"], leaf
        d = first_difference(normalise(ref), normalise(ours))
        assert d is None, f"leaf {leaf}: {d}"
    facts = pi.op("session.treeFacts", path)
    assert facts["duplicates"] == [] and facts["dangling"] == []
    assert facts["count"] == session.memory.manager.entry_count()

"""A session compacted with the mechanical fallback summary reads the same in Pi 0.87.0.

The file gains `picontext.compaction-failed` custom entries (one per failed attempt) and a
compaction entry whose summary was written without a model and whose `details` carry `fallback`.
Pi must project it exactly as picontext does, plan its next compaction from it the same way (the
fallback summary is the previous summary, its `details.readFiles/modifiedFiles` are inherited),
and keep doing so after a later, ordinary compaction on top.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

from pi_reference import UNDEFINED, PiReference
from test_compaction_vs_pi import PythonSide, compare_file
from test_projection_vs_pi import first_difference, normalise

from picontext.compaction.compact import compact_session
from picontext.compaction.completion import ScriptedCompletion, assistant_reply
from picontext.compaction.records import FAILURE_TYPE
from picontext.compaction.settings import CompactionSettings
from picontext.session.manager import SessionManager

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "sessions" / "refactor-session.jsonl"
KEEP = 2000


def pi_reads_it_identically(pi: PiReference, py: PythonSide, path: Path, label: str) -> None:
    manager = SessionManager.open(str(path), str(path.parent), warn=lambda message: None)
    diff = first_difference(normalise(pi.op("session.contextOfFile", str(path), UNDEFINED)),
                            normalise(manager.build_session_context()))
    assert diff is None, f"{label}: {diff}"
    compare_file(pi, py, path, [UNDEFINED], [200, KEEP, 20000], label, random_ids=False)


def entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_fallback_compaction_reads_the_same_in_pi(pi: PiReference, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    shutil.copy(EXAMPLE, path)
    manager = SessionManager.open(str(path), str(tmp_path))
    settings = CompactionSettings(keep_recent_tokens=KEEP)
    truncated = assistant_reply("## Goal\nhalf a summ", stop_reason="length")
    outcome = asyncio.run(compact_session(manager, completion=ScriptedCompletion(default=truncated),
                                          settings=settings))
    assert outcome.summary is not None and outcome.summary.details["fallback"]["attempts"] == 2
    rows = entries(path)
    assert [r.get("customType") for r in rows[-3:]] == [FAILURE_TYPE, FAILURE_TYPE, None]
    assert rows[-1]["type"] == "compaction"
    pi_reads_it_identically(pi, PythonSide(tmp_path), path, "after the fallback")

    # The conversation goes on and the next compaction, an ordinary one, builds on the fallback.
    for i in range(6):
        manager.append_message({"role": "user", "content": f"next step {i} " + "please " * 200, "timestamp": i})
        manager.append_message({"role": "assistant", "content": [{"type": "text", "text": f"done {i} " * 150}],
                                "api": "x", "provider": "p", "model": "m", "usage": {}, "stopReason": "stop",
                                "timestamp": i})
    outcome = asyncio.run(compact_session(manager, completion=ScriptedCompletion(default="## Goal\nGo on."),
                                          settings=settings))
    assert outcome.summary is not None and "fallback" not in outcome.summary.details
    pi_reads_it_identically(pi, PythonSide(tmp_path), path, "after a later ordinary compaction")

"""A session far over the window, compacted by picontext in one operation (a hierarchical summary
of a split turn, written concurrently, and the huge kept tool result shortened by a context edit),
is read by Pi 0.87.0 exactly as picontext reads it: the same context, token estimates and plans."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from test_compaction_vs_pi import PythonSide, compare_file
from test_projection_vs_pi import UNDEFINED, first_difference, normalise

from picontext.agent.session import AgentSession
from picontext.ai.providers import StreamOptions
from picontext.compaction.settings import Settings
from picontext.session.manager import SessionManager
from picontext.testing import ScriptedModelServer, text
from picontext.testing.model_server import RecordedRequest


def _is_summary(req: RecordedRequest) -> bool:
    return "hand-off notes" in json.dumps(req.body)


def _usage() -> dict[str, Any]:
    return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


async def _compacted_session(directory: Path) -> Path:
    with ScriptedModelServer() as server:
        manager = SessionManager.create(str(directory), str(directory / "sessions"))
        session = AgentSession(manager, model=server.model(context_window=16_000, max_tokens=2000),  # type: ignore[arg-type]
                               system_prompt="Test agent.", stream_options=StreamOptions(api_key="k"),
                               settings=Settings({"compaction": {"reserveTokens": 4000, "keepRecentTokens": 2000}}))
        for i in range(60):
            manager.append_message({"role": "user", "content": f"step {i}: " + "look at this " * 80, "timestamp": 1})
            manager.append_message({"role": "assistant", "content": [{"type": "text", "text": f"done {i} " * 30}],
                                    "api": "openai-completions", "provider": "openai-compatible",
                                    "model": "scripted-model", "usage": _usage(), "stopReason": "stop",
                                    "timestamp": 1})
        manager.append_message({"role": "user", "content": "read the build log", "timestamp": 1})
        manager.append_message({"role": "assistant", "content": [{"type": "toolCall", "id": "call_log", "name": "read",
                                                                  "arguments": {"path": "build.log"}}],
                                "api": "openai-completions", "provider": "openai-compatible",
                                "model": "scripted-model", "usage": _usage(), "stopReason": "toolUse", "timestamp": 1})
        log = "".join(f"{i:07d} compiling module {i % 97:02d} ok\n" for i in range(5000))
        manager.append_message({"role": "toolResult", "toolCallId": "call_log", "toolName": "read",
                                "content": [{"type": "text", "text": log}], "isError": False, "timestamp": 1})
        server.expect(*[text(f"## Goal\nnote {k}").when(_is_summary) for k in range(30)],
                      text("carrying on").when(lambda r: not _is_summary(r)))
        await session.prompt("go on")
        path = manager.get_session_file()
        assert path is not None
    return Path(path)


def test_pi_reads_an_over_window_compaction_as_picontext_does(pi: Any, tmp_path: Path) -> None:
    path = asyncio.run(_compacted_session(tmp_path))
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    compaction = next(e for e in entries if e["type"] == "compaction")
    assert "**Turn Context (split turn):**" in compaction["summary"]  # history and prefix, Pi's layout
    assert [e["type"] for e in entries].count("context_edit") == 1
    reference = pi.op("session.contextOfFile", str(path), UNDEFINED)
    ours = SessionManager.open(str(path), str(path.parent)).build_session_context()
    assert first_difference(normalise(reference), normalise(ours)) is None
    compare_file(pi, PythonSide(tmp_path), path, [UNDEFINED], [2000, 20000], "over-window compaction",
                 random_ids=False)

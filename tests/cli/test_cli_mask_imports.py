"""`picontext compact --strategy mask` needs no model: it imports neither httpx nor the providers
nor the summary path (the mask strategy is a whole process measured against Pi, bench_mask.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from picontext.session.manager import SessionManager


def _tool_session(tmp_path: Path) -> str:
    sm = SessionManager.create(str(tmp_path), str(tmp_path))
    for i in range(12):
        call = {"type": "toolCall", "id": f"c{i}", "name": "read", "arguments": {"path": f"f{i}.py"}}
        sm.append_message({"role": "user", "content": f"read f{i}", "timestamp": i})
        sm.append_message({"role": "assistant", "content": [call], "api": "x", "provider": "p", "model": "m",
                           "usage": {}, "stopReason": "toolUse", "timestamp": i})
        sm.append_message({"role": "toolResult", "toolCallId": f"c{i}", "toolName": "read",
                           "content": [{"type": "text", "text": "x = 1\n" * 2000}], "isError": False,
                           "timestamp": i})
    path = sm.get_session_file()
    assert path is not None
    return path


def test_mask_compaction_imports_no_model_client(tmp_path: Path) -> None:
    path = _tool_session(tmp_path)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "picontext", "compact", path, "--strategy",
                           "mask", "--keep-recent-tokens", "2000", "--json"], capture_output=True, text=True,
                          check=True)
    outcome = json.loads(proc.stdout)
    assert outcome["masked"] > 0  # it did mask (the import list is that of a real compaction)
    modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "picontext.compaction.mask" in modules
    heavy = {m for m in modules if m.split(".")[0] in ("httpx", "rich", "prompt_toolkit")
             or m.startswith(("picontext.ai.providers", "picontext.compaction.summarize",
                              "picontext.compaction.completion", "picontext.agent"))}
    assert heavy == set()

"""`picontext demo` runs offline to the end and leaves a valid session with compactions."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from picontext.cli.loading import load_session


def test_demo_runs_offline_and_leaves_a_compacted_session(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["COLUMNS"] = "200"
    result = subprocess.run([sys.executable, "-m", "picontext", "demo", "--fast", "--dir", str(tmp_path)],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    match = re.search(r"Session file: (\S+\.jsonl)", out)
    assert match, out
    path = Path(match.group(1))
    assert path.is_file() and path.is_relative_to(tmp_path)

    session = load_session(str(path))  # a valid session file
    kinds = [e["type"] for e in session.entries]
    assert "compaction" in kinds
    assert "▸ bash" in out and "▸ write" in out and "▸ edit" in out and "▸ read" in out
    assert "Context compacted" in out and "─ demo/scripted-12k" in out and "/12k" in out
    assert "?/12k" in out  # unknown usage right after a compaction

    project = tmp_path / "project"
    assert sorted(p.name for p in project.iterdir()) == ["corpus.txt", "test_wordstats.py", "wordstats.py"]
    tests = subprocess.run([sys.executable, "-m", "unittest", "-q", "test_wordstats"], cwd=project,
                           capture_output=True, text=True, timeout=60)
    assert tests.returncode == 0, tests.stderr  # the tool calls really wrote working code

    # The runtime compacts by itself: at the threshold, and after an overflow error.
    assert "Context compacted (threshold)" in out and "(auto)" in out
    assert "Context compacted (overflow)" in out and "retrying the request" in out
    assert kinds.count("compaction") == 2 and "context_edit" in kinds
    omitted = [e for e in session.entries if e["type"] == "context_edit"]
    assert omitted[0]["replacement"] is None
    messages = [e["message"] for e in session.entries if e["type"] == "message"]
    assert messages[-1]["role"] == "assistant" and messages[-1]["stopReason"] == "stop"
    assert json.loads(path.read_text().splitlines()[0])["type"] == "session"

"""examples/openai_agents_memory.py and examples/langchain_memory.py run offline (scripted server)
and compact as they say; the session they leave opens in `picontext show`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("script", "also_shown"), [
    ("openai_agents_memory.py", "Text 4"),
    ("langchain_memory.py", "word_count"),  # the tool call, kept in the session
])
def test_example_runs_offline_compacts_and_the_session_opens(tmp_path: Path, script: str, also_shown: str) -> None:
    env = {**os.environ, "PICONTEXT_DIR": str(tmp_path / "home")}
    proc = subprocess.run([sys.executable, str(REPO / "examples" / script), "--scripted",
                           "--turns", "5", "--store", str(tmp_path / "store")],
                          capture_output=True, text=True, encoding="utf-8", timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert [line.split(":")[1].strip().split("  ")[0] for line in lines[:5]] == [
        f"Text {i} has 300 words." for i in range(5)]
    assert int(re.findall(r"compactions (\d+)", lines[4])[0]) >= 1
    path = lines[-1].split(": ", 1)[1]
    assert Path(path).is_file() and Path(path).is_relative_to(tmp_path / "store")
    shown = subprocess.run([sys.executable, "-m", "picontext", "show", path, "--no-pager"], capture_output=True,
                           text=True, encoding="utf-8", timeout=120, env=env)
    assert shown.returncode == 0 and "Text 4" in shown.stdout and also_shown in shown.stdout

"""examples/langchain_memory.py runs offline (scripted server) and compacts as it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_example_runs_offline_compacts_and_the_session_opens(tmp_path: Path) -> None:
    env = {**os.environ, "PICONTEXT_DIR": str(tmp_path / "home")}
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "langchain_memory.py"), "--scripted",
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
    assert shown.returncode == 0 and "Text 4" in shown.stdout and "word_count" in shown.stdout

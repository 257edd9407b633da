"""Sessions written by `picontext import` are read and projected by the Pi reference exactly as by
picontext: every Claude Code transcript and SWE-agent trajectory of tests/fixtures/replay, its
context at many leaves, its token estimates and compaction plans, and Pi's own SessionManager
opening it and appending to it."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import test_compaction_vs_pi as compaction
import test_projection_vs_pi as projection

from picontext.session.projection import LAST, build_session_context
from picontext.session.store import load_file_entries

UNDEFINED = projection.UNDEFINED
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay"
SOURCES = [*sorted((FIXTURES / "claude-code").glob("*.jsonl")), *sorted((FIXTURES / "swe-agent").glob("*.traj"))]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("imported")
    proc = subprocess.run([sys.executable, "-m", "picontext", "import", "--json", *map(str, SOURCES), "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    paths = [Path(json.loads(line)["path"]) for line in proc.stdout.splitlines()]
    assert len(paths) == len(SOURCES) + 2  # the compacted session's two subagents
    return paths


def _leaves(path: Path, count: int) -> list[Any]:
    entries = load_file_entries(str(path))[1:]
    rng = random.Random(path.name)
    picked = sorted(rng.sample(range(len(entries)), min(count, len(entries))))
    return [UNDEFINED, None, *({"index": i} for i in picked), {"index": len(entries) - 1}]


def test_pi_projects_every_imported_session_as_picontext_does(
        imported: list[Path], pi: Any, tmp_path: Path) -> None:
    side = projection.PythonSide(tmp_path)
    compared = 0
    for path in imported:
        leaves = _leaves(path, 40)
        compared += projection.compare_file(pi, side, path, leaves, label=path.name)
    assert compared >= 40 * len(imported) // 2


def test_pi_counts_tokens_and_plans_compactions_as_picontext_does(
        imported: list[Path], pi: Any, tmp_path: Path) -> None:
    side = compaction.PythonSide(tmp_path)
    for path in imported:
        compaction.compare_file(pi, side, path, _leaves(path, 8), [0, 1000, 5000, 20000], path.name,
                                random_ids=False)


def test_pis_session_manager_opens_and_appends_to_imported_sessions(
        imported: list[Path], pi: Any, tmp_path: Path) -> None:
    """Pi's SessionManager.open accepts the file as a current session (no migration, no rewrite)
    and appends after its leaf; both sides then see the same context, ending in the new message."""
    for path in imported:
        copy = tmp_path / path.name
        shutil.copyfile(path, copy)
        before = copy.read_bytes()
        pi.op("json_ops.piAppendUserMessage", str(copy), "continue from here")
        after = copy.read_bytes()
        assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1, path.name
        appended = json.loads(after.splitlines()[-1])
        assert appended["parentId"] == json.loads(before.splitlines()[-1])["id"]
        ours = build_session_context(load_file_entries(str(copy))[1:], LAST)
        ref = pi.op("session.contextOfFile", str(copy), UNDEFINED)
        assert projection.first_difference(projection.normalise(ref), projection.normalise(ours)) is None
        assert ours["messages"][-1]["content"] == "continue from here"

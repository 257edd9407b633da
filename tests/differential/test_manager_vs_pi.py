"""SessionManager (lazy loading + incremental projection) equals the reference on real files.

test_projection_vs_pi.py checks the pure pipeline; this checks what an agent actually uses:
`SessionManager.open(file)` (entries parsed lazily), `build_session_context()` from the file's
leaf, after `branch(id)` to other leaves, and after appends.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import sessiongen
from pi_reference import UNDEFINED, PiReference
from test_projection_vs_pi import first_difference, normalise

from picontext.session.manager import SessionManager

REPO = Path(__file__).resolve().parents[2]
REAL = [*sorted((REPO / "tests" / "fixtures" / "sessions" / "v1").glob("*.jsonl")),
        REPO / "examples" / "sessions" / "refactor-session.jsonl"]
# Generated files the manager can be compared on, chosen when collecting: valid and not v1 (v1 ids
# are random in the reference, so leaves can't be named). Every collected case compares.
SEEDS = [s for s in range(0, 900, 3) if (g := sessiongen.generate(s)).valid and g.kind != "v1"][:100]


def _open_copy(path: Path, tmp: Path) -> SessionManager:
    copy = tmp / path.name
    shutil.copyfile(path, copy)
    return SessionManager.open(str(copy), str(tmp), warn=lambda message: None)


def _check(ref: Any, sm: SessionManager, label: str) -> None:
    d = first_difference(normalise(ref), normalise(sm.build_session_context()))
    assert d is None, f"{label}: {d}"


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
def test_manager_matches_reference(seed: int, pi: PiReference, tmp_path: Path) -> None:
    g = sessiongen.generate(seed)
    (tmp_path / "src").mkdir()
    path = g.write(tmp_path / "src")
    sm = _open_copy(path, tmp_path)
    _check(pi.op("session.contextOfFile", str(path), UNDEFINED), sm, f"seed {seed} file leaf")
    for leaf in [x for x in g.leaves if isinstance(x, str) and x and sm.get_entry(x) is not None][:6]:
        sm.branch(leaf)
        _check(pi.op("session.contextOfFile", str(path), leaf), sm, f"seed {seed} leaf {leaf}")


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_manager_on_real_sessions_including_appends(path: Path, pi: PiReference, tmp_path: Path) -> None:
    sm = _open_copy(path, tmp_path)
    _check(pi.op("session.contextOfFile", str(path), UNDEFINED), sm, path.name)
    # After appends (which upgrade a v1 file to v3 on disk), reopening the file gives the same
    # context in picontext and in the reference.
    sm.append_message({"role": "user", "content": "one more thing", "timestamp": 1})
    branch = sm.get_branch()
    target = next(e["id"] for e in reversed(branch) if e["type"] == "message"
                  and e["message"]["role"] in ("assistant", "toolResult"))
    sm.append_context_edit(target, {"content": "shortened"})
    sm.append_compaction("summary so far", branch[len(branch) // 2]["id"], 1234)
    sm.append_message({"role": "user", "content": "and after", "timestamp": 2})
    written = Path(sm.get_session_file() or "")
    reopened = SessionManager.open(str(written), str(tmp_path), warn=lambda message: None)
    ref = pi.op("session.contextOfFile", str(written), UNDEFINED)
    _check(ref, sm, f"{path.name} live after appends")
    _check(ref, reopened, f"{path.name} reopened after appends")

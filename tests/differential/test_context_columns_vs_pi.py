"""`picontext context FILE --json` through the entry columns, byte for byte against the reference's
`JSON.stringify(buildSessionContext(...))`: cold (no cache), warm (from the cache), and after Pi
appended to the file picontext had indexed (the columns are extended and Pi's line is in the
context)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from picontext.session import jsonl_columns
from picontext.session.store import indexed_columns

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(Path(__file__).parent))
import sessiongen  # noqa: E402

import gen_realistic  # noqa: E402


def _cli(path: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "picontext", "context", path, "--json"], capture_output=True,
                          check=True)
    return proc.stdout.decode("utf-8")


def _check_cold_warm(pi: Any, path: str) -> None:
    cache = jsonl_columns.columns_path(os.path.realpath(path))
    assert not os.path.exists(cache)
    expected = pi.op("json_ops.contextText", path) + "\n"
    assert _cli(path) == expected  # cold: the columns are built and written
    assert os.path.exists(cache)
    assert _cli(path) == expected  # warm: from the cache


def test_realistic_session_cold_warm_and_after_a_pi_append(pi: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "realistic.jsonl")
    gen_realistic.generate(path, 2500, seed=21)
    _check_cold_warm(pi, path)
    before = jsonl_columns.read_columns(os.path.realpath(path), os.stat(path))
    assert before is not None and before.regular
    pi.op("json_ops.piAppendUserMessage", path, "appended by pi")
    after_text = _cli(path)
    assert after_text == pi.op("json_ops.contextText", path) + "\n"
    assert "appended by pi" in after_text
    after = jsonl_columns.read_columns(os.path.realpath(path), os.stat(path))
    assert after is not None and after.regular and len(after.ids) == len(before.ids) + 1
    assert after.ids[: len(before.ids)] == before.ids  # extended, the indexed part kept


def test_generated_sessions_through_the_columns_match_the_reference(pi: Any, tmp_path: Path) -> None:
    checked = 0
    for seed in range(300):
        g = sessiongen.generate(seed)
        if not g.valid or g.kind != "v3":
            continue
        path = g.write(tmp_path)
        view = indexed_columns(str(path))
        if view is None:
            continue
        view.close()
        os.unlink(jsonl_columns.columns_path(os.path.realpath(path)))
        _check_cold_warm(pi, str(path))
        checked += 1
        if checked == 12:
            break
    assert checked == 12

"""picontext's token accounting and compaction planning equal the Pi reference's.

For generated sessions (tests/differential/sessiongen.py, wrapped, not edited), the real v1
fixtures and the example refactor session, both sides load the file, resolve several leaves and
compare, per leaf:

* estimateTokens of every context message, estimateContextTokens and
  estimateProjectedContextTokens of the projection;
* the raw findCutPoint over the whole branch and prepareCompaction's result, as the dry-run
  report (`preparation_report`), for several keepRecentTokens values.

Where the reference throws on malformed data (content that is not a list, a text block without
text; see docs/divergences.md "Compaction planning"), the case is counted as `reference-error`
and picontext must simply not crash. Everything else must be equal.

Knobs: PICONTEXT_DIFF_COMPACTION_SEEDS (default 800), PICONTEXT_DIFF_SEED0 (default 0).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import sessiongen

from picontext.compaction.cut_point import find_cut_point
from picontext.compaction.prepare import preparation_report, prepare_compaction
from picontext.compaction.settings import CompactionSettings
from picontext.compaction.tokens import estimate_context_tokens, estimate_projected_context_tokens, estimate_tokens
from picontext.session.migrations import migrate_to_current
from picontext.session.projection import LAST, build_session_path, build_session_projection
from picontext.session.store import load_file_entries

UNDEFINED = sessiongen.UNDEFINED
REPO = Path(__file__).resolve().parents[2]
REAL_SESSIONS = sorted((REPO / "tests" / "fixtures" / "sessions" / "v1").glob("*.jsonl"))
EXAMPLE = REPO / "examples" / "sessions" / "refactor-session.jsonl"

SEEDS = int(os.environ.get("PICONTEXT_DIFF_COMPACTION_SEEDS", "800"))
SEED0 = int(os.environ.get("PICONTEXT_DIFF_SEED0", "0"))
GEN_KEEPS = [0, 1, 5, 20, 60, 150, 400, 20000]
REAL_KEEPS = [0, 100, 1000, 5000, 20000, 60000]

# Case counts, printed at the end of the run by conftest.pytest_terminal_summary (every comparison
# asserts on its own; nothing depends on the order tests run in).
STATS: Counter[str] = Counter()


def _number(value: Any) -> Any:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _same(ref: Any, got: Any) -> bool:
    if isinstance(ref, dict) and isinstance(got, dict):
        return ref.keys() == got.keys() and all(_same(ref[k], got[k]) for k in ref)
    if isinstance(ref, list) and isinstance(got, list):
        return len(ref) == len(got) and all(_same(a, b) for a, b in zip(ref, got, strict=True))
    return _number(ref) == _number(got)


class PythonSide:
    """picontext's equivalent of node/ops/compaction_ops.mjs."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def load(self, path: Path) -> list[Any] | None:
        copy = self.workdir / "copy.jsonl"
        shutil.copyfile(path, copy)
        file_entries = load_file_entries(copy)
        if not file_entries:
            return None
        migrate_to_current(file_entries)
        return [e for e in file_entries if not (isinstance(e, dict) and e.get("type") == "session")]

    @staticmethod
    def target(leaf: Any, entries: list[Any]) -> Any:
        if leaf == UNDEFINED:
            return LAST
        if isinstance(leaf, dict):
            i = leaf["index"]
            e = entries[i] if 0 <= i < len(entries) else None
            return e.get("id", LAST) if isinstance(e, dict) else LAST
        return leaf

    def tokens(self, entries: list[Any], leaf: Any) -> dict[str, Any]:
        target = self.target(leaf, entries)
        projection = build_session_projection(entries, target)
        branch = build_session_path(entries, target)
        return {
            "perMessage": [estimate_tokens(m) for m in projection.messages],
            "estimate": estimate_context_tokens(projection.messages),
            "projected": estimate_projected_context_tokens(projection, branch),
        }

    def plans(self, entries: list[Any], leaf: Any, keeps: list[int]) -> list[dict[str, Any]]:
        branch = build_session_path(entries, self.target(leaf, entries))
        out = []
        for keep in keeps:
            settings = CompactionSettings(keep_recent_tokens=keep)
            report = preparation_report(prepare_compaction(branch, settings))
            position = None
            if report is not None:
                position = next(i for i, e in enumerate(entries) if isinstance(e, dict)
                                and e.get("id") == report["firstKeptEntryId"])
            out.append({"cut": find_cut_point(branch, 0, len(branch), keep).to_json(), "report": report,
                        "position": position})
        return out


@pytest.fixture(scope="module")
def py_side(tmp_path_factory: pytest.TempPathFactory) -> PythonSide:
    return PythonSide(tmp_path_factory.mktemp("py-compaction"))


@pytest.fixture(scope="module")
def gen_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sessiongen-compaction")


def _check(kind: str, ref: dict[str, Any], got: Any, problems: list[str], where: str) -> None:
    if "error" in ref:
        STATS[f"{kind}: reference-error"] += 1
        return
    if _same(ref["ok"], got):
        STATS[f"{kind}: match"] += 1
    else:
        STATS[f"{kind}: MISMATCH"] += 1
        problems.append(f"{where} {kind}: reference {ref['ok']!r:.400} != picontext {got!r:.400}")


def compare_file(pi: Any, py: PythonSide, path: Path, leaves: list[Any], keeps: list[int], label: str, *,
                 random_ids: bool) -> None:
    entries = py.load(path)
    tokens_ref = pi.op("compaction_ops.tokensOfFile", str(path), leaves)
    if entries is None or tokens_ref.get("invalid"):
        assert entries is None and tokens_ref.get("invalid"), f"{label}: validity differs"
        return
    plans_ref = pi.op("compaction_ops.planOfFile", str(path), leaves, keeps)
    problems: list[str] = []
    for leaf, tref, pref in zip(leaves, tokens_ref["results"], plans_ref["results"], strict=True):
        where = f"{label} leaf {leaf!r}"
        if "projectionError" in tref:
            STATS["projection: reference-error"] += 1
            continue
        got = py.tokens(entries, leaf)
        assert len(got["perMessage"]) == len(tref["perMessage"]), f"{where}: message count differs"
        for i, (r, g) in enumerate(zip(tref["perMessage"], got["perMessage"], strict=True)):
            _check("estimateTokens", r, g, problems, f"{where} message {i}")
        _check("estimateContextTokens", tref["estimate"], got["estimate"], problems, where)
        _check("estimateProjectedContextTokens", tref["projected"], got["projected"], problems, where)
        for keep, r, g in zip(keeps, pref["plans"], py.plans(entries, leaf, keeps), strict=True):
            _check("findCutPoint", r["cut"], g["cut"], problems, f"{where} keep {keep}")
            if random_ids and r["report"].get("ok") and g["report"]:
                assert r["position"] == g["position"], f"{where} keep {keep}: first kept entry differs"
                g["report"]["firstKeptEntryId"] = r["report"]["ok"]["firstKeptEntryId"]
            _check("prepareCompaction", r["report"], g["report"], problems, f"{where} keep {keep}")
            if "ok" in r["report"] and r["report"]["ok"] is not None:
                STATS["prepareCompaction: non-null reports"] += 1
    assert not problems, f"{label} ({path}):\n  " + "\n  ".join(problems[:10])


@pytest.mark.parametrize("seed", range(SEED0, SEED0 + SEEDS), ids=lambda s: f"seed{s}")
def test_generated_sessions_match_reference(seed: int, pi: Any, py_side: PythonSide, gen_dir: Path) -> None:
    g = sessiongen.generate(seed)
    compare_file(pi, py_side, g.write(gen_dir), g.leaves, GEN_KEEPS, f"seed {seed} ({g.kind}; {', '.join(g.notes)})",
                 random_ids=g.kind == "v1")


@pytest.mark.parametrize("path", [*REAL_SESSIONS, EXAMPLE], ids=lambda p: p.name)
def test_real_sessions_match_reference(path: Path, pi: Any, py_side: PythonSide) -> None:
    entries = py_side.load(path)
    assert entries is not None
    rng = random.Random(path.name)
    leaves: list[Any] = [UNDEFINED, *({"index": i} for i in sorted(rng.sample(range(len(entries)), 12)))]
    compare_file(pi, py_side, path, leaves, REAL_KEEPS, path.name, random_ids=path != EXAMPLE)


@pytest.mark.parametrize("seed", [SEED0 + i for i in range(0, 60, 6)], ids=lambda s: f"seed{s}")
def test_cli_tokens_json_matches_reference(seed: int, pi: Any, gen_dir: Path) -> None:
    """`picontext tokens FILE --json` prints the reference's estimateContextTokens and estimateTokens."""
    g = sessiongen.generate(seed)
    path = g.write(gen_dir)
    ref = pi.op("compaction_ops.tokensOfFile", str(path), [UNDEFINED])
    proc = subprocess.run([sys.executable, "-m", "picontext", "tokens", str(path), "--json"], capture_output=True,
                          text=True, encoding="utf-8", timeout=60)
    if ref.get("invalid"):
        assert proc.returncode == 2
        return
    result = ref["results"][0]
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    # Where the reference throws (malformed messages), picontext counts 0 (docs/divergences.md):
    # those values are excluded from the comparison, every other one must be equal.
    per_message = result.get("perMessage", [])
    if "projectionError" not in result:
        assert len(got["perMessage"]) == len(per_message)
        for r, g in zip(per_message, got["perMessage"], strict=True):
            assert _same(r["ok"], g) if "ok" in r else isinstance(g, int)
        if "ok" in result["estimate"]:
            assert _same(result["estimate"]["ok"], got["estimate"])
    assert isinstance(got["estimate"]["tokens"], int | float)

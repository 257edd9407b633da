"""picontext's projection equals the Pi reference's on generated and real session files.

Each generated file (tests/differential/sessiongen.py, one per seed) is loaded by both sides
(loadEntriesFromFile + in-memory migration) and projected with buildSessionContext for several
leaves: the file's last entry (JS undefined), null, an unknown id, "" and entries of every type.
Results are compared as parsed JSON with numbers normalised (1 == 1.0; NaN/Infinity -> null,
which is what JSON.stringify writes).

Knobs: PICONTEXT_DIFF_SEEDS (number of generated files, default 300), PICONTEXT_DIFF_SEED0
(first seed, default 0). Reproduce one case with
`python tests/differential/sessiongen.py OUTDIR` or `sessiongen.generate(seed).write(dir)`.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import sessiongen

UNDEFINED = sessiongen.UNDEFINED  # the harness's stand-in for JavaScript's undefined
PiReference = Any  # the `pi` fixture of conftest.py

REPO = Path(__file__).resolve().parents[2]
REAL_SESSIONS = sorted((REPO / "tests" / "fixtures" / "sessions" / "v1").glob("*.jsonl"))
EXAMPLE = REPO / "examples" / "sessions" / "refactor-session.jsonl"
EXAMPLE_SCRIPT = REPO / "examples" / "make_example_session.py"

SEEDS = int(os.environ.get("PICONTEXT_DIFF_SEEDS", "300"))
SEED0 = int(os.environ.get("PICONTEXT_DIFF_SEED0", "0"))
CLI_SAMPLE = [SEED0 + i for i in range(0, SEEDS, max(1, SEEDS // 20))][:20]
REAL_LEAVES = 50


# --- comparison helpers ----------------------------------------------------------------------


def normalise(value: Any) -> Any:
    """Parsed-JSON view of a value: every number a float, non-finite numbers null."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return None if isinstance(value, float) and not math.isfinite(value) else float(value)
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, Sequence):  # lists, and the read-only views a projection hands out
        return [normalise(v) for v in value]
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def first_difference(a: Any, b: Any, where: str = "$") -> str | None:
    """Human-readable location of the first difference between two normalised values."""
    if type(a) is not type(b):
        return f"{where}: reference {a!r:.200} != picontext {b!r:.200}"
    if isinstance(a, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in b:
                return f"{where}.{k}: missing in picontext (reference {a[k]!r:.200})"
            if k not in a:
                return f"{where}.{k}: extra in picontext ({b[k]!r:.200})"
            d = first_difference(a[k], b[k], f"{where}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            roles = lambda xs: [x.get("role") if isinstance(x, dict) else x for x in xs]  # noqa: E731
            return f"{where}: length {len(a)} != {len(b)}; reference {roles(a)!r:.400} picontext {roles(b)!r:.400}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = first_difference(x, y, f"{where}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{where}: reference {a!r:.200} != picontext {b!r:.200}"


# --- the Python side -------------------------------------------------------------------------


class PythonSide:
    """picontext's equivalent of node/ops/sessiongen_ops.mjs#contextsOfFile."""

    def __init__(self, workdir: Path) -> None:
        from picontext.session.migrations import migrate_to_current
        from picontext.session.projection import LAST, build_session_context
        from picontext.session.store import load_file_entries

        self._load, self._migrate = load_file_entries, migrate_to_current
        self._build, self._last = build_session_context, LAST
        self._workdir = workdir

    def contexts_of_file(self, path: Path, leaves: list[Any]) -> dict[str, Any]:
        copy = self._workdir / "copy.jsonl"
        shutil.copyfile(path, copy)  # loading may repair the file; keep the input pristine
        file_entries = self._load(copy)
        if not file_entries:
            return {"invalid": True}
        self._migrate(file_entries)
        entries = [e for e in file_entries if not (isinstance(e, dict) and e.get("type") == "session")]
        out = []
        for leaf in leaves:
            target: Any = leaf
            if leaf == UNDEFINED:
                target = self._last
            elif isinstance(leaf, dict):
                i = leaf["index"]
                e = entries[i] if 0 <= i < len(entries) else None
                target = e.get("id", self._last) if isinstance(e, dict) else self._last
            try:
                out.append({"ok": self._build(entries, target)})
            except Exception as exc:  # compared with the reference's throw
                out.append({"error": f"{type(exc).__name__}: {exc}"})
        return {"contexts": out, "count": len(entries)}


@pytest.fixture(scope="module")
def py_side(tmp_path_factory: pytest.TempPathFactory) -> PythonSide:
    return PythonSide(tmp_path_factory.mktemp("py-side"))


@pytest.fixture(scope="module")
def gen_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sessiongen")


def compare_file(pi: PiReference, py: PythonSide, path: Path, leaves: list[Any], *, label: str) -> int:
    """Assert both sides agree on every leaf; return the number of leaves compared."""
    ref = pi.op("sessiongen_ops.contextsOfFile", str(path), leaves)
    got = py.contexts_of_file(path, leaves)
    if ref.get("invalid") or got.get("invalid"):
        assert ref.get("invalid") == got.get("invalid"), (
            f"{label}: validity differs: reference {ref!r:.300} picontext {got!r:.300}"
        )
        return 0
    assert ref["count"] == got["count"], f"{label}: entry count {ref['count']} != {got['count']}"
    problems = []
    for leaf, r, g in zip(leaves, ref["contexts"], got["contexts"], strict=True):
        if "error" in r or "error" in g:
            if ("error" in r) != ("error" in g):
                problems.append(f"leaf {leaf!r}: reference {r!r:.300} / picontext {g!r:.300}")
            continue
        d = first_difference(normalise(r["ok"]), normalise(g["ok"]))
        if d:
            problems.append(f"leaf {leaf!r}: {d}")
    assert not problems, f"{label} ({path}):\n  " + "\n  ".join(problems)
    return len(leaves)


# --- generated files -------------------------------------------------------------------------


def test_generator_is_deterministic() -> None:
    for seed in (0, 1, 7, 123):
        a, b = sessiongen.generate(seed), sessiongen.generate(seed)
        assert a.data == b.data and a.leaves == b.leaves


def test_generated_files_load_in_reference(pi: PiReference, gen_dir: Path) -> None:
    """Files meant to be valid are valid for the reference and project without throwing."""
    kinds: dict[str, int] = {}
    for seed in range(SEED0, SEED0 + SEEDS):
        g = sessiongen.generate(seed)
        kinds[g.kind] = kinds.get(g.kind, 0) + 1
        ref = pi.op("sessiongen_ops.contextsOfFile", str(g.write(gen_dir)), g.leaves)
        assert bool(ref.get("invalid")) == (not g.valid), (seed, g.kind, g.notes)
        if g.valid:
            errors = [c for c in ref["contexts"] if "error" in c]
            assert not errors, (seed, errors)
    assert {"v1", "v2", "v3"} <= set(kinds)


def test_batch_op_matches_session_op(pi: PiReference, gen_dir: Path) -> None:
    """sessiongen_ops.contextsOfFile answers like the shared session.contextOfFile op."""
    for seed in range(SEED0, SEED0 + 12):
        g = sessiongen.generate(seed)
        path = g.write(gen_dir)
        leaves = [leaf for leaf in g.leaves if not isinstance(leaf, dict)]
        batch = pi.op("sessiongen_ops.contextsOfFile", str(path), leaves)
        for leaf, ctx in zip(leaves, batch.get("contexts", [{}] * len(leaves)), strict=True):
            single = pi.op("session.contextOfFile", str(path), leaf)
            if batch.get("invalid"):
                assert single == {"invalid": True}
            else:
                assert single == ctx["ok"], (seed, leaf)


@pytest.mark.parametrize("seed", range(SEED0, SEED0 + SEEDS), ids=lambda s: f"seed{s}")
def test_generated_projection_matches_reference(seed: int, pi: PiReference, py_side: PythonSide, gen_dir: Path) -> None:
    g = sessiongen.generate(seed)
    compare_file(pi, py_side, g.write(gen_dir), g.leaves, label=f"seed {seed} ({g.kind}; {', '.join(g.notes)})")


# --- real sessions and the example -----------------------------------------------------------


@pytest.mark.parametrize("path", REAL_SESSIONS, ids=lambda p: p.name)
def test_real_session_projection_matches_reference(path: Path, pi: PiReference, py_side: PythonSide) -> None:
    """Real v1 sessions (ids minted by migration), ~50 leaves each picked by entry index."""
    count = pi.op("sessiongen_ops.contextsOfFile", str(path), [UNDEFINED])["count"]
    rng = random.Random(path.name)
    leaves: list[Any] = [UNDEFINED, None, "no-such-entry"]
    leaves += [{"index": i} for i in sorted(rng.sample(range(count), REAL_LEAVES))]
    leaves += [{"index": count - 1}, {"index": 0}]
    assert compare_file(pi, py_side, path, leaves, label=path.name) == len(leaves)


def test_example_session_matches_reference(pi: PiReference, py_side: PythonSide) -> None:
    ids = [json.loads(line)["id"] for line in EXAMPLE.read_text(encoding="utf-8").splitlines()[1:]]
    rng = random.Random(1)
    leaves = [UNDEFINED, None, *rng.sample(ids, 40)]
    compare_file(pi, py_side, EXAMPLE, leaves, label=EXAMPLE.name)


def test_example_session_is_reproducible(tmp_path: Path) -> None:
    out = tmp_path / "again.jsonl"
    subprocess.run([sys.executable, str(EXAMPLE_SCRIPT), str(out)], check=True)
    assert out.read_bytes() == EXAMPLE.read_bytes()


def test_example_session_projection_is_sensible(pi: PiReference) -> None:
    ctx = pi.op("session.contextOfFile", str(EXAMPLE), UNDEFINED)
    roles = [m["role"] for m in ctx["messages"]]
    assert roles[0] == "system" and roles[1] == "compactionSummary"
    assert "branchSummary" in roles and roles.count("toolResult") >= 10
    assert ctx["model"]["provider"] == "anthropic" and ctx["thinkingLevel"] == "high"


# --- the CLI ---------------------------------------------------------------------------------


def _reject(name: str) -> Any:
    raise ValueError(f"JSON.stringify never writes {name}")


def run_cli(path: Path, leaf: Any) -> Any:
    cmd = [sys.executable, "-m", "picontext", "context", str(path), "--json"]
    if leaf != UNDEFINED:
        cmd += ["--leaf", leaf]
    proc = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout, parse_constant=_reject)


@pytest.mark.parametrize("seed", CLI_SAMPLE, ids=lambda s: f"seed{s}")
def test_cli_context_matches_reference(seed: int, pi: PiReference, gen_dir: Path) -> None:
    g = sessiongen.generate(seed)
    path = g.write(gen_dir)
    if not g.valid:
        # The reference refuses the file too; the CLI says so in one line and exits 2.
        assert pi.op("session.contextOfFile", str(path), UNDEFINED) == {"invalid": True}
        proc = subprocess.run([sys.executable, "-m", "picontext", "context", str(path), "--json"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and proc.stdout == ""
        assert len(proc.stderr.strip().splitlines()) == 1 and "not a session file" in proc.stderr
        return
    # --leaf takes an id: null and index leaves are not expressible; v1 ids are random.
    leaves = [UNDEFINED] + ([leaf for leaf in g.leaves if isinstance(leaf, str) and leaf][:3] if g.kind != "v1" else [])
    for leaf in leaves:
        ref = pi.op("session.contextOfFile", str(path), leaf)
        d = first_difference(normalise(ref), normalise(run_cli(path, leaf)))
        assert d is None, f"seed {seed} leaf {leaf!r}: {d}"


@pytest.mark.parametrize("path", [*REAL_SESSIONS, EXAMPLE], ids=lambda p: p.name)
def test_cli_on_real_sessions(path: Path, pi: PiReference) -> None:
    ref = pi.op("session.contextOfFile", str(path), UNDEFINED)
    d = first_difference(normalise(ref), normalise(run_cli(path, UNDEFINED)))
    assert d is None, d

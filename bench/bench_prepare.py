"""prepare_compaction on 100k-entry sessions, picontext vs the Pi reference's prepareCompaction.

Both sides load the same generated file (bench/gen_sessions.py), resolve the branch of its last
entry once, then time only the planning call (projection, token estimate, cut point, spans, file
lists), best of --repeat. "live" is how a session calls it: the branch and the projection
come from an open SessionManager, which keeps the projection up to date as entries are
appended (spec 02 §11.1), so planning does not rebuild it. The reference runs in node in the same run, through
tests/differential/node/ops/compaction_ops.mjs#timePrepare. Both reports must be equal.

    python bench/bench_prepare.py [--entries 100000] [--repeat 5] [--keep 20000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OPS = HERE.parent / "tests" / "differential" / "node" / "ops" / "compaction_ops.mjs"
sys.path.insert(0, str(HERE))
from gen_sessions import generate  # noqa: E402
from picontext.compaction.prepare import preparation_report, prepare_compaction  # noqa: E402
from picontext.compaction.settings import CompactionSettings  # noqa: E402
from picontext.session.migrations import migrate_to_current  # noqa: E402
from picontext.session.projection import LAST, build_session_path  # noqa: E402
from picontext.session.store import load_file_entries  # noqa: E402


def python_live(path: Path, keep: int, repeat: int) -> dict:
    """The way the session calls it: branch and live projection from an open SessionManager."""
    from picontext.session.manager import SessionManager

    tmp = Path(tempfile.mkdtemp())
    copy = tmp / "s.jsonl"
    shutil.copy(path, copy)
    manager = SessionManager.open(str(copy), str(tmp))
    settings = CompactionSettings(keep_recent_tokens=keep)
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = prepare_compaction(manager.get_branch(), settings, projection=manager.build_session_projection())
        times.append((time.perf_counter() - t0) * 1000)
    shutil.rmtree(tmp)
    return {"times": times, "report": preparation_report(result)}


def python_side(path: Path, keep: int, repeat: int) -> dict:
    file_entries = load_file_entries(path)
    migrate_to_current(file_entries)
    entries = [e for e in file_entries if e.get("type") != "session"]
    branch = build_session_path(entries, LAST)
    settings = CompactionSettings(keep_recent_tokens=keep)
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = prepare_compaction(branch, settings)
        times.append((time.perf_counter() - t0) * 1000)
    return {"times": times, "report": preparation_report(result), "branchLength": len(branch)}


def reference_side(path: Path, keep: int, repeat: int) -> dict:
    script = (f"import {{ timePrepare }} from {json.dumps(OPS.as_uri())};"
              f"console.log(JSON.stringify(timePrepare({json.dumps(str(path))}, {keep}, {repeat})));")
    out = subprocess.run(["node", "--input-type=module", "-e", script], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=int, default=20_000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-prepare-"))
    try:
        print(f"prepare_compaction, {args.entries} entries, keepRecentTokens {args.keep}, best of {args.repeat}")
        print(f"{'session':<28}{'branch':>8}{'picontext ms':>14}{'reference ms':>14}{'ratio':>8}"
              f"{'live ms':>10}{'ratio':>8}")
        for label, every in (("compaction every 2400", 2400), ("never compacted", 0)):
            path = tmp / f"s-{every}.jsonl"
            generate(str(path), args.entries, every)
            py = python_side(path, args.keep, args.repeat)
            ref = reference_side(path, args.keep, args.repeat)
            live = python_live(path, args.keep, args.repeat)
            assert py["report"] == ref["report"] == live["report"], (py["report"], ref["report"])
            p, r, w = min(py["times"]), min(ref["times"]), min(live["times"])
            print(f"{label:<28}{py['branchLength']:>8}{p:>14.1f}{r:>14.1f}{p / r:>8.2f}{w:>10.1f}{w / r:>8.2f}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()

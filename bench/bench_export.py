"""`picontext export` vs Pi's `exportFromFile`, side by side on the realistic 100k session.

Not a test: numbers go to stdout (and docs/viewer.md). Each round runs both exports as whole
processes, one right after the other and in alternating order, so that the machine's load falls
on both alike; the report gives the median and best wall time of each side, their ratio, the
CPU time (user + system) and the load average at the start and end.

    .venv/bin/python bench/bench_export.py [--entries 100000] [--rounds 5] [--session FILE] [--baseline SRC]

Without `--session` the session is `bench/gen_realistic.py`'s (seed 1), generated once into
the temporary directory. The SHA-256 of our page is printed: every round must write the same page.
`--baseline SRC` also times `picontext export` run from another source tree (PYTHONPATH=SRC, e.g.
an export of the main branch's `src`) in the same rounds, and checks that it writes the same page.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gen_realistic import generate  # noqa: E402

PI_EXPORT = HERE.parent / "tests/differential/node/node_modules/@earendil-works/pi-coding-agent/dist/core/export-html"
NODE = """const { exportFromFile } = await import(process.argv[1] + "/index.js");
await exportFromFile(process.argv[2], { outputPath: process.argv[3] });"""


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall s, CPU s of the child and its own children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--session", help="an existing session file (default: generate the realistic one)")
    parser.add_argument("--baseline", metavar="SRC", help="also time picontext run from this source tree")
    args = parser.parse_args()
    picontext = str(Path(sys.executable).with_name("picontext"))
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        session = Path(args.session) if args.session else Path(tmp) / f"realistic{args.entries}.jsonl"
        if not args.session:
            generate(str(session), args.entries)
        ours, theirs, base = Path(tmp) / "ours.html", Path(tmp) / "pi.html", Path(tmp) / "baseline.html"
        runs: list[tuple[str, list[str], dict[str, str] | None]] = [
            ("picontext", [picontext, "export", str(session), "-o", str(ours)], None),
            ("pi", ["node", "--input-type=module", "-e", NODE, str(PI_EXPORT), str(session), str(theirs)], None)]
        if args.baseline:
            baseline_env = {**os.environ, "PYTHONPATH": str(Path(args.baseline).resolve())}
            runs.append(("baseline", [picontext, "export", str(session), "-o", str(base)], baseline_env))
        walls: dict[str, list[float]] = {name: [] for name, _, _ in runs}
        cpus: dict[str, list[float]] = {name: [] for name, _, _ in runs}
        pages: set[str] = set()
        for r in range(args.rounds):
            for name, cmd, env in runs if r % 2 == 0 else reversed(runs):
                wall, cpu = timed(cmd, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
            pages.add(hashlib.sha256(ours.read_bytes()).hexdigest())
            if args.baseline and base.read_bytes() != ours.read_bytes():
                sys.exit("the baseline wrote another page")
            print(f"round {r + 1}: " + ", ".join(f"{name} {walls[name][-1]:.2f} s" for name in walls)
                  + f" (load {os.getloadavg()[0]:.1f})", flush=True)
        med = {k: statistics.median(v) for k, v in walls.items()}
        row = {
            "entries": args.entries,
            "sessionMB": round(session.stat().st_size / 1e6, 1),
            "rounds": args.rounds,
            "medianS": {k: round(v, 2) for k, v in med.items()},
            "bestS": {k: round(min(v), 2) for k, v in walls.items()},
            "ratioMedian": round(med["picontext"] / med["pi"], 2),
            **({"baselineRatioMedian": round(med["baseline"] / med["pi"], 2)} if args.baseline else {}),
            "cpuMedianS": {k: round(statistics.median(v), 2) for k, v in cpus.items()},
            "pageMB": {"picontext": round(ours.stat().st_size / 1e6, 1), "pi": round(theirs.stat().st_size / 1e6, 1)},
            "pageSha256": sorted(pages),
            "load": [round(load0, 1), round(os.getloadavg()[0], 1)],
        }
        print(json.dumps(row), flush=True)
        if len(pages) != 1:
            sys.exit("the page differed between rounds")


if __name__ == "__main__":
    main()

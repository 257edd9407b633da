"""`picontext compact FILE --strategy mask` next to Pi's `prepareCompaction`, whole processes,
interleaved (issue 8's mask target: at most 2x Pi's time on a realistic 100k session).

Each round runs, one after the other, `picontext compact COPY --strategy mask` on a fresh copy
of the realistic session (`gen_realistic.py`) and `node pi_cli.mjs prepare FILE` (Pi's
`SessionManager.open` + `getBranch` + `prepareCompaction`: what Pi plans a compaction on; Pi has
no masking). Wall time and CPU time (user + system) come from `/usr/bin/time`; the table shows
the median and the best of the rounds and the ratios of both. Interleaving puts both sides under
the same machine load; the CPU ratio is the steadier one on a shared machine. Every picontext run
must report the same number of masks (checked).

    python bench/bench_mask.py --sizes 50000,100000 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gen_realistic import generate  # noqa: E402

# As installed: bytecode cached (a caller's PYTHONDONTWRITEBYTECODE would recompile every run).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """(wall s, user + system s, stdout) of one whole process."""
    with tempfile.NamedTemporaryFile() as out:
        proc = subprocess.run(["/usr/bin/time", "-f", "%e %U %S", "-o", out.name, *cmd], capture_output=True,
                              env=ENV, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd} failed: {proc.stderr[-500:]}")
        wall, user, system = Path(out.name).read_text().split()[-3:]
    return float(wall), float(user) + float(system), proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="50000,100000")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{args.rounds} interleaved rounds; load average before: {os.getloadavg()[0]:.2f}")
    print("| entries | file MB | masks | picontext wall s med (best) | Pi wall s med (best) | wall ratio med (best) "
          "| picontext CPU s med | Pi CPU s med | CPU ratio med |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in (int(s) for s in args.sizes.split(",") if s):
        source = Path(tempfile.gettempdir()) / f"picontext-bench-realistic-{size}.jsonl"
        if not source.exists():
            generate(str(source), size)
        ours: list[tuple[float, float]] = []
        pi: list[tuple[float, float]] = []
        masks: set[str] = set()
        with tempfile.TemporaryDirectory(prefix="bench-mask-") as tmp:
            copy = Path(tmp) / source.name
            for _ in range(args.rounds):
                shutil.copy(source, copy)
                wall, cpu, out = timed([sys.executable, "-m", "picontext", "compact", str(copy), "--strategy", "mask"])
                found = re.search(r"masked (\d+) tool results", out)
                assert found, out
                masks.add(found.group(1))
                ours.append((wall, cpu))
                wall, cpu, _ = timed(["node", str(HERE / "pi_cli.mjs"), "prepare", str(source)])
                pi.append((wall, cpu))
        assert len(masks) == 1, f"runs masked different counts: {masks}"

        def med(runs: list[tuple[float, float]], k: int) -> float:
            return statistics.median(r[k] for r in runs)

        def low(runs: list[tuple[float, float]], k: int) -> float:
            return min(r[k] for r in runs)

        print(f"| {size:,} | {source.stat().st_size / 1024 / 1024:.1f} | {masks.pop()} "
              f"| {med(ours, 0):.2f} ({low(ours, 0):.2f}) | {med(pi, 0):.2f} ({low(pi, 0):.2f}) "
              f"| {med(ours, 0) / med(pi, 0):.2f} ({low(ours, 0) / low(pi, 0):.2f}) "
              f"| {med(ours, 1):.2f} | {med(pi, 1):.2f} | {med(ours, 1) / med(pi, 1):.2f} |")


if __name__ == "__main__":
    main()

"""`picontext import` of a large Claude Code transcript: peak memory against the file's size.

    .venv/bin/python bench/bench_import.py [--mb 100] [--keep DIR]

Generates a transcript shaped like a real 2.x one (picontext.testing.transcripts), imports it in
a fresh interpreter and reports that process's peak RSS (VmHWM) next to the file size, with a tiny
transcript's import as the interpreter's floor.
Pi has no importer, so there is no reference to compare against.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from picontext.testing.transcripts import write_claude_code_transcript

# The import runs in a fresh interpreter that reports its own high-water mark (VmHWM, reset by
# exec); wait4's ru_maxrss would also count the RSS of the process that forked it.
_MEASURED = ("import sys\nfrom picontext.cli.main import main\ncode = main(sys.argv[1:])\n"
             "print(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')), file=sys.stderr)\n"
             "sys.exit(code)")


def run_import(source: Path, out: Path) -> tuple[int, float]:
    """(peak RSS in bytes, wall seconds) of one import process."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _MEASURED, "import", str(source), "-o", str(out)],
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"import failed: {proc.stderr}")
    line = next(line for line in proc.stderr.splitlines() if line.startswith("VmHWM"))
    return int(line.split()[1]) * 1024, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0, help="transcript size in MB (default 100)")
    parser.add_argument("--keep", help="write the transcript and sessions here instead of a temporary directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        small, large = root / "small.jsonl", root / "large.jsonl"
        write_claude_code_transcript(small, 20_000, seed=1)
        lines = write_claude_code_transcript(large, int(args.mb * 1_000_000), seed=2)
        floor, _ = run_import(small, root / "out-small")
        peak, seconds = run_import(large, root / "out-large")
        size = large.stat().st_size
        written = sum(p.stat().st_size for p in (root / "out-large").iterdir())
        mb = 1_000_000
        print(f"transcript: {size / mb:.1f} MB, {lines:,} lines -> sessions: {written / mb:.1f} MB")
        print("| import | peak RSS | peak / file size | time | throughput |")
        print("|---|---|---|---|---|")
        print(f"| tiny transcript (interpreter + picontext) | {floor / mb:.1f} MB | – | – | – |")
        print(f"| {size / mb:.0f} MB transcript | {peak / mb:.1f} MB | {peak / size:.2f}x | {seconds:.1f} s "
              f"| {size / mb / seconds:.1f} MB/s |")
        print(f"peak above the floor: {(peak - floor) / mb:.1f} MB ({(peak - floor) / size:.2f}x the file)")


if __name__ == "__main__":
    main()

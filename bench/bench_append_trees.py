"""Append + context, two source trees side by side (e.g. a branch and the commit before it).

    git archive <commit> src | tar -x -C /tmp/before
    .venv/bin/python bench/bench_append_trees.py /tmp/before/src src [--size 100000] [--compact-every 2500,0]

Same generated files, alternating fresh processes, best of `--repeat`: per call of
`append_message` + `build_session_context()`, wall and CPU time, for the first 100 appends
after opening and for 2,000 appends after warm-ups of 200 and 4,000. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gen_sessions import generate  # noqa: E402

PY = r"""
import json, shutil, sys, tempfile, time, os
src, n, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = tempfile.mkdtemp(); copy = os.path.join(d, "s.jsonl"); shutil.copy(src, copy)
from picontext.session.manager import SessionManager
sm = SessionManager.open(copy, d)
sm.build_session_context()
for i in range(warm):
    sm.append_message({"role": "user", "content": f"warm {i}", "timestamp": int(time.time() * 1000)})
    sm.build_session_context()
t0, c0 = time.perf_counter(), time.process_time()
for i in range(n):
    sm.append_message({"role": "user", "content": f"more {i}", "timestamp": int(time.time() * 1000)})
    sm.build_session_context()
print(json.dumps({"ms": (time.perf_counter() - t0) * 1000 / n, "cpu": (time.process_time() - c0) * 1000 / n}))
shutil.rmtree(d)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("before", help="the src/ directory of the tree to compare against")
    parser.add_argument("after", help="the src/ directory of the tree under test")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--compact-every", default="2500,0")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    trees = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    tmp = tempfile.mkdtemp(prefix="picontext-bench-")
    try:
        for every in map(int, args.compact_every.split(",")):
            path = os.path.join(tmp, f"s{args.size}-{every}.jsonl")
            generate(path, args.size, every)
            shape = f"compaction every {every}" if every else "never compacted"
            for n, warm in ((100, 0), (2000, 200), (2000, 4000)):
                runs: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
                for _ in range(args.repeat):
                    for name, src in trees.items():
                        out = subprocess.run([sys.executable, "-c", PY, path, str(n), str(warm)], check=True,
                                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": src})
                        runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
                best = {k: (min(r["ms"] for r in v), min(r["cpu"] for r in v)) for k, v in runs.items()}
                (bw, bc), (aw, ac) = best["before"], best["after"]
                print(f"{args.size} entries ({shape}), {n} appends after {warm}: before {bw:.3f} ms (CPU {bc:.3f}) | "
                      f"after {aw:.3f} ms (CPU {ac:.3f}) | ratio wall {aw / bw:.2f}, CPU {ac / bc:.2f} | "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Open + context and append + context, picontext vs the Pi reference, same files, same machine.

Each measurement runs in a fresh process (so peak RSS is that operation's), and reports the
ratio picontext / reference. Not a test: numbers go to stdout and docs/performance.md.

    .venv/bin/python bench/bench_session.py [--sizes 1000,10000,100000] [--repeat 3] [--compact-every 2500,0]

`--compact-every`: the session shapes, a compaction every N entries (0: never compacted, so the
context is the whole path: the case where a per-request copy of the context would show).
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

PY_OPEN = r"""
import json, shutil, sys, tempfile, time, os
def status(key):
    with open("/proc/self/status") as f:
        return int(f.read().split(key + ":")[1].split()[0]) * 1024
src = sys.argv[1]
d = tempfile.mkdtemp(); copy = os.path.join(d, "s.jsonl"); shutil.copy(src, copy)
from picontext.session.manager import SessionManager
open("/proc/self/clear_refs", "w").write("5")  # reset the high-water mark to the current RSS
rss0 = status("VmRSS")
t0 = time.perf_counter()
sm = SessionManager.open(copy, d)
ctx = sm.build_session_context()
ms = (time.perf_counter() - t0) * 1000
print(json.dumps({"ms": ms, "messages": len(ctx["messages"]), "peakRssDelta": status("VmHWM") - rss0}))
shutil.rmtree(d)
"""

PY_APPEND = r"""
import json, shutil, sys, tempfile, time, os
src, n = sys.argv[1], int(sys.argv[2])
d = tempfile.mkdtemp(); copy = os.path.join(d, "s.jsonl"); shutil.copy(src, copy)
from picontext.session.manager import SessionManager
sm = SessionManager.open(copy, d)
sm.build_session_context()
spent = 0.0  # in build_session_context alone
t0, c0 = time.perf_counter(), time.process_time()
for i in range(n):
    sm.append_message({"role": "user", "content": f"more {i}", "timestamp": int(time.time() * 1000)})
    t1 = time.perf_counter()
    sm.build_session_context()
    spent += time.perf_counter() - t1
print(json.dumps({"msPerAppend": (time.perf_counter() - t0) * 1000 / n, "msContext": spent * 1000 / n,
                  "cpuMsPerAppend": (time.process_time() - c0) * 1000 / n}))
shutil.rmtree(d)
"""


def run(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def best(cmds: list[str], repeat: int, key: str) -> dict:
    results = [run(cmds) for _ in range(repeat)]
    return min(results, key=lambda r: r[key])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--compact-every", default="2500")
    args = parser.parse_args()
    node = shutil.which("node")
    if node is None:
        sys.exit("node is needed to run the reference side")
    tmp = tempfile.mkdtemp(prefix="picontext-bench-")
    rows = []
    try:
        for size, every in [(size, every) for every in map(int, args.compact_every.split(","))
                            for size in map(int, args.sizes.split(","))]:
            path = os.path.join(tmp, f"s{size}-{every}.jsonl")
            generate(path, size, every)
            mb = os.path.getsize(path) / 1e6
            ours = best([sys.executable, "-c", PY_OPEN, path], args.repeat, "ms")
            ref = best([node, str(HERE / "ref_bench.mjs"), "open", path], args.repeat, "ms")
            ours_app = best([sys.executable, "-c", PY_APPEND, path, str(args.appends)], args.repeat, "msPerAppend")
            ref_app = best([node, str(HERE / "ref_bench.mjs"), "append", path, str(args.appends)], args.repeat,
                           "msPerAppend")
            assert ours["messages"] == ref["messages"], (ours, ref)
            rows.append((size, mb, ours, ref, ours_app, ref_app))
            shape = f"compaction every {every}" if every else "never compacted"
            print(f"{size:>7} entries ({shape}) {mb:6.1f} MB | "
                  f"open+context {ours['ms']:8.1f} ms vs ref {ref['ms']:8.1f} ms "
                  f"(x{ours['ms'] / ref['ms']:.2f}) | peak RSS +{ours['peakRssDelta'] / 1e6:6.1f} MB "
                  f"(x{ours['peakRssDelta'] / 1e6 / mb:.1f} file) vs ref +{ref['peakRssDelta'] / 1e6:6.1f} MB | "
                  f"append+context {ours_app['msPerAppend']:.3f} ms vs ref {ref_app['msPerAppend']:.3f} ms "
                  f"(x{ours_app['msPerAppend'] / ref_app['msPerAppend']:.3f}; CPU time "
                  f"{ours_app['cpuMsPerAppend']:.3f} ms vs ref {ref_app.get('cpuMsPerAppend', float('nan')):.3f} ms; "
                  f"the context alone "
                  f"{ours_app['msContext']:.4f} ms vs ref {ref_app['msContext']:.3f} ms)", flush=True)
        print(f"load average {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

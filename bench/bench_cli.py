"""Whole-process benchmarks of issue 8, picontext next to Pi (node, the 0.87.0 reference) in the
same run, on realistic sessions (`gen_realistic.py`) and the real Pi sessions:

* `picontext context FILE --json` vs `node pi_cli.mjs context FILE` (Pi's loadEntriesFromFile +
  buildSessionContext + JSON.stringify): wall time and peak RSS (`/usr/bin/time`), outputs equal;
  on the real Pi sessions as they are (legacy v1) and migrated to v3 (as Pi rewrites them on its
  first open), and on realistic generated ones;
* `picontext sessions --all --json` (second run: from the index cache) vs `SessionManager.listAll()`
  over N sessions of ~1 MB, same sessions and message counts;
* `picontext compact --strategy mask FILE` (a copy) vs Pi's `prepareCompaction` (node process).

    python bench/bench_cli.py --sizes 10000 --repeat 3 --list 50
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import picontext

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gen_realistic import generate  # noqa: E402

PY = [sys.executable, "-m", "picontext"]
NODE = ["node", str(HERE / "pi_cli.mjs")]
REAL = sorted((HERE.parent / "tests" / "fixtures" / "sessions" / "v1").glob("real-*.jsonl"))  # real Pi sessions


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int, bytes, float]:
    """(seconds, peak RSS bytes, stdout, CPU seconds: user + system, all threads) of one whole process."""
    with tempfile.NamedTemporaryFile() as out:
        proc = subprocess.run(["/usr/bin/time", "-f", "%e %M %U %S", "-o", out.name, *cmd], capture_output=True,
                              env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd} failed: {proc.stderr.decode()[-500:]}")
        seconds, kb, user, system = Path(out.name).read_text().split()[-4:]
    return float(seconds), int(kb) * 1024, proc.stdout, float(user) + float(system)


def home_env(home: str | Path, **extra: str) -> dict[str, str]:
    """The environment of a picontext whose sessions and caches are all under `home`: the caches
    live in picontext's cache directory (`PICONTEXT_CACHE_DIR`), not under `PICONTEXT_DIR`
    (before issue 19 they were in `PICONTEXT_DIR/index`: under `home` either way)."""
    return {**os.environ, "PICONTEXT_DIR": str(home), "PICONTEXT_CACHE_DIR": str(Path(home) / "cache"), **extra}


def best(cmd: list[str], repeat: int, env: dict[str, str] | None = None) -> tuple[float, int, bytes]:
    runs = [timed(cmd, env) for _ in range(repeat)]
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[-1][2]


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _append_like_pi(path: Path, n: int) -> bool:
    """One more user message as Pi appends it: a child of the file's last entry (False for a
    legacy file without ids, which Pi would upgrade first: not measured)."""
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - 65536))
        last = json.loads(f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1])
    if "id" not in last:
        return False
    line = {"type": "message", "id": f"bench{n:03d}", "parentId": last["id"], "timestamp": "2026-03-02T00:00:00.000Z",
            "message": {"role": "user", "content": f"one more question {n}", "timestamp": 1772409600000 + n}}
    with path.open("ab") as f:
        f.write(json.dumps(line, separators=(",", ":")).encode() + b"\n")
    return True


def bench_context(files: list[Path], repeat: int) -> None:
    """Per file, `repeat` rounds of four whole processes each, interleaved so machine load hits
    them alike: picontext cold (a fresh home: no index cache, it is built and written),
    picontext warm (the cache of an earlier call is there, the file unchanged), picontext after
    an append (on a copy: the cache of an earlier call, then one line appended as Pi appends it,
    so the cache is checked and extended) and Pi. Median and best wall time; peak RSS is the
    largest of the runs. CPU time (user + system, all threads: node's included) moves less with
    the machine's load than wall time; its ratio is printed last."""
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("| session | entries | file MB | cold s med/best | warm s med/best | after append s med | Pi s med/best "
          "| cold ratio med | warm ratio med (best) | after-append ratio med | cold RSS MB (x file) "
          "| warm RSS MB (x file) | Pi RSS MB (x file) | CPU s med cold / warm / Pi | cold CPU ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    mb = 1024 * 1024
    for path in files:
        size = path.stat().st_size
        entries = sum(1 for _ in path.open("rb")) - 1
        cmd = [*PY, "context", str(path), "--json"]
        warm_home = tempfile.mkdtemp(prefix="bench-ctx-warm-")
        warm_env = home_env(warm_home)
        copy = Path(warm_home) / f"copy-{path.name}"
        shutil.copy(path, copy)
        copy_cmd = [*PY, "context", str(copy), "--json"]
        timed(cmd, warm_env)  # builds the caches
        timed(copy_cmd, warm_env)
        cold, warm, appended, pi = [], [], [], []
        try:
            for n in range(repeat):
                cold_home = tempfile.mkdtemp(prefix="bench-ctx-cold-")
                try:
                    cold.append(timed(cmd, home_env(cold_home)))
                finally:
                    shutil.rmtree(cold_home)
                warm.append(timed(cmd, warm_env))
                if _append_like_pi(copy, n):
                    appended.append(timed(copy_cmd, warm_env))
                pi.append(timed([*NODE, "context", str(path)]))
            if appended:
                assert json.loads(appended[-1][2]) == json.loads(timed([*NODE, "context", str(copy)])[2])
        finally:
            shutil.rmtree(warm_home)
        expected = json.loads(pi[-1][2])
        assert json.loads(cold[-1][2]) == expected and json.loads(warm[-1][2]) == expected, f"contexts differ: {path}"
        c, w, a, p = ([r[0] for r in runs] for runs in (cold, warm, appended or [(float("nan"), 0, b"", 0.0)], pi))
        cpu = [_median([r[3] for r in runs]) for runs in (cold, warm, pi)]
        rss = [max(r[1] for r in runs) for runs in (cold, warm, pi)]
        print(f"| {path.name} | {entries:,} | {size / mb:.1f} | {_median(c):.2f} / {min(c):.2f} "
              f"| {_median(w):.2f} / {min(w):.2f} | {_median(a):.2f} | {_median(p):.2f} / {min(p):.2f} "
              f"| {_median(c) / _median(p):.2f} | {_median(w) / _median(p):.2f} ({min(w) / min(p):.2f}) "
              f"| {_median(a) / _median(p):.2f} | "
              + " | ".join(f"{r / mb:.0f} ({r / size:.1f})" for r in rss)
              + f" | {cpu[0]:.2f} / {cpu[1]:.2f} / {cpu[2]:.2f} | {cpu[0] / cpu[2]:.2f} |")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def bench_listing(count: int, repeat: int) -> None:
    home = Path(tempfile.mkdtemp(prefix="bench-list-"))
    try:
        directory = home / "sessions" / "--home-u-proj--"
        directory.mkdir(parents=True)
        for i in range(count):
            generate(str(directory / f"2026-03-01T10-00-00-{i:03d}Z_s{i}.jsonl"), 1300, seed=i)
        env = home_env(home, PI_CODING_AGENT_DIR=str(home))
        first = timed([*PY, "sessions", "--all", "--json"], env)
        ours = best([*PY, "sessions", "--all", "--json"], repeat, env)
        pi = best([*NODE, "list"], repeat, env)
        mine = {r["path"]: r["messages"] for r in json.loads(ours[2])}
        theirs = {r["path"]: r["messageCount"] for r in json.loads(pi[2])}
        assert mine == theirs, "listings differ"
        size = sum(p.stat().st_size for p in directory.iterdir()) / count / 1024 / 1024
        print(f"| {count} sessions of {size:.1f} MB | first run {first[0]:.2f} s | second run {ours[0]:.2f} s "
              f"| Pi listAll {pi[0]:.2f} s | ratio (second run) {ours[0] / pi[0]:.2f} |")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def bench_mask(files: list[Path], repeat: int) -> None:
    for path in files:
        ours_runs = []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                copy = Path(tmp) / path.name
                shutil.copy(path, copy)
                ours_runs.append(timed([*PY, "compact", str(copy), "--strategy", "mask"])[0])
        pi = best([*NODE, "prepare", str(path)], repeat)
        print(f"| {path.name} | picontext compact --strategy mask {min(ours_runs):.2f} s | Pi open+prepareCompaction "
              f"{pi[0]:.2f} s (prepare alone {json.loads(pi[2])['ms']:.0f} ms) | ratio {min(ours_runs) / pi[0]:.2f} |")


def real_v3(path: Path) -> Path:
    """A real legacy session as Pi leaves it after its first open: migrated to version 3 (ids and
    parents given to every entry) and written back, so `context --json` takes the entry columns'
    path on real content (a legacy file goes to the full reader)."""
    from picontext import _json
    from picontext.session.migrations import migrate_to_current
    from picontext.session.store import read_session_file

    out = Path(tempfile.gettempdir()) / f"picontext-bench-{path.stem}-v3.jsonl"
    if not out.exists():
        entries = read_session_file(str(path)).entries
        migrate_to_current(entries)
        out.write_bytes(b"".join(_json.dumps_line(e) for e in entries))
    return out


def compile_bytecode() -> None:
    """picontext as installed (pip compiles every module to bytecode at install): without the
    `.pyc` files, as in a checkout run with PYTHONDONTWRITEBYTECODE=1, every call would compile
    its ~20 modules from source first (~70-90 ms)."""
    compileall.compile_dir(str(Path(picontext.__file__).parent), quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--list", type=int, default=50, help="sessions to list (0: skip)")
    parser.add_argument("--skip", default="", help="comma list of: context,list,mask")
    args = parser.parse_args()
    skip = set(args.skip.split(","))
    compile_bytecode()
    files = []
    for size in (int(s) for s in args.sizes.split(",") if s):
        path = Path(tempfile.gettempdir()) / f"picontext-bench-realistic-{size}.jsonl"
        if not path.exists():
            generate(str(path), size)
        files.append(path)
    if "context" not in skip:
        bench_context([*REAL, *map(real_v3, REAL), *files], args.repeat)
    if args.list and "list" not in skip:
        bench_listing(args.list, args.repeat)
    if "mask" not in skip:
        bench_mask(files, args.repeat)


if __name__ == "__main__":
    main()

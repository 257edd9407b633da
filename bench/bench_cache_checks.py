"""The session caches' paths in one process, CPU time of the thread (min and median):
`indexed_columns` (what `context --json` does before reading lines) cold (no cache: built from
the file and written), warm (the cache valid) and after an append (on a copy: one line appended
as Pi appends it, then the cache checked and extended), and `indexed_facts` warm (what listing
does per session). Whole processes cannot show a few milliseconds on a loaded machine; this can.
Run it with the code to compare on `PYTHONPATH` (e.g. an export of main) and without, alternately:

    python bench/bench_cache_checks.py /tmp/picontext-bench-realistic-100000.jsonl FILE...

The files are never written (appends go to a copy); the caches go to a temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable


def cpu_ms(call: Callable[[], object], runs: int) -> tuple[float, float]:
    spent = []
    for _ in range(runs):
        start = time.thread_time_ns()
        call()
        spent.append(time.thread_time_ns() - start)
    return min(spent) / 1e6, statistics.median(spent) / 1e6


def main() -> None:
    home = tempfile.mkdtemp(prefix="bench-cache-checks-")
    os.environ["PICONTEXT_DIR"] = home  # where caches went before issue 19
    os.environ["PICONTEXT_CACHE_DIR"] = os.path.join(home, "cache")
    from picontext.session.store import indexed_columns, indexed_facts

    print(f"load average {os.getloadavg()[0]:.2f}")
    for path in sys.argv[1:]:
        view = indexed_columns(path)
        if view is not None:
            view.close()
        indexed_facts(path)

        def columns(path: str = path) -> None:
            view = indexed_columns(path)
            if view is not None:
                view.close()

        col = cpu_ms(columns, 60)
        facts = cpu_ms(lambda path=path: indexed_facts(path), 1000)  # type: ignore[misc]
        cold = cpu_ms(lambda path=path: _cold(path, home), 5)  # type: ignore[misc]
        appended = _after_appends(path, home, columns, 10)
        print(f"{os.path.basename(path)}: indexed_columns CPU ms (min / median) cold {cold[0]:.1f} / "
              f"{cold[1]:.1f}, warm {col[0]:.2f} / {col[1]:.2f}, after an append {appended[0]:.1f} / "
              f"{appended[1]:.1f}; indexed_facts warm CPU us {facts[0] * 1000:.0f} / {facts[1] * 1000:.0f}")


def _cold(path: str, home: str) -> None:
    from picontext.session.store import indexed_columns

    shutil.rmtree(os.path.join(home, "cache"), ignore_errors=True)
    shutil.rmtree(os.path.join(home, "index"), ignore_errors=True)
    view = indexed_columns(path)
    if view is not None:
        view.close()


def _after_appends(path: str, home: str, columns: Callable[[str], None], runs: int) -> tuple[float, float]:
    """One user message appended to a copy as Pi appends it (a child of the last entry), then the
    columns checked and extended: `runs` times, CPU of the check only."""
    copy = os.path.join(home, "copy-" + os.path.basename(path))
    shutil.copy(path, copy)
    columns(copy)
    spent = []
    for n in range(runs):
        with open(copy, "rb") as f:
            f.seek(max(0, os.path.getsize(copy) - 65536))
            last = json.loads(f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1])
        line = {"type": "message", "id": f"bench{n:03d}", "parentId": last.get("id"),
                "timestamp": "2026-03-02T00:00:00.000Z",
                "message": {"role": "user", "content": f"one more question {n}", "timestamp": 1772409600000 + n}}
        with open(copy, "ab") as f:
            f.write(json.dumps(line, separators=(",", ":")).encode() + b"\n")
        start = time.thread_time_ns()
        columns(copy)
        spent.append(time.thread_time_ns() - start)
    os.unlink(copy)
    return min(spent) / 1e6, statistics.median(spent) / 1e6


if __name__ == "__main__":
    main()

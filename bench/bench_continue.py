"""`picontext -p` continuing a long session, timed from the model server's side (issue 8).

A realistic session (`gen_realistic.py`) gets a compaction appended at its leaf that keeps
nothing, so the projected context is small (the summary and the new turn) however long the file
is: what grows with the session is then only what the agent does per request that should not.
Each run is one whole process,

    picontext -p "continue" --session COPY --model scripted/m1

against a `ScriptedModelServer` (127.0.0.1) that answers with `--tools` rounds of a `read` tool
call and then a text. The server stamps, with `time.monotonic()` (one clock for both processes),
when each request arrived and when its response had been written in full; from those:

* first request: process start (just before `Popen`) -> the first request's arrival;
* gap: a response's end -> the next request's arrival (the tool ran, the session was appended,
  the next request was built), median over the run's gaps;
* exit: the last response's end -> the process's exit (the after-run compaction check, closing).

Every size runs `--repeat` times, sizes interleaved, on a fresh copy each time; the table shows
the median of the runs (min-max in brackets), and the ratio of each size's median to the
smallest size's.

    python bench/bench_continue.py --sizes 1000,50000 --repeat 5 --tools 6
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gen_realistic import generate  # noqa: E402
from picontext.scripted import ScriptedModelServer, text, tool_call  # noqa: E402


def pinned_session(size: int, directory: Path) -> Path:
    """The realistic session of `size` entries plus a compaction at its leaf keeping nothing."""
    source = Path(tempfile.gettempdir()) / f"picontext-bench-realistic-{size}.jsonl"
    if not source.exists():
        generate(str(source), size)
    data = source.read_bytes()
    last = orjson.loads(data[data.rstrip(b"\n").rfind(b"\n") + 1 :])
    compaction = {"type": "compaction", "id": "c0ffee00", "parentId": last["id"],
                  "timestamp": "2026-03-30T12:00:00.000Z", "summary": "## Goal\nContinue the refactoring.",
                  "firstKeptEntryId": "c0ffee00", "tokensBefore": 180_000}
    pinned = directory / f"pinned-{size}.jsonl"
    pinned.write_bytes(data + orjson.dumps(compaction) + b"\n")
    return pinned


def one_run(pinned: Path, work: Path, server: ScriptedModelServer, env: dict[str, str], tools: int
            ) -> tuple[float, float, float, float]:
    """(first request s, median gap s, exit s, whole process s) of one `picontext -p` run."""
    copy = work / "session.jsonl"
    shutil.copy(pinned, copy)
    server.reset()
    server.expect(*[tool_call("read", {"path": "notes.txt"}) for _ in range(tools)], text("Done."))
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "picontext", "-p", "continue", "--session", str(copy),
                           "--model", "scripted/m1"], cwd=work, env=env, capture_output=True, timeout=300)
    end = time.monotonic()
    if proc.returncode != 0 or proc.stdout.decode().strip() != "Done.":
        raise RuntimeError(f"run failed ({proc.returncode}): {proc.stderr.decode()[-800:]}")
    server.assert_complete()
    requests = server.requests
    ends = [server.answered_at(r) for r in requests]
    assert None not in ends and len(requests) == tools + 1
    gaps = [requests[i + 1].received - ends[i] for i in range(tools)]  # type: ignore[operator]
    return requests[0].received - start, statistics.median(gaps), end - ends[-1], end - start  # type: ignore[operator]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,50000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tools", type=int, default=6, help="tool rounds per run (gaps measured: this many)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    results: dict[int, list[tuple[float, float, float, float]]] = {size: [] for size in sizes}
    with tempfile.TemporaryDirectory(prefix="bench-continue-") as tmp, ScriptedModelServer() as server:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        (work / "notes.txt").write_text("line one\nline two\n")
        provider = {"baseUrl": server.url + "/v1", "api": "openai-completions", "apiKey": "k",
                    "models": [{"id": "m1", "contextWindow": 200_000}]}
        (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))
        # As installed: bytecode cached (a PYTHONDONTWRITEBYTECODE of the caller would make every
        # run compile picontext's sources again).
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PYTHONDONTWRITEBYTECODE"}
        env["PICONTEXT_DIR"] = str(home)
        pinned = {size: pinned_session(size, Path(tmp)) for size in sizes}
        megabytes = {size: path.stat().st_size / 1024 / 1024 for size, path in pinned.items()}
        for size in sizes:  # warm-up, not counted: bytecode written, files in the page cache
            one_run(pinned[size], work, server, env, args.tools)
        for _ in range(args.repeat):
            for size in sizes:
                results[size].append(one_run(pinned[size], work, server, env, args.tools))

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.0f} ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"

    base = sizes[0]
    medians = {size: [statistics.median(r[k] for r in results[size]) for k in range(4)] for size in sizes}
    print(f"{args.repeat} runs per size, {args.tools} tool rounds per run; ms, median (min-max); ratio to {base:,}")
    print("| entries | file MB | first request | ratio | median gap | ratio | last response -> exit | whole run |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in sizes:
        runs = results[size]
        first, gap = medians[size][0], medians[size][1]
        print(f"| {size:,} | {megabytes[size]:.1f} | {cell([r[0] for r in runs])} | {first / medians[base][0]:.2f} "
              f"| {cell([r[1] for r in runs])} | {gap / medians[base][1]:.2f} | {cell([r[2] for r in runs])} "
              f"| {cell([r[3] for r in runs])} |")


if __name__ == "__main__":
    main()

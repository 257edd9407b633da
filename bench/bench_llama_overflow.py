"""The real llama.cpp overflow test, N times in a row: does every run recover, and how?

The scenario is `test_a_continuation_overflows_the_real_window_and_recovers_once` of
tests/integration/test_llama_server.py (imported, not copied): llama-cpp-python's server with
SmolLM2-135M and a 2,048-token window, temperature 0 and a fixed seed; a `-c -p` continuation
whose paste overflows the real window. Each run seeds a fresh session and counts as recovered
when the command exits 0 with one overflow compaction, the retried request answered, and Pi
reading the file identically. How the summary came about is counted too: the model's first
attempt, its retry, or the mechanical fallback.

With `--compare`, the same runs with `compaction.fallbackSummary: false` (the retry only, then
the compaction fails as in Pi): what the fallback adds.

    .venv/bin/python bench/bench_llama_overflow.py [--runs 20] [--compare]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "tests" / "differential"))

import test_llama_server as scenario  # noqa: E402

from picontext.testing.llama_server import LlamaServer  # noqa: E402


def one_run(home: Path, workdir: Path) -> tuple[bool, str, float, str]:
    """(recovered, how the summary came about, seconds, why not when it did not recover)."""
    began = time.monotonic()
    path, out = scenario.overflow_and_recover(home, workdir)
    seconds = time.monotonic() - began
    if out.returncode != 0:
        return False, "failed", seconds, (out.stderr.strip().splitlines() or ["?"])[-1]
    seen = scenario.events(out.stdout)
    rows = scenario.entries(path)
    outcome = scenario.summary_outcome(rows)
    plain = [r for r in rows if r["type"] != "custom"]
    starts = [e["reason"] for e in seen if e["type"] == "compaction_start"]
    answered = plain[-1]["type"] == "message" and plain[-1]["message"]["role"] == "assistant" \
        and plain[-1]["message"]["stopReason"] in ("stop", "length")
    if starts != ["overflow"] or not answered or scenario.kinds(plain)[-3:] != ["context_edit", "compaction",
                                                                                "assistant"]:
        return False, outcome, seconds, f"unexpected shape: {scenario.kinds(plain)[-5:]} {starts}"
    scenario.assert_pi_reads_it_identically(path)
    return True, outcome, seconds, ""


def series(llama: LlamaServer, runs: int, fallback: bool) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="bench-llama-home-"))
    workdir = Path(tempfile.mkdtemp(prefix="bench-llama-work-"))
    os.environ["PICONTEXT_DIR"] = str(home)
    scenario.configure(llama, scenario.SUMMARY_MAX_TOKENS)
    if not fallback:
        (home / "settings.json").write_text(json.dumps({"compaction": {
            "reserveTokens": scenario.RESERVE_TOKENS, "keepRecentTokens": 100, "fallbackSummary": False}}))
    outcomes: Counter[str] = Counter()
    recovered = 0
    times: list[float] = []
    reasons: Counter[str] = Counter()
    for n in range(runs):
        ok, how, seconds, why = one_run(home, workdir)
        recovered += ok
        outcomes[how] += 1
        times.append(seconds)
        if why:
            reasons[why[:160]] += 1
        print(f"  run {n + 1:>2}: {'recovered' if ok else 'FAILED   '} summary={how:<8} {seconds:6.1f} s"
              + (f"  {why[:120]}" if why else ""), flush=True)
    return {"runs": runs, "recovered": recovered, "outcomes": dict(outcomes),
            "median_s": sorted(times)[len(times) // 2], "max_s": max(times), "reasons": dict(reasons)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--compare", action="store_true", help="also run with compaction.fallbackSummary false")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with LlamaServer(n_ctx=scenario.N_CTX) as llama:
        modes = [("picontext (retry, then fallback)", True)] + ([("fallbackSummary false", False)] if args.compare
                                                                 else [])
        results = []
        for label, fallback in modes:
            print(f"{label}: {args.runs} runs", flush=True)
            results.append((label, series(llama, args.runs, fallback)))
    print(f"\nload average at the start: {load:.1f} on {os.cpu_count()} cores")
    print("| mode | runs | recovered | model's first summary | its retry | mechanical fallback | median s | max s |")
    print("|---|---|---|---|---|---|---|---|")
    for label, r in results:
        o = r["outcomes"]
        print(f"| {label} | {r['runs']} | {r['recovered']} | {o.get('model', 0)} | {o.get('retry', 0)} | "
              f"{o.get('fallback', 0)} | {r['median_s']:.1f} | {r['max_s']:.1f} |")
        for why, count in r["reasons"].items():
            print(f"  not recovered ({count}x): {why}")


if __name__ == "__main__":
    main()

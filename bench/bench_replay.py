"""The replay tables of docs/compaction.md ("Replay"): every strategy on the real sessions of
tests/fixtures/replay, per strategy tokens after against facts kept.

    .venv/bin/python bench/bench_replay.py                 # scripted summarizers (offline, ~2 min)
    .venv/bin/python bench/bench_replay.py --llama         # also SmolLM2-135M on llama.cpp (scripts/install/llama.sh)

Runs `picontext eval replay --json` as a subprocess per configuration and prints one Markdown
table per configuration. Long sessions (Pi's two, the compacted Claude Code one) use Pi's
settings (cut every 40000 tokens, keep 20000) and also keep 2000; short ones (three Claude Code
sessions, three SWE-agent trajectories) cut every 4000 and keep 1000. The llama run takes one
early cut of each SWE-agent trajectory, with the scripted summarizer on the same cuts beside it,
then lets SmolLM2 judge one of them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "replay"
LONG = [FIXTURES / "pi" / "real-before-compaction.jsonl", FIXTURES / "pi" / "real-large-session.jsonl",
        FIXTURES / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"]
SHORT = [*(FIXTURES / "claude-code" / n for n in ("tool_heavy.jsonl", "subagent.jsonl", "short.jsonl")),
         *sorted((FIXTURES / "swe-agent").glob("*.traj"))]
KINDS = ("task", "request", "read", "modified", "error", "next")
ORDER = ("none", "recorded", "mask", "summary-no-ledger", "summary", "mask-then-summary", "fallback")


def run(files: list[Path], *args: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "picontext", "eval", "replay", "--json", *map(str, files), *args],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def table(title: str, records: list[dict[str, Any]]) -> None:
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        rows[record["strategy"]].append(record)
    cuts = len({(r["session"], r["cut"]) for r in records})
    print(f"\n{title}: {cuts} cuts of {len({r['session'] for r in records})} sessions\n")
    print("| strategy | cuts | tokens after (mean) | after / before | facts kept | " + " | ".join(KINDS) + " |")
    print("|---|---|---|---|---|" + "---|" * len(KINDS))
    errors: list[str] = []
    for name in ORDER:
        group = rows.get(name)
        if not group:
            continue
        before = sum(r["tokensBefore"] for r in group)
        after = sum(r["tokensAfter"] for r in group)
        kept, total = sum(r["factsKept"] for r in group), sum(r["factsTotal"] for r in group)
        per = []
        for kind in KINDS:
            k = sum(r["factsByKind"].get(kind, {}).get("kept", 0) for r in group)
            t = sum(r["factsByKind"].get(kind, {}).get("total", 0) for r in group)
            per.append(f"{k}/{t}" if t else "–")
        failed = [r for r in group if r["error"] and not r["error"].startswith("nothing to compact")]
        note = f" ({len(failed)} failed)" if failed else ""
        errors += [f"{name}, {r['session']} cut {r['cut']}: {r['error']}" for r in failed]
        print(f"| {name}{note} | {len(group)} | {after // len(group):,} | {after / before:.0%} | "
              f"{kept}/{total} ({kept / total:.0%}) | " + " | ".join(per) + " |")
    for error in errors:
        print(f"\nfailed: {error}")
    seconds = sum(r["time"] for r in records)
    print(f"\n(compaction time, all records: {seconds:.1f} s)")


# A small real model on two shared cores evaluates 15-1000 prompt tokens a second depending on the
# load: one early cut of each SWE-agent trajectory, small spans.
LLAMA_ARGS = ("--every", "1500", "--max-cuts", "1", "--keep-recent-tokens", "500", "--reserve-tokens", "640",
              "--strategy", "none", "--strategy", "mask", "--strategy", "summary-no-ledger", "--strategy", "summary",
              "--strategy", "fallback")
TRAJECTORIES = sorted((FIXTURES / "swe-agent").glob("*.traj"))


def llama_runs() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the replay with SmolLM2 summarizing, one cut judged by SmolLM2)."""
    from picontext.testing.llama_server import LlamaServer

    with tempfile.TemporaryDirectory() as home, LlamaServer(n_ctx=4096) as server:
        Path(home, "models.json").write_text(json.dumps(server.models_json(max_tokens=512)))
        env = {**os.environ, "PICONTEXT_DIR": home}
        replayed = run(TRAJECTORIES, *LLAMA_ARGS, "--model", "llama/smollm2", env=env)
        judged = run([FIXTURES / "swe-agent" / "pydicom__pydicom-1458.traj"], "--every", "1500", "--max-cuts", "1",
                     "--keep-recent-tokens", "500", "--strategy", "mask", "--judge", "llama/smollm2", env=env)
        return replayed, judged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama", action="store_true", help="also replay with SmolLM2-135M on llama.cpp")
    parser.add_argument("--llama-only", action="store_true", help="only the llama.cpp tables")
    args = parser.parse_args()
    for summarizer in () if args.llama_only else ("extractive", "generic"):
        table(f"Long sessions, Pi's settings, scripted `{summarizer}`", run(LONG, "--summarizer", summarizer))
        table(f"Long sessions, keep 2000, scripted `{summarizer}`",
              run(LONG, "--summarizer", summarizer, "--keep-recent-tokens", "2000"))
        table(f"Short sessions, every 4000, keep 1000, scripted `{summarizer}`",
              run(SHORT, "--summarizer", summarizer, "--every", "4000", "--keep-recent-tokens", "1000"))
    if args.llama or args.llama_only:
        table("SWE-agent trajectories, one cut each (every 1500, keep 500), scripted `extractive`",
              run(TRAJECTORIES, *LLAMA_ARGS))
        replayed, judged = llama_runs()
        table("The same cuts, SmolLM2-135M on llama.cpp (n_ctx 4096) writing the summaries", replayed)
        for record in judged:
            print(f"\njudge (SmolLM2-135M) on {record['session']} cut {record['cut']} ({record['strategy']}): "
                  f"{json.dumps(record['judge'])}")


if __name__ == "__main__":
    main()

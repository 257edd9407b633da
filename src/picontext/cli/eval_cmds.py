"""`picontext eval compaction`: offline check of which planted facts each strategy keeps."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from picontext import _json
from picontext.cli.main import described
from picontext.compaction.evaluate import EVAL_STRATEGIES, PLANTED_FACTS, evaluate_compaction


def register(sub: Any) -> None:
    p = sub.add_parser("eval", help="offline evaluations (no model, no network)",
                       **described("Offline evaluations of the compaction strategies.", "picontext eval compaction"))
    groups = p.add_subparsers(dest="eval_command", metavar="WHAT", required=True)
    c = groups.add_parser("compaction", help="plant facts in scripted sessions; count what survives each strategy",
                          **described("Plant facts in scripted sessions, compact them with each strategy and count "
                                      "the facts that survive.", "picontext eval compaction --json"))
    c.add_argument("--rounds", type=int, default=10, help="compactions per session (default 10)")
    c.add_argument("--sessions", type=int, default=3, help="scripted sessions per strategy (default 3)")
    c.add_argument("--strategy", action="append", choices=EVAL_STRATEGIES,
                   help="only these strategies (repeatable; default all)")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.set_defaults(handler=cmd_eval_compaction)


def cmd_eval_compaction(args: argparse.Namespace) -> int:
    strategies = tuple(args.strategy) if args.strategy else EVAL_STRATEGIES
    scores = asyncio.run(evaluate_compaction(rounds=args.rounds, sessions=args.sessions, strategies=strategies))
    if args.json:
        sys.stdout.buffer.write(_json.dumps([s.to_json() for s in scores]) + b"\n")
        return 0
    print(f"{len(PLANTED_FACTS)} planted facts x {args.sessions} sessions, {args.rounds} compaction rounds each, "
          "scripted model writing poor summaries")
    for score in scores:
        lost = ", ".join(f"{name} ({n})" for name, n in score.lost.items()) or "-"
        print(f"  {score.strategy:<20} {score.survived:>3}/{score.total:<3} survive   "
              f"compactions {score.compactions:<4} lost: {lost}")
    return 0

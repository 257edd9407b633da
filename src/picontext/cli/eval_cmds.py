"""`picontext eval compaction`: which planted facts can still be answered after each strategy.

Offline by default (scripted summarizers of two qualities, a deterministic reader answers the
probes); `--model provider/id` runs it live: that model writes the summaries and answers.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from picontext import _json
from picontext.cli.main import described
from picontext.compaction.evaluate import (
    EVAL_STRATEGIES,
    FACT_KINDS,
    LEDGER_KINDS,
    SUMMARIZERS,
    RowScore,
    evaluate_compaction,
)


def register(sub: Any) -> None:
    p = sub.add_parser("eval", help="evaluations (offline unless a model is given)",
                       **described("Evaluations of the compaction strategies.", "picontext eval compaction"))
    groups = p.add_subparsers(dest="eval_command", metavar="WHAT", required=True)
    c = groups.add_parser("compaction", help="plant facts in seeded sessions; probe which survive each strategy",
                          **described("Plant facts in seeded sessions, compact them with each strategy and probe "
                                      "which facts survive.", "picontext eval compaction --json"))
    c.add_argument("--rounds", type=int, default=6, help="work rounds per session, each followed by a compaction")
    c.add_argument("--sessions", type=int, default=3, help="seeded sessions per row (default 3)")
    c.add_argument("--strategy", action="append", choices=EVAL_STRATEGIES,
                   help="only these strategies (repeatable; default all)")
    c.add_argument("--summarizer", action="append", choices=SUMMARIZERS,
                   help="only these scripted summarizers (repeatable; default all; ignored with --model)")
    c.add_argument("--model", help="live: this model (provider/id) summarizes and answers the probes")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.set_defaults(handler=cmd_eval_compaction)


def _live_model(ref: str) -> Any:
    from picontext.ai.auth import require_api_key
    from picontext.ai.models import default_catalog
    from picontext.compaction.completion import StreamCompletion

    model = default_catalog().get(ref)  # unknown model: one line, exit 2
    return StreamCompletion(model, api_key=require_api_key(model["provider"], model=model))


def cmd_eval_compaction(args: argparse.Namespace) -> int:
    strategies = tuple(args.strategy) if args.strategy else EVAL_STRATEGIES
    summarizers = tuple(args.summarizer) if args.summarizer else SUMMARIZERS
    model = _live_model(args.model) if args.model else None
    rows = asyncio.run(evaluate_compaction(rounds=args.rounds, sessions=args.sessions, strategies=strategies,
                                           summarizers=summarizers, model=model))
    if args.json:
        sys.stdout.buffer.write(_json.dumps([r.to_json() for r in rows]) + b"\n")
        return 0
    who = f"live model {args.model} summarizes and answers" if model else "scripted summarizers, offline reader"
    print(f"{len(FACT_KINDS)} kinds of facts x {args.sessions} sessions, {args.rounds} rounds each; {who}")
    print(f"  {'strategy / summarizer':<32} {'answered':>9} {'ledger kinds':>13} {'other kinds':>12} "
          f"{'tokens after':>13} {'compactions':>12}")
    for row in rows:
        print(_line(row))
        if row.lost:
            print("      lost: " + ", ".join(f"{name} ({n})" for name, n in row.lost.items()))
        for failure in row.failures[:2]:
            print(f"      failed compaction: {failure}")
    return 0


def _share(row: RowScore, kinds: Any) -> str:
    answered = sum(v[0] for k, v in row.by_kind.items() if k in kinds)
    total = sum(v[1] for k, v in row.by_kind.items() if k in kinds)
    return f"{answered}/{total}"


def _line(row: RowScore) -> str:
    tokens = round(sum(row.tokens_after) / len(row.tokens_after)) if row.tokens_after else 0
    others = set(FACT_KINDS) - LEDGER_KINDS
    return (f"  {row.label:<32} {f'{row.answered}/{row.total}':>9} {_share(row, LEDGER_KINDS):>13} "
            f"{_share(row, others):>12} {tokens:>13} {row.compactions:>12}")

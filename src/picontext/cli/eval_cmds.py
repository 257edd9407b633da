"""`picontext eval compaction`: which planted facts can still be answered after each strategy.
`picontext eval replay`: real sessions compacted at their own compactions and every N tokens.

Offline by default (scripted summarizers of two qualities, a deterministic reader answers the
probes); `--model provider/id` runs it live: that model writes the summaries and answers.
The replay's modules are loaded only when it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from picontext import _json
from picontext.compaction.evaluate import (
    EVAL_STRATEGIES,
    FACT_KINDS,
    LEDGER_KINDS,
    SUMMARIZERS,
    RowScore,
    evaluate_compaction,
)


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


# -- replay ---------------------------------------------------------------------------------------------


def _replay_sessions(files: list[str], fmt: str, tmp: str) -> list[Any]:
    """Each FILE as a replay session: Pi sessions as they are, transcripts imported into `tmp`."""
    from picontext.cli.base import CliError
    from picontext.compaction.replay import load_session
    from picontext.session.importers import detect_format, import_files
    from picontext.session.importers.output import ImportFailed
    from picontext.session.store import read_session_header

    sessions = []
    for path in files:
        try:
            header = read_session_header(path)
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror}") from None
        if header is not None:
            sessions.append(load_session(path))
            continue
        try:
            kind = detect_format(path) if fmt == "auto" else fmt
        except ImportFailed as exc:
            raise CliError(f"{exc} (not a session either)") from None
        imported = import_files([path], kind, out_dir=tmp)
        sessions += [load_session(s.path, source=path) for s in imported if s.parent_session is None]
    return sessions


def cmd_eval_replay(args: argparse.Namespace) -> int:
    import tempfile

    from picontext.cli.base import CliError
    from picontext.compaction.completion import ScriptedCompletion
    from picontext.compaction.evaluate import extractive_summary, generic_summary
    from picontext.compaction.replay import STRATEGIES, judge_with, replay
    from picontext.compaction.settings import CompactionSettings

    names = {s.name: s for s in STRATEGIES}
    unknown = [s for s in args.strategy or [] if s not in names]
    if unknown:
        raise CliError(f"unknown strategy {unknown[0]!r}; expected one of {', '.join(names)}")
    for flag in ("every", "keep_recent_tokens", "reserve_tokens", "window"):
        if getattr(args, flag) < 0:
            raise CliError(f"--{flag.replace('_', '-')} must not be negative")
    strategies = [s for s in STRATEGIES if not args.strategy or s.name in args.strategy]
    model = _live_model(args.model) if args.model else None
    judge = judge_with(_live_model(args.judge)) if args.judge else None
    summarizer = model or ScriptedCompletion(
        default=extractive_summary if args.summarizer == "extractive" else generic_summary,
        context_window=args.window)
    settings = CompactionSettings(keep_recent_tokens=args.keep_recent_tokens, reserve_tokens=args.reserve_tokens)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    async def run(sessions: list[Any]) -> list[Any]:
        records = []
        async for record in replay(sessions, strategies=strategies, completion=summarizer,
                                   summarizer=args.model or args.summarizer, every=args.every or None,
                                   max_cuts=args.max_cuts, settings=settings, window=args.window, judge=judge,
                                   progress=progress):
            if args.json:
                sys.stdout.buffer.write(_json.dumps_line(record.to_json()))
                sys.stdout.flush()
            records.append(record)
        return records

    with tempfile.TemporaryDirectory(prefix="picontext-replay-") as tmp:
        records = asyncio.run(run(_replay_sessions(args.files, args.format, tmp)))
    if not args.json:
        _print_replay(records, judged=judge is not None)
    return 0


def _print_replay(records: list[Any], *, judged: bool) -> None:
    """Per strategy over all cuts: tokens after as a share of before, facts kept (per kind)."""
    by_strategy: dict[str, list[Any]] = {}
    for record in records:
        by_strategy.setdefault(record.strategy, []).append(record)
    kinds = ("task", "request", "read", "modified", "error", "next")
    print(f"{len(records)} records: {len({(r.session, r.cut) for r in records})} cuts of "
          f"{len({r.session for r in records})} sessions")
    header = f"  {'strategy':<20} {'cuts':>5} {'tokens before':>14} {'tokens after':>13} {'after/before':>13} " \
             f"{'facts kept':>11} " + " ".join(f"{k:>9}" for k in kinds)
    print(header + ("   judge 0-5  next tool/target" if judged else ""))
    for name, rows in by_strategy.items():
        before = sum(r.tokens_before for r in rows)
        after = sum(r.tokens_after for r in rows)
        kept, total = sum(r.facts_kept for r in rows), sum(r.facts_total for r in rows)
        per_kind = []
        for kind in kinds:
            k = sum(r.by_kind.get(kind, [0, 0])[0] for r in rows)
            t = sum(r.by_kind.get(kind, [0, 0])[1] for r in rows)
            per_kind.append(f"{k}/{t}" if t else "-")
        line = (f"  {name:<20} {len(rows):>5} {before // len(rows):>14,} {after // len(rows):>13,} "
                f"{(after / before if before else 1):>12.0%} {f'{kept}/{total}':>11} "
                + " ".join(f"{p:>9}" for p in per_kind))
        failed = sum(1 for r in rows if r.error and not r.error.startswith("nothing to compact"))
        if judged:
            means = [r.judge["mean"] for r in rows if r.judge and r.judge.get("mean") is not None]
            agreement = [r.judge["nextAction"] for r in rows if r.judge and r.judge.get("nextAction")]
            tools = sum(1 for a in agreement if a["tool"])
            targets = sum(1 for a in agreement if a["target"])
            line += (f"   {sum(means) / len(means):>9.2f}" if means else f"   {'-':>9}") + \
                f"  {tools}/{len(agreement)} {targets}/{len(agreement)}"
        print(line)
        if failed:
            print(f"      {failed} compaction{'s' if failed != 1 else ''} failed: "
                  + next(r.error for r in rows if r.error and not r.error.startswith("nothing to compact")))

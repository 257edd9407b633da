"""`picontext compact FILE`: summarize or mask the old part of a session, appending to the file.

    picontext compact FILE --dry-run --json          what a compaction would do (nothing written)
    picontext compact FILE --strategy mask           mask old tool results, no model needed
    picontext compact FILE --model anthropic/claude-sonnet-4-5 [--instructions TEXT]

The library does the work (`picontext.compaction.compact.compact_session`); this module parses,
resolves model and settings, and prints.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from picontext import _json
from picontext.cli.loading import load_session, read_session
from picontext.cli.store_cmds import open_session, store_url
from picontext.compaction.compact import (
    CompactOutcome,
    compact_session,
    nothing_to_compact_reason,
    nothing_to_mask_reason,
)
from picontext.compaction.mask import plan_masks
from picontext.compaction.prepare import preparation_report, prepare_compaction
from picontext.compaction.settings import CompactionSettings, load_settings
from picontext.errors import ConfigError
from picontext.session.projection import build_session_path, build_session_projection


def _settings(args: argparse.Namespace, cwd: str, model_ref: str | None) -> CompactionSettings:
    overrides: dict[str, Any] = {}
    if args.keep_recent_tokens is not None:
        overrides["keepRecentTokens"] = args.keep_recent_tokens
    if args.reserve_tokens is not None:
        overrides["reserveTokens"] = args.reserve_tokens
    settings = load_settings(cwd)
    if overrides:
        settings = settings.with_overrides({"compaction": overrides}, "command line")
    return settings.compaction(model_ref)


def _write_json(value: Any) -> None:
    sys.stdout.buffer.write(_json.dumps(value) + b"\n")
    sys.stdout.flush()


def _completion(model_ref: str | None) -> Any:
    """A `StreamCompletion` for the summarizing model, with its key checked now (one line, exit 2
    when missing)."""
    if model_ref is None:
        return None
    from picontext.compaction.summary_model import summary_completion

    return summary_completion(model_ref)


def _dry_run(args: argparse.Namespace, settings_for: Any) -> int:
    """What the real run would do. When it would find nothing, the dry run says why on stderr
    and exits 2 as the real run does (`--json` still prints its `null` or `[]`)."""
    session = load_session(args.file)
    leaf = session.resolve_leaf(args.leaf)
    settings = settings_for(session.header.get("cwd"))
    if args.strategy == "mask":
        projection = build_session_projection(session.entries, leaf, session.by_id)
        masks: list[dict[str, Any]] = [
            {"targetId": m.target_id, "originalChars": m.original_chars, "tokensSaved": m.tokens_saved,
             "placeholder": m.placeholder} for m in plan_masks(projection, settings.keep_recent_tokens)]
        if args.json:
            _write_json(masks)
        elif masks:
            print(f"would mask {len(masks)} tool results, saving about {sum(m['tokensSaved'] for m in masks)} tokens")
        if not masks:
            print(f"picontext: {nothing_to_mask_reason(settings)}", file=sys.stderr)
            return 2
        return 0
    path = build_session_path(session.entries, leaf, session.by_id)
    report = preparation_report(prepare_compaction(path, settings))
    if args.json:
        _write_json(report)
    if report is None:
        print(f"picontext: {nothing_to_compact_reason(path, settings)}", file=sys.stderr)
        return 2
    if not args.json:
        split = " (split turn)" if report["isSplitTurn"] else ""
        print(f"would summarize {report['messagesToSummarize']} messages + {report['turnPrefixMessages']} turn-prefix "
              f"messages{split}; keep from {report['firstKeptEntryId']}; {report['tokensBefore']} tokens before")
    return 0


def _report(args: argparse.Namespace, outcome: CompactOutcome) -> None:
    details = outcome.summary.details if outcome.summary is not None else None
    fallback = details.get("fallback") if isinstance(details, dict) else None
    if args.json:
        _write_json({"strategy": outcome.strategy, "tokensBefore": outcome.tokens_before,
                     "tokensAfter": outcome.tokens_after, "appended": outcome.appended, "masked": outcome.masked,
                     "summarized": outcome.summary is not None, "note": outcome.note, "fallback": fallback})
        return
    done = []
    if outcome.masked:
        done.append(f"masked {outcome.masked} tool results")
    if outcome.summary is not None:
        how = "compacted with a mechanical summary" if fallback is not None else "summarized"
        done.append(f"{how} up to {outcome.summary.first_kept_entry_id}")
    print(f"{args.file}: {', '.join(done)}; tokens {outcome.tokens_before} -> {outcome.tokens_after} "
          "(chars/4 estimates of the context, as `picontext tokens` counts it now)")
    notice = None
    if details is not None:
        from picontext.compaction.fallback import fallback_notice  # the summary path's module (httpx)

        notice = fallback_notice(details)
    if notice:
        print(f"picontext: {notice}", file=sys.stderr)
    if outcome.note:
        print(f"note: {outcome.note}", file=sys.stderr)


def cmd_compact(args: argparse.Namespace) -> int:
    model_ref = args.model

    def settings_for(cwd: Any) -> CompactionSettings:
        return _settings(args, cwd if isinstance(cwd, str) and os.path.isdir(cwd) else os.getcwd(), model_ref)

    if args.dry_run:
        return _dry_run(args, settings_for)
    where, loaded = read_session(args.file)  # one-line errors before anything is opened for writing
    if store_url() is None:
        args.file = where  # an id, a prefix or nothing named this file
    manager = open_session(args.file, loaded)  # what was just read is not read again
    summary_ref = args.summary_model or settings_for(manager.get_cwd()).model or model_ref
    if args.strategy != "mask" and summary_ref is None:
        raise ConfigError(f"--strategy {args.strategy} needs a model: --model provider/id (or use --strategy mask)")
    completion = _completion(summary_ref) if args.strategy != "mask" else None
    if args.leaf is not None and manager.get_entry(args.leaf) is None:
        raise ConfigError(f"entry {args.leaf!r} not found in {args.file}")
    settings = settings_for(manager.get_cwd())
    thinking = manager.build_session_projection().thinking_level
    outcome = asyncio.run(compact_session(manager, strategy=args.strategy, completion=completion, settings=settings,
                                          instructions=args.instructions, leaf_id=args.leaf,
                                          thinking_level=thinking if isinstance(thinking, str) else None,
                                          fallback=not args.no_fallback))
    _report(args, outcome)
    return 0

"""`picontext tokens FILE [--leaf ID] [--json]`: how big the context of a branch is.

`--json` prints `{"estimate": <Pi estimateContextTokens of the context messages>, "perMessage":
[<Pi estimateTokens of each context message>]}`: the reference's numbers, key for key. The text
output adds the staleness-aware estimate (Pi estimateProjectedContextTokens), which is what
compaction decisions use, and how far chars/4 was from what the provider reported.

`--accuracy` compares, at every reply that reported usage, what chars/4 predicted (the previous
usage + chars/4 of the messages since) and what the per-model learned ratio predicted
(`picontext.compaction.calibration`) with the reported number; `--accuracy --json` prints
`{"rows": [...], "summary": {...}}`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from rich.text import Text

from picontext import _json
from picontext.cli import render
from picontext.cli.loading import load_session
from picontext.compaction.calibration import accuracy, summarize_accuracy
from picontext.compaction.tokens import (
    estimate_context_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
)
from picontext.session.projection import build_session_path, build_session_projection, field_of


def cmd_tokens(args: argparse.Namespace) -> int:
    session = load_session(args.file)
    leaf = session.resolve_leaf(args.leaf)
    projection = build_session_projection(session.entries, leaf, session.by_id)
    per_message = [estimate_tokens(m) for m in projection.messages]
    estimate = estimate_context_tokens(projection.messages)
    if args.accuracy:
        return _accuracy(args, projection.messages)
    if args.json:
        sys.stdout.buffer.write(_json.dumps({"estimate": estimate, "perMessage": per_message}) + b"\n")
        sys.stdout.flush()
        return 0
    path = build_session_path(session.entries, leaf, session.by_id)
    projected = estimate_projected_context_tokens(projection, path)
    out = render.console()
    anchor = estimate["lastUsageIndex"]
    if anchor is None:
        how = "no usable assistant usage: pure chars/4 estimate"
        if any(_reports_no_usage(m) for m in projection.messages):
            how = "estimated: the model server reported no token usage (pure chars/4 estimate)"
    else:
        how = f"usage {estimate['usageTokens']} at message {anchor} + {estimate['trailingTokens']} estimated after it"
    stale = _stale_anchor(projection, path, anchor) if projected["lastUsageIndex"] != anchor else None
    if stale is None:
        out.print(Text(f"{estimate['tokens']} tokens · {len(projection.messages)} messages · {how}", style="bold"))
    else:
        # Pi's estimateContextTokens (--json) trusts the newest reply's usage even when that reply
        # was kept by a later compaction or edit: the usage then measures a context that is gone.
        out.print(Text(f"{projected['tokens']} tokens now · {len(projection.messages)} messages · chars/4 estimate "
                       f"of the context as it is (what compactions decide on and report)", style="bold"))
        removed = "that compaction summarized" if stale.startswith("compaction") else "that edit took out"
        out.print(f"Pi's count (--json): {estimate['tokens']} tokens = {how}; that usage was reported before "
                  f"{stale}, so it still counts what {removed}")
    summary = summarize_accuracy(accuracy(projection.messages))
    if summary["samples"]:
        out.print(_accuracy_line(summary))
    index = 0
    for item in projection.entries:
        for message in item.messages:
            role = message.get("role", "?") if isinstance(message, dict) else "?"
            line = Text(f"{index:>4} {per_message[index]:>7}  ")
            line.append_text(render.role_text(str(role)))
            line.append(f" {field_of(item.source_entry, 'id')} ", style="dim")
            line.append(render.message_summary(message, 70))
            if index == anchor:
                line.append("  ← usage anchor", style="bold")
            out.print(line)
            index += 1
    return 0


def _stale_anchor(projection: Any, path: list[Any], anchor: int | None) -> str | None:
    """What made the usage anchor stale: `compaction 5b6fdd57` or `context edit 1c2d3e4f`, the
    newest such entry after the anchor's entry on the branch (None: the anchor is current)."""
    if anchor is None:
        return None
    start = 0
    source = None
    for item in projection.entries:
        if start <= anchor < start + len(item.messages):
            source = item.source_entry
            break
        start += len(item.messages)
    after = False
    newest = None
    source_id = field_of(source, "id") if source is not None else None
    for entry in path:
        if entry is source or (source_id is not None and field_of(entry, "id") == source_id):
            after = True
        elif after and field_of(entry, "type") in ("compaction", "context_edit"):
            newest = entry
    if newest is None:
        return None
    return f"{str(field_of(newest, 'type')).replace('_', ' ')} {field_of(newest, 'id')}"


def _reports_no_usage(message: Any) -> bool:
    """A finished reply whose usage is all zero: its server sends no usage (e.g. llama.cpp streams)."""
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return False
    if message.get("stopReason") in ("error", "aborted"):
        return False
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return True
    return not any(usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"))


def _accuracy_line(summary: dict[str, Any]) -> str:
    n = summary["samples"]
    return (f"estimate vs reported over {n} usage reports: chars/4 within ±15% on {summary['within']}/{n} "
            f"(median error {summary['medianError']:.1%}, trailing part {summary['medianTrailingError']:.1%}); "
            f"calibrated within ±15% on {summary['calibratedWithin']}/{n} "
            f"(median {summary['medianCalibratedError']:.1%}, "
            f"trailing part {summary['medianCalibratedTrailingError']:.1%})")


def _accuracy(args: argparse.Namespace, messages: Sequence[Any]) -> int:
    rows = accuracy(messages)
    summary = summarize_accuracy(rows)
    if args.json:
        sys.stdout.buffer.write(_json.dumps({"rows": rows, "summary": summary}) + b"\n")
        sys.stdout.flush()
        return 0
    out = render.console()
    out.print(Text(f"{'msg':>5} {'reported':>10} {'chars/4':>10} {'error':>8} {'calibrated':>11} {'error':>8} "
                   f"{'dense/words':>11}  model", style="bold"))
    for r in rows:
        ratios = f"{r['denseRatio']:.2f}/{r['wordRatio']:.2f}"
        out.print(f"{r['index']:>5} {r['reported']:>10} {r['estimate']:>10} {r['error']:>8.1%} {r['calibrated']:>11} "
                  f"{r['calibratedError']:>8.1%} {ratios:>11}  {r['model']}")
    out.print(_accuracy_line(summary) if rows else "no two consecutive usage reports of one model: nothing to compare")
    return 0

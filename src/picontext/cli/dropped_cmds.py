"""`picontext dropped FILE [--entry ID] [--leaf ID] [--json]`: what left the model's context.

Without `--entry`: every entry of the branch that a compaction summarized away (`compacted`), a
context edit hid (`omitted`, e.g. failed attempts) or rewrote (`replaced`, e.g. masks), with the
id of the compaction or edit responsible. With `--entry ID`: that entry's original text (the
file keeps everything; nothing is ever deleted). The file is only read.
"""

from __future__ import annotations

import argparse
import sys

import orjson

from picontext.cli.base import CliError
from picontext.cli.loading import load_session
from picontext.session.dropped import dropped_entries, entry_text, find_dropped


def cmd_dropped(args: argparse.Namespace) -> int:
    loaded = load_session(args.file)
    manager = loaded.manager
    if args.leaf is not None:
        loaded.resolve_leaf(args.leaf)
        manager.branch(args.leaf)
    if args.entry is not None:
        entry, record = find_dropped(manager, args.entry)
        if entry is None:
            raise CliError(f"entry {args.entry!r} not found in {args.file}")
        text = entry_text(entry)
        if args.json:
            out = {"id": args.entry, "text": text, "dropped": record.to_json() if record is not None else None}
            sys.stdout.buffer.write(orjson.dumps(out) + b"\n")
        else:
            if record is None:
                print(f"picontext: note: entry {args.entry} is still in the context", file=sys.stderr)
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return 0
    items = dropped_entries(manager)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps([d.to_json() for d in items]) + b"\n")
        return 0
    if not items:
        print("Nothing has left the context on this branch.")
        return 0
    for d in items:
        by = f" by {d.by}" if d.by else ""
        print(f"{d.entry_id}  {d.role:<10} {d.why}{by:<14} {d.chars:>8} chars  {d.preview}")
    return 0

"""`picontext export FILE [--leaf ID] [-o OUT]`: the session as one self-contained HTML file.

The page shows the entry tree (branches, labels, compactions, branch summaries, context edits,
the current leaf), every entry in full, search and Pi's filters, the context size per request
with threshold, window, compactions and overflow recoveries, what each compaction summarized,
and tokens and cost per model. Nothing is fetched when it is viewed. See docs/viewer.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from picontext._gc import gc_paused
from picontext.cli.base import CliError, hold_until_exit
from picontext.cli.loading import SessionOpenError, read_session
from picontext.errors import EntryNotFound
from picontext.session.migrations import migrate_to_current
from picontext.viewer.model import page_parts
from picontext.viewer.page import render_page_parts


def default_output(path: str) -> str:
    base = path[: -len(".jsonl")] if path.endswith(".jsonl") else path
    return base + ".html"


def _page(file_entries: list[Any], where: str, leaf: str | None, keep: list[Any]) -> list[bytes | memoryview]:
    """The page in the pieces that make it, written out as they are (never joined: ~40 MB for a
    100k-entry session)."""
    try:
        meta, packed = page_parts(file_entries, leaf, file_name=os.path.basename(where), keep=keep)
    except EntryNotFound:
        raise SessionOpenError(f"entry {leaf!r} not found in {where}") from None
    return render_page_parts(meta, b"", packed=packed)


def write_export(path: str | None, leaf: str | None, output: str | None, *, last: bool = False) -> str:
    """Export the session `path` names (a file, an id or a prefix); returns where the page went
    ("-" for stdout). `last`: the process ends after this (`picontext export`), so the parsed
    session need not be freed (`base.hold_until_exit`)."""
    # One collector pause for the whole read and build: the parsed session is gone (freed by
    # reference counting) when the collector runs again, instead of being rescanned after each
    # step (measured ~1 s of a 100k-entry export). The session is read lazily: bulky entries
    # stay lines until parsed, and their lines go into the page as read.
    with gc_paused():
        where, result = read_session(path)
        migrate_to_current(result.entries)
        parsed: list[Any] = [result]
        page = _page(result.entries, where, leaf, parsed)
        if last:
            hold_until_exit(parsed)
        del result, parsed  # unless held: freed here, in the pause
    out = output or default_output(where if path is None else path)
    if out == "-":
        sys.stdout.flush()
        sys.stdout.buffer.writelines(page)
        sys.stdout.buffer.flush()
        return out
    tmp = f"{out}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.writelines(page)
        os.replace(tmp, out)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise CliError(f"cannot write {out}: {exc.strerror}") from None
    return out


def cmd_export(args: argparse.Namespace) -> int:
    out = write_export(args.file, args.leaf, args.output, last=True)
    if out != "-":
        print(f"wrote {out}", file=sys.stderr)
    return 0

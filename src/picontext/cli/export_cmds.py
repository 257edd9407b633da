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

from picontext._gc import gc_paused
from picontext.cli.base import CliError
from picontext.cli.loading import LoadedSession, load_session
from picontext.viewer.model import page_data
from picontext.viewer.page import render_page_bytes


def default_output(path: str) -> str:
    base = path[: -len(".jsonl")] if path.endswith(".jsonl") else path
    return base + ".html"


def export_html(session: LoadedSession, leaf: str | None = None) -> bytes:
    """The page for a loaded session, as UTF-8 (also written by `/export` in the chat)."""
    if leaf is not None:
        session.resolve_leaf(leaf)
    meta, packed = page_data(session.file_entries, leaf, file_name=os.path.basename(session.path))
    return render_page_bytes(meta, b"", packed=packed)


def write_export(path: str, leaf: str | None, output: str | None) -> str:
    """Export the session file at `path`; returns where the page went ("-" for stdout)."""
    # One collector pause for the whole read and build: the parsed session is gone (freed by
    # reference counting) when the collector runs again, instead of being rescanned after each
    # step (measured ~1 s of a 100k-entry export).
    with gc_paused():
        page = export_html(load_session(path), leaf)
    out = output or default_output(path)
    if out == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(page)
        sys.stdout.buffer.flush()
        return out
    tmp = f"{out}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(page)
        os.replace(tmp, out)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise CliError(f"cannot write {out}: {exc.strerror}") from None
    return out


def cmd_export(args: argparse.Namespace) -> int:
    out = write_export(args.file, args.leaf, args.output)
    if out != "-":
        print(f"wrote {out}", file=sys.stderr)
    return 0

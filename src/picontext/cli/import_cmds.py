"""`picontext import`: Claude Code transcripts and SWE-agent trajectories as Pi sessions.

The importers (picontext.session.importers) are loaded only when the command runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from picontext import _json
from picontext.cli.main import described

FORMAT_CHOICES = ("auto", "claude-code", "swe-agent")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "import", help="Claude Code transcripts and SWE-agent trajectories as Pi sessions",
        **described("Write each transcript as a Pi v3 session (Claude Code: with its subagents' transcripts found "
                    "beside it, each a session linked to its parent). Sessions go to the directory of their "
                    "working directory under PICONTEXT_DIR/sessions, or to -o DIR. All files are written, or, "
                    "on the first bad line, none (docs/import.md).",
                    "picontext import ~/.claude/projects/-home-me-app/0a6afc57-2f31-4cb4-8ff0-01247f50c64c.jsonl",
                    "picontext import --from swe-agent trajectories/me/run/*/*.traj -o imported/"))
    p.add_argument("files", nargs="+", metavar="FILE", help="transcripts to import")
    p.add_argument("--from", dest="format", choices=FORMAT_CHOICES, default="auto",
                   help="the transcripts' format (default: recognised from each file)")
    p.add_argument("-o", "--output", metavar="DIR", help="write the sessions into DIR")
    p.add_argument("--force", action="store_true", help="replace sessions imported before")
    p.add_argument("--json", action="store_true", help="one JSON object per written session")
    p.set_defaults(handler=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    from picontext.session.importers import import_files

    sessions = import_files(args.files, args.format, out_dir=args.output, force=args.force)
    for s in sessions:
        if args.json:
            sys.stdout.buffer.write(_json.dumps_line({
                "source": s.source, "format": s.format, "path": s.path, "sessionId": s.session_id,
                "entries": s.entries, "parentSession": s.parent_session}))
        else:
            linked = f" (a subagent of {os.path.basename(s.parent_session)})" if s.parent_session else ""
            print(f"{s.source} -> {s.path}: {s.entries} entries{linked}")
    if not args.json:
        print(f"{len(sessions)} session{'s' if len(sessions) != 1 else ''} written", file=sys.stderr)
    return 0

"""`picontext import`: Claude Code transcripts and SWE-agent trajectories as Pi sessions.

The importers (picontext.session.importers) are loaded only when the command runs.
"""

from __future__ import annotations

import argparse
import os
import sys

from picontext import _json

FORMAT_CHOICES = ("auto", "claude-code", "swe-agent")


def cmd_import(args: argparse.Namespace) -> int:
    from picontext.cli.repo import repository
    from picontext.session.importers import import_files

    sessions = import_files(args.files, args.format, out_dir=args.output, force=args.force,
                            repository=None if args.output else repository())
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

"""`picontext serve [--dir DIR] [--all] [--host H] [--port N]`: browse sessions in a local web viewer.

Lists the sessions of the current project (or of DIR, or of every project with --all); each
opens the `picontext export` page, which refreshes itself while the session grows. The sessions
are the repository's (`--store URL` / PICONTEXT_STORE, default the session files); `--dir DIR`
lists a directory of session files instead.
Binds 127.0.0.1 unless --host says otherwise. See docs/viewer.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from picontext.cli.main import CliError, described
from picontext.cli.repo import chosen_url, repository
from picontext.session.protocol import SessionStore
from picontext.session.repository import SessionInfo, list_directory
from picontext.viewer.server import ViewerServer, file_store


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="local web viewer over the sessions of a directory (127.0.0.1)",
                       **described("A local web viewer: the sessions of this project (or DIR, or all), each "
                                   "opening the export page, redrawn while the session grows (docs/viewer.md).",
                                   "picontext serve", "picontext serve --dir ~/.pi/agent/sessions/--home-me-app-- "
                                   "--port 0"))
    p.add_argument("--dir", help="a session directory (default: this project's sessions)")
    p.add_argument("--all", action="store_true", help="sessions of every project")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only; ::1 for IPv6)")
    p.add_argument("--port", type=int, default=8377, help="port (default 8377; 0 picks a free one)")
    p.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    cwd = os.getcwd()
    if args.dir is not None and not os.path.isdir(args.dir):
        raise CliError(f"no such directory: {args.dir}")
    if args.dir is not None and chosen_url() is not None:
        raise CliError("--dir names a directory of session files; with --store the store's sessions are listed")
    if args.dir is not None:  # a directory of session files, whatever project they belong to
        def lister() -> list[SessionInfo]:
            return list_directory(args.dir)

        where = args.dir
        store_of = file_store
    else:
        repo = repository()

        def lister() -> list[SessionInfo]:
            return repo.list(None if args.all else cwd)

        def store_of(info: SessionInfo) -> SessionStore:
            return repo.store(info.file or info.id)

        where = f"{repo}, " + ("all projects" if args.all else cwd)
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port must be 0 to 65535 (0 picks a free one), not {args.port}")
    try:
        server = ViewerServer(lister, where, args.host, args.port, store_of=store_of)
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    print(f"picontext viewer on {server.url} ({where}); Ctrl-C stops it", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
    print("stopped", file=sys.stderr)
    return 0

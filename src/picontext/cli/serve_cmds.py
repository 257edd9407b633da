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

from picontext.cli.base import CliError
from picontext.cli.repo import chosen_url, repository
from picontext.session.protocol import SessionStore
from picontext.session.repository import SessionInfo, list_directory
from picontext.viewer.server import ViewerServer, file_store


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

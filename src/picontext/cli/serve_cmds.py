"""`picontext serve [--dir DIR] [--all] [--host H] [--port N]`: browse sessions in a local web viewer.

Lists the sessions of the current project (or of DIR, or of every project with --all); each
opens the `picontext export` page, which refreshes itself while the session grows. With a
session database (`--store URL` / PICONTEXT_STORE) it lists and shows the database's sessions.
Binds 127.0.0.1 unless --host says otherwise. See docs/viewer.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from picontext.cli.base import CliError
from picontext.errors import PicontextError
from picontext.session.listing import SessionInfo, list_all_sessions, list_sessions
from picontext.viewer.server import SessionSource, ViewerServer, view_of


class _StoreSource:
    """The sessions of a session database; a listed location is `<database>#<session id>`."""

    def __init__(self, db: Any) -> None:
        self.db = db

    def _store(self, location: str) -> Any:
        from picontext.session.postgres.store import PgSessionStore

        return PgSessionStore(self.db, location.rsplit("#", 1)[1])

    def exists(self, location: str) -> bool:
        return bool(self._store(location).exists())

    def stamp(self, location: str) -> str:
        tail = self._store(location).tail()
        if tail is None:
            raise PicontextError(f"no longer in the database: {location}")
        return f"{tail.generation}-{tail.offset}"

    def view(self, location: str) -> tuple[dict[str, Any], list[bytes]]:
        return view_of(self._store(location).load(), location.rsplit("#", 1)[1], f"not a session: {location}")


def cmd_serve(args: argparse.Namespace) -> int:
    from picontext.cli.store_cmds import open_database, store_url

    cwd = os.getcwd()
    if args.dir is not None and not os.path.isdir(args.dir):
        raise CliError(f"no such directory: {args.dir}")
    url = store_url()
    source: SessionSource | None = None
    if url is not None:
        from picontext.session.postgres.listing import list_sessions as list_stored

        if args.dir is not None:
            raise CliError("--dir names a directory of session files; with --store the database is listed")
        db = open_database(url)
        source = _StoreSource(db)

        def lister() -> list[SessionInfo]:
            return list_stored(db, None if args.all else cwd)

        where = f"{db.display}, " + ("all projects" if args.all else cwd)
    else:
        def lister() -> list[SessionInfo]:
            if args.all or args.dir is not None:
                return list_all_sessions(args.dir)
            return list_sessions(cwd)

        where = args.dir or ("all projects" if args.all else cwd)
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port must be 0 to 65535 (0 picks a free one), not {args.port}")
    try:
        server = ViewerServer(lister, where, args.host, args.port, source)
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

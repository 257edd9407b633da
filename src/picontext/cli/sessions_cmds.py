"""`picontext sessions [--all]`: the sessions of this directory (or all), newest first."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime

from rich.table import Table

from picontext import _json
from picontext.cli import render
from picontext.cli.base import CliError
from picontext.session.listing import list_all_sessions, list_sessions
from picontext.session.paths import sessions_root


def _ago(when: datetime) -> str:
    seconds = (datetime.now(tz=UTC) - when).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return "just now"


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def cmd_sessions(args: argparse.Namespace) -> int:
    from picontext.cli.store_cmds import open_database, store_url

    cwd = os.getcwd()
    url = store_url()
    if args.dir is not None and not os.path.isdir(args.dir):
        raise CliError(f"no such directory: {args.dir}" if not os.path.exists(args.dir)
                       else f"not a directory: {args.dir}")
    if url is not None:  # the session database (--store URL): one query over the session rows
        from picontext.session.postgres.listing import list_sessions as list_stored

        if args.dir is not None:
            raise CliError("--dir names a directory of session files; with --store the database is listed")
        infos = list_stored(open_database(url), None if args.all else cwd)
    elif args.dir is not None or args.all:  # a directory named: all of its sessions, whatever their cwd
        infos = list_all_sessions(args.dir)
    else:
        infos = list_sessions(cwd)
    if args.json:
        rows = [{"path": i.path, "id": i.id, "cwd": i.cwd, "name": i.name, "entries": i.entry_count,
                 "messages": i.message_count, "size": i.size, "modified": i.modified.isoformat(),
                 "firstMessage": i.first_message} for i in infos]
        print(_json.dumps(rows).decode())  # lone surrogates escaped as JSON.stringify does (orjson refuses them)
        return 0
    out = render.console()
    if not infos:
        out.print(_why_empty(args, cwd, url))
        return 0
    every_cwd = args.all or args.dir is not None
    table = Table(box=None, pad_edge=False)
    for col in ("name / first message", "entries", "size", "last activity", "id"):
        table.add_column(col, overflow="ellipsis", no_wrap=True)
    if every_cwd:
        table.add_column("cwd", overflow="ellipsis", no_wrap=True)
    for i in infos:
        row = [render.short(i.name or i.first_message, 50), str(i.entry_count), _size(i.size),
               _ago(i.modified), i.id[:13]]
        if every_cwd:
            row.append(i.cwd)
        table.add_row(*row)
    out.print(table)
    return 0


def _why_empty(args: argparse.Namespace, cwd: str, url: str | None) -> str:
    """An empty listing says what was looked at, and where else to look."""
    if args.dir is not None:
        return f"no sessions in {args.dir} (no .jsonl file in it starts with a session header)"
    if url is not None:
        return "no sessions in the database" + ("" if args.all else f" for the directory {cwd} (--all lists every one)")
    if args.all:
        return f"no sessions under {sessions_root()}"
    return (f"no sessions for the directory {cwd}: only sessions started here are listed "
            f"(--all lists every project's, --dir DIR a directory of session files)")

"""`picontext sessions [--all]`: the sessions of this directory (or all), newest first."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from typing import Any

import orjson
from rich.table import Table

from picontext.cli import render
from picontext.session.listing import list_all_sessions, list_sessions


def register(sub: Any) -> None:
    p = sub.add_parser("sessions", help="sessions of the current directory (or --all), newest first")
    p.add_argument("--all", action="store_true", help="sessions of every project")
    p.add_argument("--dir", help="a session directory to list instead of the per-project default")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_sessions)


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
    if url is not None:  # the session database (--store URL): one query over the session rows
        from picontext.session.postgres.listing import list_sessions as list_stored

        infos = list_stored(open_database(url), None if args.all else cwd)
    else:
        infos = list_all_sessions(args.dir) if args.all else list_sessions(cwd, args.dir)
    if args.json:
        rows = [{"path": i.path, "id": i.id, "cwd": i.cwd, "name": i.name, "entries": i.entry_count,
                 "messages": i.message_count, "size": i.size, "modified": i.modified.isoformat(),
                 "firstMessage": i.first_message} for i in infos]
        print(orjson.dumps(rows).decode())
        return 0
    out = render.console()
    if not infos:
        out.print("no sessions" + ("" if args.all else f" for {cwd} (try --all)"))
        return 0
    table = Table(box=None, pad_edge=False)
    for col in ("name / first message", "entries", "size", "last activity", "id"):
        table.add_column(col, overflow="ellipsis", no_wrap=True)
    if args.all:
        table.add_column("cwd", overflow="ellipsis", no_wrap=True)
    for i in infos:
        row = [render.short(i.name or i.first_message, 50), str(i.entry_count), _size(i.size),
               _ago(i.modified), i.id[:13]]
        if args.all:
            row.append(i.cwd)
        table.add_row(*row)
    out.print(table)
    return 0

"""The session store a command works on, and `picontext store import|export`.

`PICONTEXT_STORE=postgresql://...` or `--store URL` (anywhere on the command line, for every
command) selects the PostgreSQL store; commands then take a session id or a unique prefix of one
where they take a file, and `picontext sessions` lists the database. Without either, sessions are
JSONL files as always.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from picontext.errors import PicontextError

STORE_ENV = "PICONTEXT_STORE"


class StoreError(PicontextError):
    """An expected failure of a store command (one line on stderr, exit 2)."""


def apply_store_flag(argv: Sequence[str]) -> list[str]:
    """Take `--store URL` / `--store=URL` out of the arguments (it is valid on every command, in
    any position) and make it the store of this process."""
    out: list[str] = []
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out += args[i:]
            break
        if arg == "--store" and i + 1 < len(args):
            os.environ[STORE_ENV] = args[i + 1]
            i += 2
            continue
        if arg.startswith("--store="):
            os.environ[STORE_ENV] = arg.split("=", 1)[1]
            i += 1
            continue
        out.append(arg)
        i += 1
    return out


def store_url() -> str | None:
    """The store URL in effect, or None for JSONL files; anything else is refused in one line."""
    url = os.environ.get(STORE_ENV, "").strip()
    if not url:
        return None
    if not url.startswith(("postgresql://", "postgres://")):
        raise StoreError(f"unsupported {STORE_ENV} {url!r}: expected a postgresql:// URL")
    return url


def open_database(url: str) -> Any:
    from picontext.session.postgres import database

    quiet_driver_logs()
    return database(url)


def quiet_driver_logs() -> None:
    """The CLI reports a database failure in one line of its own; psycopg_pool's log lines
    (failed reconnections, discarded connections, worker threads not stopped at once) would print
    before it through logging's last-resort handler. Library users keep them."""
    import logging

    logger = logging.getLogger("psycopg.pool")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


def resolve(url: str, ref: str) -> Any:
    """The store of the session `ref` names (an id or a unique prefix of one)."""
    from picontext.session.postgres import PgSessionStore
    from picontext.session.postgres.listing import resolve_session

    db = open_database(url)
    return PgSessionStore(db, resolve_session(db, ref))


def open_session(ref: str, loaded: Any = None) -> Any:
    """A writable SessionManager for a session file, or (with a store) a session id or prefix.
    `loaded`: the session as the caller just read it (`loading.read_session`), not read again."""
    from picontext.session.manager import SessionManager

    url = store_url()
    if url is None:
        return SessionManager.open(ref, loaded=loaded)
    from picontext.session.postgres import store_factory

    store = resolve(url, ref)
    return SessionManager.open(store.session_id, store_factory=store_factory(store.db), loaded=loaded)


def open_stored_manager(args: argparse.Namespace, cwd: str, url: str) -> Any:
    """The chat's and print mode's session choice (--session, -c, -r, new) in the database."""
    from picontext.cli.base import flag
    from picontext.cli.modes.pickers import pick_session
    from picontext.session import paths
    from picontext.session.manager import SessionManager
    from picontext.session.postgres import store_factory
    from picontext.session.postgres.listing import SessionNotFound, list_sessions, most_recent_session, resolve_session

    if flag(args, "no_session"):
        return SessionManager.in_memory(cwd)
    db = open_database(url)
    factory = store_factory(db)
    ref = flag(args, "session")
    if ref:
        try:
            session_id = resolve_session(db, ref)
        except SessionNotFound:
            if not paths.is_valid_session_id(ref):
                raise
            return SessionManager.create(cwd, cwd, id=ref, store_factory=factory)  # a new session of that id
        return SessionManager.open(session_id, store_factory=factory)
    resume = flag(args, "resume")
    if isinstance(resume, str):  # -r ID
        return SessionManager.open(resolve_session(db, resume), store_factory=factory)
    if resume:
        return SessionManager.open(pick_session(cwd, infos=list_sessions(db, cwd)), store_factory=factory)
    if flag(args, "continue_"):
        recent = most_recent_session(db, cwd)
        if recent is not None:
            return SessionManager.open(recent, store_factory=factory)
    # The session directory only names sessions (the factory keeps the id): nothing is made there.
    return SessionManager.create(cwd, cwd, store_factory=factory)


def stored_new(url: str, cwd: str) -> Any:
    """A new session in the database (the chat's `/new`)."""
    from picontext.session.manager import SessionManager
    from picontext.session.postgres import store_factory

    return SessionManager.create(cwd, cwd, store_factory=store_factory(open_database(url)))


def stored_sessions(url: str, cwd: str) -> list[Any]:
    """The database's sessions of `cwd`, newest activity first (the chat's `/resume` list)."""
    from picontext.session.postgres.listing import list_sessions

    return list_sessions(open_database(url), cwd)


def stored_open(url: str, ref: str) -> Any:
    """The session `ref` names in the database (an id, a unique prefix, or a listed location)."""
    from picontext.session.manager import SessionManager
    from picontext.session.postgres import store_factory
    from picontext.session.postgres.listing import resolve_session

    db = open_database(url)
    return SessionManager.open(resolve_session(db, ref.rsplit("#", 1)[-1]), store_factory=store_factory(db))


def _url(args: argparse.Namespace) -> str:
    url = store_url()
    if url is None:
        raise StoreError(f"no session database: pass --store URL or set {STORE_ENV}")
    return url


def cmd_import(args: argparse.Namespace) -> int:
    from picontext.errors import SessionFormatError
    from picontext.session.postgres.transfer import import_file

    db = open_database(_url(args))
    failed = 0
    for path in args.files:
        try:
            session_id, tail = import_file(db, path)
        except FileExistsError:
            failed += 1
            print(f"picontext: {path}: session already in the store; not imported", file=sys.stderr)
        except SessionFormatError as exc:
            failed += 1
            print(f"picontext: {exc}", file=sys.stderr)
        except PicontextError as exc:  # the database refused (SessionWriteError is an OSError too)
            failed += 1
            print(f"picontext: {path}: {exc}", file=sys.stderr)
        except OSError as exc:
            failed += 1
            print(f"picontext: cannot read {path}: {exc.strerror}", file=sys.stderr)
        else:
            print(f"{session_id}\t{tail.offset} lines\t{path}")
    return 2 if failed else 0


def cmd_export(args: argparse.Namespace) -> int:
    store = resolve(_url(args), args.session)
    data = store.export_bytes()
    if data is None:
        raise StoreError(f"session {args.session} disappeared")
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    return 0

"""Opening a session file for inspection: read-only, migrated in memory, warnings on stderr."""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from picontext.errors import PicontextError, SessionFormatError
from picontext.session.index import EntryIndex
from picontext.session.live import LiveProjection
from picontext.session.manager import SessionManager
from picontext.session.migrations import migrate_to_current
from picontext.session.projection import LAST, LeafArg, SessionProjection, build_index
from picontext.session.protocol import LoadResult
from picontext.session.store import JsonlSessionStore
from picontext.session.tree import path_to


class SessionOpenError(PicontextError):
    pass


MAX_WARNINGS = 10


def describe_file_type(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular_file(path: str, *, missing_ok: bool = False) -> None:
    """Refuse, before opening, what is not a regular file (after symlinks): reading a FIFO blocks
    forever and `/dev/zero` never ends."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if missing_ok:
            return
        raise SessionOpenError(f"no such file: {path}") from None
    except OSError as exc:
        raise SessionOpenError(f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise SessionOpenError(f"is {describe_file_type(mode)}, not a session file: {path}")


def print_warnings(lines: list[str]) -> None:
    """The first MAX_WARNINGS warnings, then one line with the count of the rest."""
    for line in lines[:MAX_WARNINGS]:
        print(f"picontext: warning: {line}", file=sys.stderr)
    if len(lines) > MAX_WARNINGS:
        print(f"picontext: warning: {len(lines) - MAX_WARNINGS} more unreadable lines not shown", file=sys.stderr)


class CappedWarnings:
    """A `warn` callback for the session manager: the first MAX_WARNINGS on stderr, then one note."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, message: str) -> None:
        self.count += 1
        if self.count <= MAX_WARNINGS:
            print(f"picontext: warning: {message}", file=sys.stderr)
        elif self.count == MAX_WARNINGS + 1:
            print("picontext: warning: more warnings not shown", file=sys.stderr)


@dataclass
class LoadedSession:
    path: str
    file_entries: list[Any]  # header first, migrated in memory
    entries: list[Any]  # non-header entries, file order
    by_id: dict[Any, Any]

    @property
    def header(self) -> dict[str, Any]:
        return self.file_entries[0]

    @cached_property
    def manager(self) -> SessionManager:
        """An in-memory manager over the same entries (tree, labels, name); never writes.
        Built only by the commands that need it."""
        return SessionManager.in_memory(entries=self.file_entries, warn=lambda m: None)

    def resolve_leaf(self, leaf: str | None) -> LeafArg:
        if leaf is None:
            return LAST
        if leaf not in self.by_id:
            raise SessionOpenError(f"entry {leaf!r} not found in {self.path}")
        return leaf


def project_file(path: str, leaf: str | None) -> SessionProjection:
    """The projection of `path` at `leaf` (default: the last entry), parsing only the entries the
    context holds (the rest stay unparsed lines); read-only, same errors as `load_session`."""
    path, result = _open(path, lazy=True)
    migrate_to_current(result.entries)  # legacy files come back fully parsed
    index = EntryIndex()
    index.load(result.entries)
    if leaf is not None and leaf not in index:
        raise SessionOpenError(f"entry {leaf!r} not found in {path}")
    live = LiveProjection()
    live.rebuild(index, path_to(index, LAST if leaf is None else leaf))
    return live.projection()


def check_session(path: str) -> None:
    """The one-line errors (and warnings) of `load_session`, parsing only the lines' heads."""
    _open(path, lazy=True)


def load_session(path: str) -> LoadedSession:
    """Read a session file without modifying it; one-line errors for the CLI. With a session
    database (`--store URL`), `path` is a session id or a unique prefix of one."""
    path, result = _open(path, lazy=False)
    file_entries = result.entries
    migrate_to_current(file_entries)
    entries = [e for e in file_entries if not (isinstance(e, dict) and e.get("type") == "session")]
    return LoadedSession(path, file_entries, entries, build_index(entries))


def _open(ref: str, *, lazy: bool) -> tuple[str, LoadResult]:
    """(where the session is, what it holds): a file, or a session of the `--store` database."""
    from picontext.cli.store_cmds import resolve, store_url

    url = store_url()
    if url is None:
        return ref, _read(ref, lazy=lazy)
    store = resolve(url, ref)
    result = store.load(lazy=lazy)
    if not result.valid:
        raise SessionOpenError(f"not a session (its first record is not a session header): {store.location}")
    print_warnings(result.warnings(store.location))
    return store.location, result


def _read(path: str, *, lazy: bool) -> LoadResult:
    check_regular_file(path)  # names what it is (a FIFO, a device, a directory) in one line
    store = JsonlSessionStore(path)
    try:
        result = store.load(lazy=lazy)  # refuses a directory, FIFO or device before opening it
    except SessionFormatError as exc:
        raise SessionOpenError(str(exc)) from None
    except OSError as exc:
        raise SessionOpenError(f"cannot read {path}: {exc.strerror}") from None
    if not result.valid:
        why = "it is empty" if not result.entries and not result.skipped else "its first line is not a session header"
        raise SessionOpenError(f"not a session file ({why}): {path}")
    print_warnings(result.warnings(path))
    return result

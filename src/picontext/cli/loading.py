"""Opening a session file for inspection: read-only, migrated in memory, warnings on stderr."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from picontext.cli.repo import repository
from picontext.errors import PicontextError, SessionFormatError
from picontext.session.projection import LAST, LeafArg, SessionProjection
from picontext.session.records import HEADER_SCAN_LIMIT

if TYPE_CHECKING:  # imported where used: `context --json` needs none of them
    from picontext.session.manager import SessionManager
    from picontext.session.protocol import LoadResult, SessionStore


class SessionOpenError(PicontextError):
    pass


MAX_WARNINGS = 10


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

    @cached_property
    def by_id(self) -> dict[Any, Any]:
        """id -> entry (later duplicates win), built on first use: the export never needs it."""
        from picontext.session.projection import build_index

        return build_index(self.entries)

    @property
    def header(self) -> dict[str, Any]:
        return self.file_entries[0]

    @cached_property
    def manager(self) -> SessionManager:
        """An in-memory manager over the same entries (tree, labels, name); never writes.
        Built only by the commands that need it."""
        from picontext.session.manager import SessionManager

        return SessionManager.in_memory(entries=self.file_entries, warn=lambda m: None)

    def resolve_leaf(self, leaf: str | None) -> LeafArg:
        if leaf is None:
            # Pi's leaf after loading is the last entry's id: a null one means an empty context.
            last = self.entries[-1] if self.entries else None
            return None if isinstance(last, dict) and "id" in last and last["id"] is None else LAST
        if leaf not in self.by_id:
            raise SessionOpenError(f"entry {leaf!r} not found in {self.path}")
        return leaf


def project_file(path: str | None, leaf: str | None) -> SessionProjection:
    """The projection of `path` at `leaf` (default: the last entry), parsing only the entries the
    context holds (the rest stay unparsed lines); read-only, same errors as `load_session`."""
    from msgspec import UNSET

    from picontext.session.index import EntryIndex
    from picontext.session.live import LiveProjection
    from picontext.session.migrations import migrate_to_current
    from picontext.session.tree import path_to

    path, result = _open(path, lazy=True)
    migrate_to_current(result.entries)  # legacy files come back fully parsed
    index = EntryIndex()
    index.load(result.entries)
    if leaf is not None and leaf not in index:
        raise SessionOpenError(f"entry {leaf!r} not found in {path}")
    live = LiveProjection()
    last_id = index.last_id()  # Pi's leaf after loading (an absent id: start at the last entry)
    start: Any = leaf if leaf is not None else LAST if last_id is UNSET else last_id
    live.rebuild(index, path_to(index, start))
    return live.projection()


def context_json_pieces(ref: str | None, leaf: str | None) -> Iterator[bytes] | None:
    """`context --json`'s output from the session's entry columns (`session/context_stream.py`),
    reading only the lines the context is made of; None when the session is not a file the
    columns describe (a database session, a legacy or irregular file, a torn last line): the
    caller then projects it with `project_file`."""
    from picontext.session.context_stream import context_json
    from picontext.session.protocol import ColumnsOutdated

    store = locate(ref)
    columns = getattr(store, "columns", None)  # a store that keeps entry columns (session files do)
    if columns is None:
        return None
    try:
        view = columns()
    except (OSError, SessionFormatError):
        return None  # the full reader names the problem
    if view is None:
        return None
    with view:
        if leaf is not None and view.position_of(leaf) is None:
            raise SessionOpenError(f"entry {leaf!r} not found in {store.location}")
        try:
            return context_json(view, LAST if leaf is None else leaf)
        except (ColumnsOutdated, OSError):
            getattr(store, "drop_columns", lambda: None)()
            return None


def check_session(path: str | None) -> str:
    """The one-line errors (and warnings) of `load_session`, parsing only the lines' heads; returns
    where the session is (the file an id, a prefix or nothing named)."""
    return _open(path, lazy=True)[0]


def read_session(path: str | None) -> tuple[str, LoadResult]:
    """`check_session` that also returns what it read (lines' heads; bodies parsed on use), for a
    command that then opens the session for writing without reading it again
    (`cli.repo.open_session(where, loaded)`)."""
    return _open(path, lazy=True)


def load_session(path: str | None) -> LoadedSession:
    """Read a session without modifying it; one-line errors for the CLI. `path` is a file, a
    session id or unique id prefix, or None for the latest session of the current directory;
    with a session database (`--store URL`), a session id or a unique prefix of one."""
    from picontext.session.migrations import migrate_to_current

    path, result = _open(path, lazy=False)
    file_entries = result.entries
    migrate_to_current(file_entries)
    entries = [e for e in file_entries if not (isinstance(e, dict) and e.get("type") == "session")]
    return LoadedSession(path, file_entries, entries)


def locate(ref: str | None, cwd: str | None = None) -> SessionStore:
    """The store of the session `ref` names in this process's repository (a file, an id or a
    unique id prefix; None: the latest session of the current directory). One-line errors."""
    repo = repository()
    cwd = cwd or os.getcwd()
    if ref is None:
        found = repo.latest_store(cwd)
        if found is None:
            raise SessionOpenError(f"no sessions for {cwd}: give a session file or id (`picontext sessions --all`)")
        return found[0]
    return repo.store(ref)


def _open(ref: str | None, *, lazy: bool) -> tuple[str, LoadResult]:
    """(where the session is, what it holds), warnings printed; refused in one line when it
    is not a session (a FIFO, a device or a directory is refused before it is opened)."""
    store = locate(ref)
    where = store.location
    try:
        result = store.load(lazy=lazy)
    except SessionFormatError as exc:
        raise SessionOpenError(str(exc)) from None
    except OSError as exc:
        if isinstance(exc, PicontextError):
            raise
        raise SessionOpenError(f"cannot read {where}: {exc.strerror}") from None
    if not result.valid:
        if result.entries or result.skipped:
            why = "its first line is not a session header"
        elif result.size > HEADER_SCAN_LIMIT:
            why = f"no session header in its first {HEADER_SCAN_LIMIT // (1024 * 1024)} MiB"
        else:
            why = "it is empty"
        raise SessionOpenError(f"not a session file ({why}): {where}")
    print_warnings(result.warnings(where))
    return where, result

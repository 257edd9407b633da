"""Opening a session file for inspection: read-only, migrated in memory, warnings on stderr."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from picontext._files import file_kind
from picontext.errors import PicontextError, SessionFormatError
from picontext.session import paths
from picontext.session.projection import LAST, LeafArg, SessionProjection
from picontext.session.store import HEADER_SCAN_LIMIT, JsonlSessionStore, indexed_columns, read_session_header

if TYPE_CHECKING:  # imported where used: `context --json` needs none of them
    from picontext.session.manager import SessionManager
    from picontext.session.protocol import LoadResult


class SessionOpenError(PicontextError):
    pass


MAX_WARNINGS = 10


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
        raise SessionOpenError(f"is {file_kind(mode)}, not a session file: {path}")


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
    from picontext.cli.store_cmds import store_url
    from picontext.session.context_stream import context_json
    from picontext.session.jsonl_columns import ColumnsOutdated, drop_columns

    if store_url() is not None:
        return None
    path = session_path(ref, os.getcwd())
    check_regular_file(path)
    try:
        view = indexed_columns(path)
    except (OSError, SessionFormatError):
        return None  # the full reader names the problem
    if view is None:
        return None
    with view:
        if leaf is not None and view.position_of(leaf) is None:
            raise SessionOpenError(f"entry {leaf!r} not found in {path}")
        try:
            return context_json(view, LAST if leaf is None else leaf)
        except (ColumnsOutdated, OSError):
            drop_columns(os.path.realpath(path))
            return None


def check_session(path: str | None) -> str:
    """The one-line errors (and warnings) of `load_session`, parsing only the lines' heads; returns
    where the session is (the file an id, a prefix or nothing named)."""
    return _open(path, lazy=True)[0]


def read_session(path: str | None) -> tuple[str, LoadResult]:
    """`check_session` that also returns what it read (lines' heads; bodies parsed on use), for a
    command that then opens the session for writing without reading it again
    (`SessionManager.open(where, loaded=...)`)."""
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


def _open(ref: str | None, *, lazy: bool) -> tuple[str, LoadResult]:
    """(where the session is, what it holds): a file, or a session of the `--store` database."""
    from picontext.cli.store_cmds import resolve, store_url

    url = store_url()
    if url is None:
        path = session_path(ref, os.getcwd())
        return path, _read(path, lazy=lazy)
    if ref is None:
        raise SessionOpenError("with --store, name the session: its id or a unique prefix (picontext sessions)")
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
        if result.entries or result.skipped:
            why = "its first line is not a session header"
        elif result.size > HEADER_SCAN_LIMIT:
            why = f"no session header in its first {HEADER_SCAN_LIMIT // (1024 * 1024)} MiB"
        else:
            why = "it is empty"
        raise SessionOpenError(f"not a session file ({why}): {path}")
    print_warnings(result.warnings(path))
    return result


def _session_files(directory: str, root: str | None = None) -> list[str]:
    """The regular *.jsonl files of `directory` (a FIFO or device of that name would never end),
    links only when they stay inside `root` (as `picontext sessions` lists them)."""
    from picontext.session.listing import jsonl_files

    names = jsonl_files(directory, root)
    out = []
    for path in names:
        try:
            if stat.S_ISREG(os.stat(path).st_mode):
                out.append(path)
        except OSError:
            continue
    return out


def _ids_matching(files: list[str], prefix: str) -> dict[str, str]:
    """{path: id} of the session files whose header id starts with `prefix`."""
    found: dict[str, str] = {}
    for path in files:
        try:
            header = read_session_header(path)
        except OSError:
            continue
        session_id = header.get("id") if isinstance(header, dict) else None
        if isinstance(session_id, str) and session_id.lower().startswith(prefix.lower()):
            found[path] = session_id
    return found


def latest_session(cwd: str) -> str:
    """The most recently active session of `cwd` (what inspection commands use without a FILE)."""
    from picontext.session.listing import find_most_recent_session

    path = find_most_recent_session(paths.default_session_dir(cwd), cwd)
    if path is None:
        raise SessionOpenError(f"no sessions for {cwd}: give a session file or id (`picontext sessions --all`)")
    return path


def session_path(ref: str | None, cwd: str, *, create: bool = False) -> str:
    """A session file from what the user typed: a path, a session id, or a unique id prefix.

    An existing file wins. A word without a path separator or `.jsonl` is an id (prefix), looked
    up first among the sessions of `cwd`, then among every project's. With `create`, a path that
    does not exist yet is returned as is (a new session file); an id never creates a file."""
    if ref is None:
        return latest_session(cwd)
    if os.path.exists(ref):
        return ref
    if os.sep in ref or ref.endswith(".jsonl"):
        if create:
            return ref
        raise SessionOpenError(f"no such file: {ref}")
    matches = _ids_matching(_session_files(paths.default_session_dir(cwd)), ref)
    if not matches:
        root = paths.sessions_root()
        try:
            dirs = [os.path.join(root, d) for d in os.listdir(root)]
        except OSError:
            dirs = []
        matches = _ids_matching([f for d in dirs if os.path.isdir(d) for f in _session_files(d, root)], ref)
    if len(set(matches.values())) > 1:
        shown = ", ".join(sorted(set(matches.values()))[:5])
        raise SessionOpenError(f"session id prefix {ref!r} is ambiguous: {shown}")
    if not matches:
        hint = " (to create a new session file, give a path such as ./name.jsonl)" if create else ""
        raise SessionOpenError(f"no session with id {ref!r} and no such file{hint}")
    return max(matches, key=os.path.getmtime)

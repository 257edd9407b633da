"""Finding sessions: SessionInfo summaries, per-directory and global listings, lookups by id.

Listing streams each file once and keeps only what a picker shows (not every message's text,
which is how Pi's /resume runs out of memory on large histories).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime

from picontext._clock import js_date_ms
from picontext.errors import SessionFormatError
from picontext.session import paths
from picontext.session.protocol import ListingFacts
from picontext.session.records import is_header
from picontext.session.store import JsonlSessionStore


@dataclass(slots=True)
class SessionInfo:
    """One session as a listing shows it. `location` names it for display (a JSONL session's
    file path; `<url>#<id>` in other stores: never parsed); `file` is its real file, or None."""

    location: str
    id: str
    cwd: str
    name: str | None
    parent_session_path: str | None
    created: datetime | None
    modified: datetime
    message_count: int
    entry_count: int
    size: int
    first_message: str
    file: str | None = None

    @property
    def path(self) -> str:
        """`location` (Pi's SessionInfo calls it `path`)."""
        return self.location


def build_session_info(path: str) -> SessionInfo | None:
    """Summary of one file, or None when it is not a session (first value not a header)."""
    try:
        facts = JsonlSessionStore(path).facts()
    except (OSError, SessionFormatError):
        return None
    return None if facts is None else info_from_facts(facts, path, path)


def info_from_facts(facts: ListingFacts, location: str, file: str | None) -> SessionInfo:
    """A listing line from a store's facts, by Pi's rules: modified is the last activity, else
    the creation time, else the storage's modification time."""
    header = facts.header
    created_ms = js_date_ms(header.get("timestamp"))
    created = _dt(created_ms) if created_ms == created_ms else None
    if facts.last_activity_ms > 0:
        modified = _dt(facts.last_activity_ms)
    elif created is not None:
        modified = created
    else:
        modified = _dt(facts.modified_ms)
    cwd = header.get("cwd")
    parent = header.get("parentSession")
    return SessionInfo(
        location=location, file=file, id=str(header.get("id", "")), cwd=cwd if isinstance(cwd, str) else "",
        name=facts.name, parent_session_path=parent if isinstance(parent, str) else None, created=created,
        modified=modified, message_count=facts.message_count, entry_count=facts.entry_count, size=facts.size,
        first_message=facts.first_message or "(no messages)",
    )


def _dt(ms: float) -> datetime:
    """Epoch ms as a datetime. JavaScript dates reach year 275760 and Python's stop at 9999: a
    timestamp written in microseconds (year ~58000) is clamped instead of failing the listing."""
    try:
        return datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (ValueError, OverflowError, OSError):
        return datetime.max.replace(tzinfo=UTC) if ms > 0 else datetime.min.replace(tzinfo=UTC)


def _inside(path: str, root: str) -> bool:
    """Whether `path`, links followed, stays under the real directory `root`."""
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def jsonl_files(directory: str, root: str | None = None) -> list[str]:
    """The *.jsonl files of `directory`, which must lie inside `root` (default: itself). A
    symbolic link is followed only when its target stays inside `root` too: a link to another
    user's file is not a session of this directory (Pi lists it)."""
    inside = os.path.realpath(root if root is not None else directory)
    if root is not None and not _inside(directory, inside):
        return []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    return [e.path for e in entries if e.name.endswith(".jsonl") and (not e.is_symlink() or _inside(e.path, inside))]


def _cwd_matches(info_cwd: str, cwd: str) -> bool:
    return bool(info_cwd) and paths.resolve_path(info_cwd) == paths.resolve_path(cwd)


def list_sessions(cwd: str, session_dir: str | None = None) -> list[SessionInfo]:
    """Sessions of one directory, newest activity first (cwd-filtered in a shared custom dir)."""
    directory = session_dir or paths.default_session_dir(cwd)
    filter_cwd = session_dir is not None and paths.resolve_path(directory) != paths.default_session_dir(cwd)
    infos = [i for i in map(build_session_info, jsonl_files(directory)) if i is not None]
    if filter_cwd:
        infos = [i for i in infos if _cwd_matches(i.cwd, cwd)]
    return sorted(infos, key=lambda i: i.modified, reverse=True)


def list_all_sessions(session_dir: str | None = None, *, root: str | None = None) -> list[SessionInfo]:
    """Every session under the sessions root (default: `paths.sessions_root()`; one level of
    project dirs), or in one directory."""
    if session_dir is not None:
        files = jsonl_files(session_dir)
    else:
        root = root or paths.sessions_root()
        try:
            subdirs = [os.path.join(root, d) for d in os.listdir(root)]
        except OSError:
            subdirs = []
        files = [f for d in subdirs if os.path.isdir(d) for f in jsonl_files(d, root)]
    infos = [i for i in map(build_session_info, files) if i is not None]
    return sorted(infos, key=lambda i: i.modified, reverse=True)


def find_most_recent_session(directory: str, cwd: str | None = None) -> str | None:
    """Most recently modified file whose header is valid (and whose cwd matches, if given)."""
    files = sorted(jsonl_files(directory), key=lambda f: JsonlSessionStore(f).modified(), reverse=True)
    for path in files:
        try:
            header = JsonlSessionStore(path).read_header()
        except (OSError, SessionFormatError):
            continue
        if not is_header(header):
            continue
        assert header is not None
        if cwd is not None and not (isinstance(header.get("cwd"), str) and _cwd_matches(header["cwd"], cwd)):
            continue
        return path
    return None


def find_session_by_id(cwd: str, session_id: str, session_dir: str | None = None) -> str | None:
    """Path of the session whose header id is exactly `session_id` (reads only headers)."""
    directory = session_dir or paths.default_session_dir(cwd)
    filter_cwd = session_dir is not None and paths.resolve_path(directory) != paths.default_session_dir(cwd)
    for path in jsonl_files(directory):
        try:
            header = JsonlSessionStore(path).read_header()
        except (OSError, SessionFormatError):
            continue
        if header is None or header.get("id") != session_id:
            continue
        if filter_cwd and not _cwd_matches(str(header.get("cwd") or ""), cwd):
            continue
        return path
    return None

"""A third-party session store for picontext: sessions in one SQLite database file.

This is what another package writes to give picontext a new place to keep sessions. It uses only
picontext's public protocols (`picontext.session.protocol`, `picontext.session.records`,
`picontext.session.repository`), passes the store conformance suite (tests/stores/), and, once
installed (its pyproject.toml declares the `picontext.stores` entry point), every picontext
command takes `--store sqlite:///path/to/sessions.db` or `PICONTEXT_STORE=sqlite:///...`.

A session is kept as the exact bytes of its JSONL file, in chunks (one per append), so it reads,
projects and exports as the same file would. Appends are SQLite transactions: all or nothing.
The writer section must hold across processes and survive a crash of its holder, so it is an
advisory lock on a small file per session beside the database (`<db>.locks/<id>`), released by
the kernel when the holder dies.
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import fcntl
import hashlib
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from picontext.errors import AmbiguousSession, SessionLockedError, SessionNotFound, SessionWriteError, StoreUnavailable
from picontext.session import paths
from picontext.session.listing import SessionInfo, info_from_facts
from picontext.session.protocol import ListingFacts, LoadResult, StaleSessionError, Tail
from picontext.session.records import RawLine, facts_of_bytes, header_in, parse_session_bytes, records_since
from picontext.session.repositories import header_of_bytes, newest_first
from picontext.session.repository import BaseRepository, SessionRepository

__all__ = ["SqliteRepository", "SqliteSessionStore", "open_sqlite_repository"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, generation INTEGER NOT NULL, size INTEGER NOT NULL, modified_ms REAL NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    session_id TEXT NOT NULL, generation INTEGER NOT NULL, start INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (session_id, generation, start));
CREATE TABLE IF NOT EXISTS backups (name TEXT PRIMARY KEY, data BLOB NOT NULL);
"""
LOCK_POLL = 0.005
_HELD: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("picontext_sqlite_held", default=frozenset())


def _line(entry: Any) -> bytes:
    if type(entry) is RawLine:
        return bytes(entry.line) + b"\n"
    return orjson.dumps(entry) + b"\n"  # raises TypeError for what JSON cannot hold: before any write


class Database:
    """One SQLite file, shared by the stores of a repository (one connection, serialized)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.locks = path + ".locks"
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.executescript(SCHEMA)
            os.makedirs(self.locks, mode=0o700, exist_ok=True)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"session store sqlite://{path} is unavailable: {exc}") from None
        self.mutex = threading.RLock()

    @contextlib.contextmanager
    def transaction(self, kind: str = "") -> Iterator[sqlite3.Connection]:
        """One transaction (`IMMEDIATE` for writes: the write lock from its start), rolled back
        on any error, so a batch is stored whole or not at all."""
        with self.mutex:
            self.conn.execute(f"BEGIN {kind}")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def ids(self) -> builtins.list[str]:
        with self.transaction() as conn:
            return [row[0] for row in conn.execute("SELECT id FROM sessions")]

    def close(self) -> None:
        with self.mutex:
            self.conn.close()


class SqliteSessionStore:
    """One session of a `Database`, by id."""

    def __init__(self, db: Database, session_id: str, *, lock_timeout: float = 30.0) -> None:
        self.db = db
        self.session_id = session_id
        self.lock_timeout = lock_timeout
        self._key = f"{db.path}#{session_id}"

    @property
    def location(self) -> str:
        return f"sqlite://{self.db.path}#{self.session_id}"

    # ------------------------------------------------------------------ reading

    def _snapshot(self, since: int = 0) -> tuple[bytes, Tail, float] | None:
        """The session's bytes from offset `since` (whole chunks: may start before it), its tail
        and modification time, read in one transaction."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT generation, size, modified_ms FROM sessions WHERE id = ?",
                               (self.session_id,)).fetchone()
            if row is None:
                return None
            generation, size, modified = row
            chunks = conn.execute(
                "SELECT start, data FROM chunks WHERE session_id = ? AND generation = ? AND start + length(data) > ? "
                "ORDER BY start", (self.session_id, generation, since)).fetchall()
        first = chunks[0][0] if chunks else since
        data = b"".join(bytes(c[1]) for c in chunks)
        return data[since - first:] if since > first else data, Tail(generation, size), modified

    def exists(self) -> bool:
        with self.db.transaction() as conn:
            return conn.execute("SELECT 1 FROM sessions WHERE id = ?", (self.session_id,)).fetchone() is not None

    def tail(self) -> Tail | None:
        with self.db.transaction() as conn:
            row = conn.execute("SELECT generation, size FROM sessions WHERE id = ?", (self.session_id,)).fetchone()
        return None if row is None else Tail(row[0], row[1])

    def load(self, *, lazy: bool = False) -> LoadResult:
        snapshot = self._snapshot()
        if snapshot is None:
            return LoadResult()
        data, tail, _modified = snapshot
        result = parse_session_bytes(data, lazy=lazy)
        result.size, result.tail = len(data), tail
        return result

    def read_since(self, tail: Tail, *, lazy: bool = False) -> LoadResult | None:
        offset = tail.offset
        snapshot = self._snapshot(max(offset - 1, 0))  # one byte before: was `tail` inside a line?
        if snapshot is None:
            return None
        data, now, _modified = snapshot
        if now.generation != tail.generation or now.offset < offset:
            return None  # replaced or truncated: the caller reloads
        before, rest = (data[:1], data[1:]) if offset > 0 else (b"", data)
        return records_since(before, rest, tail, lazy=lazy)

    def read_header(self) -> dict[str, Any] | None:
        snapshot = self._snapshot()
        if snapshot is None:
            return None
        return header_in(snapshot[0])

    def facts(self) -> ListingFacts | None:
        snapshot = self._snapshot()
        if snapshot is None:
            return None
        data, _tail, modified = snapshot
        return facts_of_bytes(data, modified_ms=modified)

    def export_bytes(self) -> bytes | None:
        snapshot = self._snapshot()
        return None if snapshot is None else snapshot[0]

    # ------------------------------------------------------------------ the writer section

    def _lock_path(self) -> str:
        # An id may hold any character: the lock file is named by its digest.
        return os.path.join(self.db.locks, hashlib.sha256(self.session_id.encode()).hexdigest()[:32])

    def _try_lock(self) -> int | None:
        fd = os.open(self._lock_path(), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    def _locked_error(self) -> SessionLockedError:
        return SessionLockedError(f"Session {self.session_id} is locked by another writer ({self.location})")

    @contextlib.contextmanager
    def _section(self) -> Iterator[None]:
        """The writer section for threads: waits (bounded) for another holder."""
        if self._key in _HELD.get():
            yield
            return
        deadline = time.monotonic() + self.lock_timeout
        while (fd := self._try_lock()) is None:
            if time.monotonic() > deadline:
                raise self._locked_error()
            time.sleep(LOCK_POLL)
        with self._holding(fd):
            yield

    @contextlib.contextmanager
    def _holding(self, fd: int) -> Iterator[None]:
        """The section, once `fd` holds the lock: this thread's or task's appends skip it."""
        token = _HELD.set(_HELD.get() | {self._key})
        try:
            yield
        finally:
            _HELD.reset(token)
            os.close(fd)  # closing releases the lock

    @contextlib.contextmanager
    def writer(self) -> Iterator[Tail | None]:
        with self._section():
            yield self.tail()

    @contextlib.asynccontextmanager
    async def awriter(self) -> AsyncIterator[Tail | None]:
        import asyncio

        if self._key in _HELD.get():
            yield self.tail()
            return
        deadline = time.monotonic() + self.lock_timeout
        while (fd := self._try_lock()) is None:
            if time.monotonic() > deadline:
                raise self._locked_error()
            await asyncio.sleep(LOCK_POLL)
        with self._holding(fd):
            yield self.tail()

    @contextlib.contextmanager
    def try_writer(self) -> Iterator[Tail | None]:
        """`writer()` without the wait: SessionLockedError at once while another writer holds it."""
        if self._key in _HELD.get():
            yield self.tail()
            return
        fd = self._try_lock()
        if fd is None:
            raise self._locked_error()
        with self._holding(fd):
            yield self.tail()

    # ------------------------------------------------------------------ writing

    def append(self, entries: list[Any], *, expect: Tail | None = None) -> Tail:
        payload = b"".join(map(_line, entries))
        with self._section(), self.db.transaction("IMMEDIATE") as conn:
            row = conn.execute("SELECT generation, size FROM sessions WHERE id = ?", (self.session_id,)).fetchone()
            if row is None:
                raise SessionWriteError(f"Session disappeared: {self.location}", missing=True)
            generation, size = row
            if expect is not None and Tail(generation, size) != expect:
                raise StaleSessionError(f"{self.location} changed since it was read (another writer appended or "
                                        "replaced it); nothing was appended")
            if not payload:
                return Tail(generation, size)
            last = conn.execute("SELECT substr(data, -1) FROM chunks WHERE session_id = ? AND generation = ? "
                                "ORDER BY start DESC LIMIT 1", (self.session_id, generation)).fetchone()
            if last is not None and bytes(last[0]) != b"\n":
                payload = b"\n" + payload  # close a torn or unterminated last line first
            conn.execute("INSERT INTO chunks VALUES (?, ?, ?, ?)", (self.session_id, generation, size, payload))
            conn.execute("UPDATE sessions SET size = ?, modified_ms = ? WHERE id = ?",
                         (size + len(payload), time.time() * 1000, self.session_id))
            return Tail(generation, size + len(payload))

    def create(self, file_entries: list[Any]) -> Tail:
        return self.create_bytes(b"".join(map(_line, file_entries)))

    def create_bytes(self, data: bytes) -> Tail:
        """A new session holding exactly `data`; FileExistsError when the id is taken."""
        generation = secrets.randbits(62)
        with self.db.transaction("IMMEDIATE") as conn:
            try:
                conn.execute("INSERT INTO sessions VALUES (?, ?, ?, ?)",
                             (self.session_id, generation, len(data), time.time() * 1000))
            except sqlite3.IntegrityError:
                raise FileExistsError(f"session {self.session_id} already exists in {self.location}") from None
            if data:
                conn.execute("INSERT INTO chunks VALUES (?, ?, 0, ?)", (self.session_id, generation, data))
        return Tail(generation, len(data))

    def replace(self, file_entries: list[Any], *, backup_suffix: str | None = None) -> Tail:
        payload = b"".join(map(_line, file_entries))
        if not self.exists():
            return self.create_bytes(payload)
        generation = secrets.randbits(62)
        with self._section(), self.db.transaction("IMMEDIATE") as conn:
            if backup_suffix:
                previous = b"".join(bytes(c[0]) for c in conn.execute(
                    "SELECT data FROM chunks WHERE session_id = ? ORDER BY start", (self.session_id,)))
                conn.execute("INSERT OR IGNORE INTO backups VALUES (?, ?)", (self.session_id + backup_suffix, previous))
            conn.execute("DELETE FROM chunks WHERE session_id = ?", (self.session_id,))
            if payload:
                conn.execute("INSERT INTO chunks VALUES (?, ?, 0, ?)", (self.session_id, generation, payload))
            conn.execute("UPDATE sessions SET generation = ?, size = ?, modified_ms = ? WHERE id = ?",
                         (generation, len(payload), time.time() * 1000, self.session_id))
        return Tail(generation, len(payload))


class SqliteRepository(BaseRepository):
    """The sessions of one SQLite database: `BaseRepository` does the rest (open, create, fork,
    latest) through `locate`, `place`, `list`, `import_bytes` and `export_bytes`."""

    def __init__(self, path: str) -> None:
        self.db = Database(path)
        self.url = f"sqlite://{path}"

    def store_of(self, session_id: str) -> SqliteSessionStore:
        return SqliteSessionStore(self.db, session_id)

    def place(self, cwd: str, session_id: str, timestamp: str) -> tuple[SqliteSessionStore, None]:
        return self.store_of(session_id), None

    def locate(self, ref: str) -> tuple[SqliteSessionStore, None]:
        """A full id, else a unique id prefix (case-insensitive); a listed location too."""
        ref = ref.rsplit("#", 1)[-1]
        ids = self.db.ids()
        if ref not in ids:
            found = sorted(i for i in ids if i.lower().startswith(ref.lower()))
            if not found:
                raise SessionNotFound(ref, self.url)
            if len(found) > 1:
                raise AmbiguousSession(ref, found, self.url)
            ref = found[0]
        return self.store_of(ref), None

    def list(self, cwd: str | None = None) -> builtins.list[SessionInfo]:
        wanted = None if cwd is None else paths.resolve_path(cwd)
        infos = []
        for session_id in self.db.ids():
            store = self.store_of(session_id)
            facts = store.facts()
            if facts is None:
                continue
            info = info_from_facts(facts, store.location, None)
            if wanted is None or (info.cwd and paths.resolve_path(info.cwd) == wanted):
                infos.append(info)
        return newest_first(infos)

    def import_bytes(self, data: bytes) -> str:
        session_id = str(header_of_bytes(data)["id"])
        self.store_of(session_id).create_bytes(data)
        return session_id

    def export_bytes(self, ref: str) -> bytes:
        data = self.locate(ref)[0].export_bytes()
        if data is None:
            raise SessionNotFound(ref, self.url)
        return data

    def close(self) -> None:
        self.db.close()


def open_sqlite_repository(url: str) -> SessionRepository:
    """The entry point: `sqlite:///absolute/path.db` or `sqlite:relative/path.db`."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise StoreUnavailable(f"unsupported store {url!r}: a sqlite: URL names a local file")
    path = unquote(parts.path)
    if not path:
        raise StoreUnavailable(f"unsupported store {url!r}: no database file named")
    return SqliteRepository(os.path.abspath(os.path.expanduser(path)))

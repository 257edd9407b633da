"""Sessions kept in process memory, behind the same `SessionStore` protocol as a file.

For library users and tests that want a real store without a disk or a server: `memory:` in
`open_repository` is a fresh, private one; `memory:NAME` is shared by every repository of that
name in the process. A session is held as the exact bytes of its JSONL file and read with the
same parser, so what a memory session holds, projects to and exports as is what the same file
would give; appends follow the file's rules (a torn last line is closed with a newline first).

The writer section is a lock per session, held by a thread or an asyncio task (appends made by
the holder inside it do not wait again); waiting for it in `awriter` yields to the event loop.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from picontext._json import dumps_line
from picontext.errors import SessionLockedError, SessionWriteError, StaleSessionError
from picontext.session.protocol import ListingFacts, LoadResult, Tail
from picontext.session.records import RawLine, facts_of_bytes, header_in, parse_session_bytes, records_since

__all__ = ["MemorySessionStore", "MemorySessions", "memory_sessions"]

LOCK_POLL = 0.002  # seconds between attempts while another task or thread holds a session
_generations = itertools.count(1)
# Sessions whose writer section this thread or task holds: (id(registry), session id).
_HELD: contextvars.ContextVar[frozenset[tuple[int, str]]] = contextvars.ContextVar(
    "picontext_memory_held", default=frozenset())


@dataclass
class MemoryLog:
    """One session: its bytes, as a file would hold them."""

    data: bytearray
    generation: int = field(default_factory=lambda: next(_generations))
    modified_ms: float = field(default_factory=lambda: time.time() * 1000)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def tail(self) -> Tail:
        return Tail(self.generation, len(self.data))


class MemorySessions:
    """The sessions of one memory store, by id (thread-safe)."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.logs: dict[str, MemoryLog] = {}
        self.backups: dict[str, bytes] = {}  # `replace(backup_suffix=)`: "<id><suffix>" -> old bytes
        self.mutex = threading.Lock()  # guards `logs` and every log's bytes

    def get(self, session_id: str) -> MemoryLog | None:
        with self.mutex:
            return self.logs.get(session_id)

    def ids(self) -> list[str]:
        with self.mutex:
            return list(self.logs)


_REGISTRY: dict[str, MemorySessions] = {}
_REGISTRY_LOCK = threading.Lock()


def memory_sessions(name: str) -> MemorySessions:
    """The process's memory store called `name` ("" never shared: a new one each time)."""
    if not name:
        return MemorySessions()
    with _REGISTRY_LOCK:
        found = _REGISTRY.get(name)
        if found is None:
            found = _REGISTRY[name] = MemorySessions(name)
        return found


def _encode(entries: list[Any]) -> bytes:
    return b"".join(bytes(e.line) + b"\n" if type(e) is RawLine else dumps_line(e) for e in entries)


class MemorySessionStore:
    """One session (by id) of a `MemorySessions`."""

    def __init__(self, sessions: MemorySessions, session_id: str, *, lock_timeout: float = 30.0) -> None:
        self.sessions = sessions
        self.session_id = session_id
        self.lock_timeout = lock_timeout
        self._key = (id(sessions), session_id)

    @property
    def location(self) -> str:
        return f"memory:{self.sessions.name}#{self.session_id}"

    def __repr__(self) -> str:
        return f"MemorySessionStore({self.location!r})"

    # ------------------------------------------------------------------ reading

    def _snapshot(self) -> tuple[bytes, Tail] | None:
        with self.sessions.mutex:
            log = self.sessions.logs.get(self.session_id)
            return None if log is None else (bytes(log.data), log.tail())

    def exists(self) -> bool:
        return self.sessions.get(self.session_id) is not None

    def tail(self) -> Tail | None:
        snapshot = self._snapshot()
        return None if snapshot is None else snapshot[1]

    def load(self, *, lazy: bool = False) -> LoadResult:
        snapshot = self._snapshot()
        if snapshot is None:
            return LoadResult()
        data, tail = snapshot
        result = parse_session_bytes(data, lazy=lazy)
        result.size = len(data)
        result.tail = tail
        return result

    def read_since(self, tail: Tail, *, lazy: bool = False) -> LoadResult | None:
        snapshot = self._snapshot()
        if snapshot is None:
            return None
        data, now = snapshot
        if now.generation != tail.generation or now.offset < tail.offset:
            return None
        return records_since(data[tail.offset - 1: tail.offset] if tail.offset else b"", data[tail.offset:], tail,
                             lazy=lazy)

    def read_header(self) -> dict[str, Any] | None:
        snapshot = self._snapshot()
        if snapshot is None:
            return None
        return header_in(snapshot[0])

    def facts(self) -> ListingFacts | None:
        with self.sessions.mutex:
            log = self.sessions.logs.get(self.session_id)
            if log is None:
                return None
            data, modified_ms = bytes(log.data), log.modified_ms
        return facts_of_bytes(data, modified_ms=modified_ms)

    def export_bytes(self) -> bytes | None:
        snapshot = self._snapshot()
        return None if snapshot is None else snapshot[0]

    # ------------------------------------------------------------------ writing

    def _held(self) -> bool:
        return self._key in _HELD.get()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[MemoryLog]:
        """The session's log under its writer lock (not taken again by the section's holder)."""
        log = self.sessions.get(self.session_id)
        if log is None:
            raise SessionWriteError(f"Session disappeared: {self.location}", missing=True)
        if self._held():
            yield log
            return
        if not log.lock.acquire(timeout=self.lock_timeout):
            raise self._locked_error()
        try:
            yield log
        finally:
            log.lock.release()

    def _locked_error(self) -> SessionLockedError:
        return SessionLockedError(f"Session {self.session_id} is locked by another writer ({self.location})")

    def append(self, entries: list[Any], *, expect: Tail | None = None) -> Tail:
        payload = _encode(entries)
        with self._locked(), self.sessions.mutex:
            log = self.sessions.logs.get(self.session_id)
            if log is None:
                raise SessionWriteError(f"Session disappeared: {self.location}", missing=True)
            if expect is not None and log.tail() != expect:
                raise StaleSessionError(f"{self.location} changed since it was read (another writer appended or "
                                        "replaced it); nothing was appended")
            if payload:
                if log.data and log.data[-1:] != b"\n":
                    payload = b"\n" + payload  # close a torn or unterminated last line first
                log.data += payload
                log.modified_ms = time.time() * 1000
            return log.tail()

    def create(self, file_entries: list[Any]) -> Tail:
        return self.create_bytes(_encode(file_entries))

    def create_bytes(self, data: bytes) -> Tail:
        """A new session holding exactly `data`; FileExistsError when the id is taken."""
        with self.sessions.mutex:
            if self.session_id in self.sessions.logs:
                raise FileExistsError(f"session {self.session_id} already exists in {self.location}")
            log = self.sessions.logs[self.session_id] = MemoryLog(bytearray(data))
            return log.tail()

    def replace(self, file_entries: list[Any], *, backup_suffix: str | None = None) -> Tail:
        payload = _encode(file_entries)
        with self.sessions.mutex:
            log = self.sessions.logs.get(self.session_id)
            if log is None:
                log = self.sessions.logs[self.session_id] = MemoryLog(bytearray(payload))
                return log.tail()
            if backup_suffix:
                backup = self.session_id + backup_suffix
                if backup not in self.sessions.backups:
                    self.sessions.backups[backup] = bytes(log.data)
            log.data = bytearray(payload)
            log.generation = next(_generations)
            log.modified_ms = time.time() * 1000
            return log.tail()

    def delete(self) -> bool:
        with self.sessions.mutex:
            return self.sessions.logs.pop(self.session_id, None) is not None

    # ------------------------------------------------------------------ writer section

    @contextlib.contextmanager
    def writer(self) -> Iterator[Tail | None]:
        log = self.sessions.get(self.session_id)
        if log is None or self._held():
            yield self.tail()  # nothing to protect yet: creating a session is exclusive by itself
            return
        if not log.lock.acquire(timeout=self.lock_timeout):
            raise self._locked_error()
        with self._holding(log) as tail:
            yield tail

    @contextlib.contextmanager
    def try_writer(self) -> Iterator[Tail | None]:
        """`writer()` without the wait: SessionLockedError at once while another writer holds it."""
        log = self.sessions.get(self.session_id)
        if log is None or self._held():
            yield self.tail()
            return
        if not log.lock.acquire(blocking=False):
            raise self._locked_error()
        with self._holding(log) as tail:
            yield tail

    @contextlib.contextmanager
    def _holding(self, log: MemoryLog) -> Iterator[Tail | None]:
        """The section, once `log.lock` is had: this thread's or task's appends skip the lock."""
        token = _HELD.set(_HELD.get() | {self._key})
        try:
            yield self.tail()
        finally:
            _HELD.reset(token)
            log.lock.release()

    @contextlib.asynccontextmanager
    async def awriter(self) -> AsyncIterator[Tail | None]:
        """`writer()` for asyncio: the wait for another holder yields to the event loop."""
        import asyncio  # only the agent needs it: not imported by every CLI call

        log = self.sessions.get(self.session_id)
        if log is None or self._held():
            yield self.tail()
            return
        deadline = time.monotonic() + self.lock_timeout
        while not log.lock.acquire(blocking=False):
            if time.monotonic() > deadline:
                raise self._locked_error()
            await asyncio.sleep(LOCK_POLL)
        with self._holding(log) as tail:
            yield tail

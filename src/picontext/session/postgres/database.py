"""Connections to one session database: a psycopg_pool pool per URL and process, the schema
applied on first use, and driver errors turned into picontext's one-line errors.

psycopg is an optional dependency (`pip install 'picontext[postgres]'`); importing this module
without it raises a ConfigError naming the extra.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from picontext.errors import ConfigError, SessionError, SessionLockedError, SessionWriteError

try:
    import psycopg
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError("the PostgreSQL session store needs psycopg: pip install 'picontext[postgres]'") from exc

from picontext.session.postgres.schema import ensure_schema

IDLE_CHECK = 1.0  # seconds a pooled connection may sit unused before it is pinged on reuse


def default_timeout() -> float:
    """Seconds to wait for a connection (`PICONTEXT_STORE_TIMEOUT`, default 10)."""
    return float(os.environ.get("PICONTEXT_STORE_TIMEOUT") or 10)


class StoreUnavailableError(SessionError):
    """The session database cannot be reached (or dropped the connection): nothing was read."""


def is_store_url(text: str | None) -> bool:
    return bool(text) and str(text).startswith(("postgresql://", "postgres://"))


def redact(url: str) -> str:
    """The URL without its password, for messages and `location`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


def _configure(conn: Any) -> None:
    # Listing turns stored times into timestamps in SQL; UTC makes them what the file listing gives.
    conn.execute("SET TIME ZONE 'UTC'")


class Database:
    """One database URL: a small pool, opened lazily, schema migrated once per process."""

    # Writer sections hold a pooled connection while they run, besides the appends and reads.
    def __init__(self, url: str, *, timeout: float | None = None, max_size: int = 8) -> None:
        self.url = url
        self.display = redact(url)
        self.timeout = default_timeout() if timeout is None else timeout
        self.max_size = max_size
        self._last_used: dict[int, float] = {}
        self._opened = False
        self._pool = self._new_pool()
        self._lock = threading.Lock()

    def _new_pool(self) -> ConnectionPool:
        return ConnectionPool(self.url, min_size=0, max_size=self.max_size, timeout=self.timeout, open=False,
                              check=self._check, configure=_configure,
                              kwargs=self._connect_kwargs())

    def _connect_kwargs(self) -> dict[str, Any]:
        # No server-side prepared statements: a transaction-pooling PgBouncer (before 1.21) runs
        # each transaction on any server connection, where a statement prepared on another one
        # does not exist. Every statement is one call of a stored function, so little is lost.
        return {"autocommit": True, "connect_timeout": max(1, int(self.timeout)), "prepare_threshold": None}

    def _check(self, conn: Any) -> None:
        """Ping a pooled connection before use only when it sat idle for a while (the server may
        have restarted or dropped it meanwhile); busy writers skip the extra round trip."""
        if time.monotonic() - self._last_used.get(id(conn), 0.0) > IDLE_CHECK:
            ConnectionPool.check_connection(conn)

    def _open(self) -> None:
        with self._lock:
            if self._opened:
                return
            self._pool.open(wait=False)
            self._opened = True
            try:
                with self._pool.connection() as conn:
                    ensure_schema(conn)
            except BaseException:
                self._reset()
                raise

    def _reset(self) -> None:
        """Drop the pool after a failure: the next use connects afresh at once instead of waiting
        for the pool's reconnection back-off (the server may be back by then)."""
        old, self._pool, self._opened = self._pool, self._new_pool(), False
        with contextlib.suppress(Exception):
            old.close(timeout=0)

    @contextlib.contextmanager
    def connection(self, *, writing: bool = False, what: str = "") -> Iterator[Any]:
        """A pooled autocommit connection; driver failures become one-line session errors."""
        try:
            if not self._opened:
                self._open()
            with self._pool.connection() as conn:
                try:
                    yield conn
                finally:
                    self._last_used[id(conn)] = time.monotonic()
        except (PoolTimeout, psycopg.OperationalError) as exc:
            self._failed(exc)
            raise self.unavailable(exc, writing=writing, what=what) from exc

    def call(self, sql: str, params: tuple[Any, ...], *, writing: bool = False, what: str = "") -> Any:
        """Run one statement (`$n` placeholders) on a pooled connection and return its first row.

        The appends' path: the same as `with connection() as conn: conn.execute(...)` without its
        three generator context managers and query conversion, which cost as much client CPU as
        the rest of an append (docs/performance.md)."""
        try:
            if not self._opened:
                self._open()
            pool = self._pool  # the one to give it back to, even if a failure replaces self._pool
            conn = pool.getconn()
            try:
                return psycopg.RawCursor(conn).execute(sql, params).fetchone()
            finally:
                self._last_used[id(conn)] = time.monotonic()
                pool.putconn(conn)
        except (PoolTimeout, psycopg.OperationalError) as exc:
            self._failed(exc)
            raise self.unavailable(exc, writing=writing, what=what) from exc

    def _failed(self, exc: BaseException) -> None:
        if not isinstance(exc, psycopg.errors.LockNotAvailable):
            with self._lock:
                self._reset()

    def checkout(self, *, what: str = "") -> tuple[ConnectionPool, Any]:
        """(pool, connection) for a writer section, which keeps its transaction (and lock) on the
        connection until `checkin`; pinged first if it sat idle, as every pooled use."""
        try:
            if not self._opened:
                self._open()
            pool = self._pool
            return pool, pool.getconn()
        except (PoolTimeout, psycopg.OperationalError) as exc:
            self._failed(exc)
            raise self.unavailable(exc, writing=True, what=what) from exc

    def checkin(self, pool: ConnectionPool, conn: Any) -> None:
        """Give back a `checkout` connection to its pool (which discards it if it broke)."""
        self._last_used[id(conn)] = time.monotonic()
        pool.putconn(conn)

    def unavailable(self, exc: BaseException, *, writing: bool, what: str = "") -> SessionError:
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return SessionLockedError(f"Session {what} is locked by another writer ({self.display})")
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, PoolTimeout):
            detail = f"no connection within {self.timeout:g}s"
        subject = f"session {what} " if what else ""
        if writing:
            return SessionWriteError(f"Cannot write {subject}to {self.display}: database unreachable ({detail}); "
                                     "nothing was written")
        return StoreUnavailableError(f"Cannot read {subject}from {self.display}: database unreachable ({detail})")

    def close(self) -> None:
        with self._lock:
            if self._opened:
                self._pool.close()
                self._opened = False


_DATABASES: dict[str, Database] = {}
_REGISTRY_LOCK = threading.Lock()


def database(url: str) -> Database:
    """The process's `Database` for `url` (shared by every store on it)."""
    with _REGISTRY_LOCK:
        db = _DATABASES.get(url)
        if db is None:
            db = _DATABASES[url] = Database(url)
        return db


def close_all() -> None:
    with _REGISTRY_LOCK:
        for db in _DATABASES.values():
            db.close()
        _DATABASES.clear()

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

from picontext.errors import ConfigError, SessionError, SessionLockedError, SessionWriteError, WriteOutcomeUnknown

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict
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
    """The URL without its password, for messages and `location`. A URL too broken to parse (an
    unclosed `[`) is cut by hand: userinfo ends at the last `@` before the path."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        scheme, sep, rest = url.partition("://")
        authority, slash, path = rest.partition("/")
        userinfo, at, host = authority.rpartition("@")
        if not sep or not at or ":" not in userinfo:
            return url
        return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}{slash}{path}"
    if password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


# What a failed connection attempt says when waiting may help (the server is starting, restarting,
# overloaded, or the network is down); libpq gives no SQLSTATE for these, only its message. Any
# other refusal (unknown role or database, authentication, TLS, a bad URL parameter) fails at once.
_TRANSIENT = ("connection refused", "timeout expired", "timed out", "no route to host", "network is unreachable",
              "server closed the connection", "connection reset", "could not receive data", "could not send data",
              "the database system is starting up", "the database system is shutting down",
              "the database system is in recovery mode", "too many clients", "sorry, too many clients",
              "temporary failure in name resolution", "the database system is not yet accepting connections",
              "the database system is not accepting connections", "is not currently accepting connections",
              "connection is closed", "connection is lost",
              "consuming input failed", "sending query failed", "ssl syscall error", "eof detected")


def transient(exc: BaseException) -> bool:
    """A failure to connect that waiting may cure (see _TRANSIENT)."""
    text = str(exc).lower()
    return any(marker in text for marker in _TRANSIENT)


def answer_lost(exc: BaseException) -> bool:
    """The connection broke without an answer from the server (no SQLSTATE): a statement sent
    before may have run and committed. An error the server sent (even "terminating connection",
    57P01) is its answer to the statement, which therefore did not commit."""
    return not isinstance(exc, PoolTimeout) and getattr(exc, "sqlstate", None) is None


def connection_lost(exc: BaseException) -> bool:
    """The driver error means the connection is gone (or never came), not that the server refused
    a statement: no SQLSTATE, or a connection-class one (08: connection exception, 57P: the
    server terminated the session)."""
    if isinstance(exc, PoolTimeout):
        return True
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith(("08", "57P"))


def _configure(conn: Any) -> None:
    # Listing turns stored times into timestamps in SQL; UTC makes them what the file listing gives.
    conn.execute("SET TIME ZONE 'UTC'")


class Database:
    """One database URL: a small pool, opened lazily, schema migrated once per process."""

    # Writer sections hold a pooled connection while they run, besides the appends and reads.
    def __init__(self, url: str, *, timeout: float | None = None, max_size: int = 8) -> None:
        self.url = url
        self.display = redact(url)
        try:
            conninfo_to_dict(url)  # a malformed URL is refused here, not reported as "unreachable"
        except psycopg.Error as exc:
            raise ConfigError(f"invalid session database URL {self.display}: {self.reason(exc)}") from None
        self.timeout = default_timeout() if timeout is None else timeout
        self.max_size = max_size
        self._last_used: dict[int, float] = {}
        self._opened = False
        self._pool = self._new_pool()
        self._lock = threading.Lock()

    def _new_pool(self) -> ConnectionPool:
        self._connect_error: BaseException | None = None
        database = self

        class Recording(psycopg.Connection):
            """Connections that tell the Database why one could not be made (the pool connects
            in its own threads and only logs it): a waiter then reports it instead of waiting."""

            @classmethod
            def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
                try:
                    conn = super().connect(conninfo, **kwargs)
                except psycopg.Error as exc:
                    database._connect_error = exc
                    raise
                database._connect_error = None
                return conn

        return ConnectionPool(self.url, min_size=0, max_size=self.max_size, timeout=self.timeout, open=False,
                              check=self._check, configure=_configure, connection_class=Recording,
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
            pool = self._pool
            pool.open(wait=False)
            self._opened = True
            try:
                conn = self._getconn(pool)
                try:
                    ensure_schema(conn)
                finally:
                    pool.putconn(conn)
            except BaseException:
                self._reset()
                raise

    def _getconn(self, pool: ConnectionPool) -> Any:
        """A connection from `pool` within the timeout. The wait is cut short when connecting
        failed for a reason waiting cannot cure (unknown role or database, authentication, TLS):
        that error is raised at once; on timeout, the last reason connecting failed, if any."""
        deadline = time.monotonic() + self.timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                return pool.getconn(timeout=max(0.001, min(remaining, 0.25)))
            except PoolTimeout:
                error = self._connect_error
                if error is not None and (not transient(error) or remaining <= 0.25):
                    raise error from None
                if remaining <= 0.25:
                    raise PoolTimeout(f"no connection within {self.timeout:g}s") from None

    def _reset(self) -> None:
        """Drop the pool after a failure: the next use connects afresh at once instead of waiting
        for the pool's reconnection back-off (the server may be back by then)."""
        old, self._pool, self._opened = self._pool, self._new_pool(), False
        with contextlib.suppress(Exception):
            old.close(timeout=0)

    @contextlib.contextmanager
    def connection(self, *, writing: bool = False, what: str = "") -> Iterator[Any]:
        """A pooled autocommit connection; driver failures become one-line session errors (a
        write whose connection broke while it ran: WriteOutcomeUnknown, it may have committed)."""
        sent = False
        try:
            if not self._opened:
                self._open()
            pool = self._pool
            conn = self._getconn(pool)
            try:
                sent = True
                yield conn
            finally:
                self._last_used[id(conn)] = time.monotonic()
                pool.putconn(conn)
        except (PoolTimeout, psycopg.Error) as exc:
            self._failed(exc)
            raise self.failure(exc, writing=writing, what=what, lost_answer=sent) from exc

    def call(self, sql: str, params: tuple[Any, ...], *, writing: bool = False, what: str = "") -> Any:
        """Run one statement (`$n` placeholders) on a pooled connection and return its first row.

        The appends' path: the same as `with connection() as conn: conn.execute(...)` without its
        three generator context managers and query conversion, which cost as much client CPU as
        the rest of an append (docs/performance.md)."""
        sent = False
        try:
            if not self._opened:
                self._open()
            pool = self._pool  # the one to give it back to, even if a failure replaces self._pool
            conn = self._getconn(pool)
            try:
                sent = True
                return psycopg.RawCursor(conn).execute(sql, params).fetchone()
            finally:
                self._last_used[id(conn)] = time.monotonic()
                pool.putconn(conn)
        except (PoolTimeout, psycopg.Error) as exc:
            self._failed(exc)
            raise self.failure(exc, writing=writing, what=what, lost_answer=sent) from exc

    def _failed(self, exc: BaseException) -> None:
        """A broken connection makes the whole pool suspect; a statement the server refused does not."""
        if connection_lost(exc) and not isinstance(exc, psycopg.errors.LockNotAvailable):
            with self._lock:
                self._reset()

    def checkout(self, *, what: str = "") -> tuple[ConnectionPool, Any]:
        """(pool, connection) for a writer section, which keeps its transaction (and lock) on the
        connection until `checkin`; pinged first if it sat idle, as every pooled use."""
        try:
            if not self._opened:
                self._open()
            pool = self._pool
            return pool, self._getconn(pool)
        except (PoolTimeout, psycopg.Error) as exc:
            self._failed(exc)
            raise self.failure(exc, writing=True, what=what) from exc

    def checkin(self, pool: ConnectionPool, conn: Any) -> None:
        """Give back a `checkout` connection to its pool (which discards it if it broke)."""
        self._last_used[id(conn)] = time.monotonic()
        pool.putconn(conn)

    def reason(self, exc: BaseException) -> str:
        """What went wrong, in one line, without the password."""
        if isinstance(exc, PoolTimeout):
            return f"no connection within {self.timeout:g}s"
        text = str(exc).strip()
        detail = text.splitlines()[0].strip() if text else type(exc).__name__
        return detail.replace(self.url, self.display)

    def failure(self, exc: BaseException, *, writing: bool, what: str = "", lost_answer: bool = False) -> SessionError:
        """The one-line error for a driver failure. A lost connection is "database unreachable";
        anything the server refused (read-only database, disk full, statement timeout) is named
        as the server names it. `lost_answer`: a write was sent on its own connection and the
        connection broke before its answer came: it may have committed (WriteOutcomeUnknown)."""
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return SessionLockedError(f"Session {what} is locked by another writer ({self.display})")
        subject = f"session {what} " if what else ""
        detail = self.reason(exc)
        if not connection_lost(exc):
            if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
                detail += " (a read-only database, or a standby server)"
            if writing:
                return SessionWriteError(f"Cannot write {subject}to {self.display}: {detail}; nothing was written")
            return SessionError(f"Cannot read {subject}from {self.display}: {detail}")
        if writing and lost_answer and answer_lost(exc):
            return WriteOutcomeUnknown(f"Lost the connection to {self.display} while writing {subject}({detail}): "
                                       "whether the write was stored is not known yet")
        # A refusal that waiting does not cure (unknown role or database, authentication, TLS) is
        # named as such; "unreachable" is for the network, a server down or restarting.
        problem = "database unreachable" if isinstance(exc, PoolTimeout) or transient(exc) else "cannot connect"
        if writing:
            return SessionWriteError(f"Cannot write {subject}to {self.display}: {problem} ({detail}); "
                                     "nothing was written")
        return StoreUnavailableError(f"Cannot read {subject}from {self.display}: {problem} ({detail})")

    def unavailable(self, exc: BaseException, *, writing: bool, what: str = "") -> SessionError:
        """`failure` of a statement whose outcome is certain (nothing committed: inside a writer
        section, a broken connection takes the whole transaction with it)."""
        return self.failure(exc, writing=writing, what=what)

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

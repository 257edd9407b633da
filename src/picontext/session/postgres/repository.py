"""`PostgresRepository`: sessions by id in a PostgreSQL database (docs/storage.md).

Listing, lookups by prefix and the latest session of a directory are single indexed queries over
the session rows (`listing.py`); import and export copy a session file's bytes losslessly
(`transfer.py`).
"""

from __future__ import annotations

import builtins

from picontext.errors import SessionNotFound
from picontext.session.listing import SessionInfo
from picontext.session.postgres.database import Database, database
from picontext.session.postgres.listing import list_sessions, most_recent_session, resolve_session
from picontext.session.postgres.store import PgSessionStore
from picontext.session.postgres.transfer import import_bytes
from picontext.session.protocol import SessionStore
from picontext.session.repositories import BaseRepository

__all__ = ["PostgresRepository"]


class PostgresRepository(BaseRepository):
    """The sessions of the database at `url` (or of an open `Database`)."""

    def __init__(self, url: str | Database) -> None:
        self.db = url if isinstance(url, Database) else database(url)
        self.url = self.db.url

    def __str__(self) -> str:
        return self.db.display

    def __repr__(self) -> str:
        return f"PostgresRepository({self.db.display!r})"

    def store_of(self, session_id: str) -> PgSessionStore:
        return PgSessionStore(self.db, session_id)

    def place(self, cwd: str, session_id: str, timestamp: str) -> tuple[SessionStore, str | None]:
        return self.store_of(session_id), None

    def locate(self, ref: str) -> tuple[SessionStore, str | None]:
        """An id or a unique id prefix (a listed location `<url>#<id>` too)."""
        return self.store_of(resolve_session(self.db, ref.rsplit("#", 1)[-1])), None

    def latest_store(self, cwd: str) -> tuple[SessionStore, str | None] | None:
        found = most_recent_session(self.db, cwd)
        return None if found is None else (self.store_of(found), None)

    def list(self, cwd: str | None = None) -> builtins.list[SessionInfo]:
        return list_sessions(self.db, cwd)

    def import_bytes(self, data: bytes) -> str:
        return import_bytes(self.db, data)[0]

    def export_bytes(self, ref: str) -> bytes:
        store = self.store_of(self.resolve_id(ref))
        data = store.export_bytes()
        if data is None:
            raise SessionNotFound(ref, self.db.display)
        return data

    def resolve_id(self, ref: str) -> str:
        return resolve_session(self.db, ref.rsplit("#", 1)[-1])

    def close(self) -> None:
        """Nothing to do: the connection pool is the process's, shared by every repository of
        this database (closed at exit)."""

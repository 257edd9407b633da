"""Listing and finding sessions in the database: one indexed query over the session rows (the
facts are kept current by every append), never the lines themselves."""

from __future__ import annotations

from datetime import UTC, datetime

from picontext.errors import SessionError
from picontext.session import paths
from picontext.session.listing import SessionInfo
from picontext.session.postgres.database import Database
from picontext.session.postgres.store import fact_text

_COLUMNS = ("id, cwd, name, parent_session, created_ms, extract(epoch FROM updated_at) * 1000, message_count,"
            " entry_count, size, first_message, last_activity_ms")


class SessionNotFound(SessionError):
    pass


def _dt(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _info(db: Database, row: tuple) -> SessionInfo:
    (session_id, cwd, name, parent, created_ms, updated_ms, messages, entries, size, first, activity) = row
    created = _dt(created_ms) if created_ms == created_ms and created_ms is not None else None
    modified = _dt(activity) if activity > 0 else created if created is not None else _dt(float(updated_ms))
    return SessionInfo(path=f"{db.display}#{session_id}", id=session_id, cwd=cwd, name=fact_text(name),
                       parent_session_path=parent, created=created, modified=modified, message_count=messages,
                       entry_count=entries, size=size, first_message=fact_text(first) or "(no messages)")


def list_sessions(db: Database, cwd: str | None = None) -> list[SessionInfo]:
    """Sessions (of one working directory, or all), newest activity first."""
    where, params = ("WHERE cwd = %s", (paths.resolve_path(cwd),)) if cwd is not None else ("", ())
    with db.connection() as conn:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM picontext_session {where}", params).fetchall()
    infos = [_info(db, r) for r in rows]
    infos.sort(key=lambda i: i.modified, reverse=True)
    return infos


def resolve_session(db: Database, prefix: str) -> str:
    """The id of the one session whose id starts with `prefix` (an exact id always wins)."""
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT id FROM picontext_session WHERE id = %s UNION ALL"
            " (SELECT id FROM picontext_session WHERE left(id, length(%s)) = %s AND id <> %s ORDER BY id LIMIT 3)",
            (prefix, prefix, prefix, prefix)).fetchall()
    ids = [r[0] for r in rows]
    if ids and ids[0] == prefix:
        return prefix
    if not ids:
        raise SessionNotFound(f"no session {prefix!r} in {db.display}")
    if len(ids) > 1:
        raise SessionNotFound(f"session prefix {prefix!r} is ambiguous in {db.display}: "
                              + ", ".join(ids[:2]) + (", ..." if len(ids) > 2 else ""))
    return str(ids[0])


def most_recent_session(db: Database, cwd: str) -> str | None:
    with db.connection() as conn:
        row = conn.execute(
            "SELECT id FROM picontext_session WHERE cwd = %s"
            " ORDER BY greatest(last_activity_ms, coalesce(nullif(created_ms, 'NaN'), 0)) DESC LIMIT 1",
            (paths.resolve_path(cwd),)).fetchone()
    return None if row is None else str(row[0])

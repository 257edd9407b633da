"""Listing and finding sessions in the database: one indexed query over the session rows (the
facts are kept current by every append), never the lines themselves."""

from __future__ import annotations

from picontext.errors import AmbiguousSession, SessionNotFound
from picontext.session import paths
from picontext.session.listing import SessionInfo
from picontext.session.postgres.database import Database
from picontext.session.postgres.store import fact_text

# Times become timestamps in SQL (converted by the driver in C): listing 10,000 sessions is one
# query and no per-row Python date arithmetic. Out-of-range times (outside years 1..9999) count as
# absent, as they cannot be Python datetimes.
_IN_RANGE = "BETWEEN -62135596800000 AND 253402300799000"
_QUERY = f"""
SELECT id, cwd, name, parent_session, created, coalesce(activity, created, updated_at) AS modified,
       message_count, entry_count, size, first_message
FROM (SELECT s.*,
             CASE WHEN created_ms {_IN_RANGE} THEN to_timestamp(created_ms / 1000) END AS created,
             CASE WHEN last_activity_ms > 0 AND last_activity_ms {_IN_RANGE}
                  THEN to_timestamp(last_activity_ms / 1000) END AS activity
      FROM picontext_session s {{where}}) q
ORDER BY modified DESC
"""


def list_sessions(db: Database, cwd: str | None = None) -> list[SessionInfo]:
    """Sessions (of one working directory, or all), newest activity first."""
    where, params = ("WHERE cwd = %s", (paths.resolve_path(cwd),)) if cwd is not None else ("", ())
    with db.connection() as conn:
        rows = conn.execute(_QUERY.format(where=where), params).fetchall()
    prefix = f"{db.display}#"
    return [
        SessionInfo(location=prefix + sid, id=sid, cwd=cwd_, name=fact_text(name), parent_session_path=parent,
                    created=created, modified=modified, message_count=messages, entry_count=entries, size=size,
                    first_message=fact_text(first) or "(no messages)")
        for (sid, cwd_, name, parent, created, modified, messages, entries, size, first) in rows
    ]


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
        raise SessionNotFound(prefix, db.display)
    if len(ids) > 1:
        raise AmbiguousSession(prefix, ids[:2] + (["..."] if len(ids) > 2 else []), db.display)
    return str(ids[0])


def most_recent_session(db: Database, cwd: str) -> str | None:
    with db.connection() as conn:
        row = conn.execute(
            "SELECT id FROM picontext_session WHERE cwd = %s"
            " ORDER BY greatest(last_activity_ms, coalesce(nullif(created_ms, 'NaN'), 0)) DESC LIMIT 1",
            (paths.resolve_path(cwd),)).fetchone()
    return None if row is None else str(row[0])

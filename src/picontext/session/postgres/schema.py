"""The PostgreSQL schema, as numbered migrations applied on first use (docs/storage.md).

A migration is a list of statements; `ensure_schema` applies the missing ones in order, each in
its own transaction together with its row in `picontext_schema`, under an advisory lock so that
processes starting at once against an empty database do not race. A database whose schema is
newer than this code is refused rather than written with the wrong rules.
"""

from __future__ import annotations

from typing import Any

from picontext.errors import SessionError

# Key of the advisory lock taken while migrating (any fixed 64-bit number unique to picontext).
MIGRATION_LOCK = 0x7069636F6E746578  # "picontex"


def _append_function(name: str, line_params: str, rows: str, count: str) -> str:
    """An append as one server-side call: wait for the session's writer lock (held by a writer
    section), lock the session row, compare the tail, insert the lines (`rows`, `count` of them)
    and update the listing facts, all in the caller's transaction. Status 0: appended; 1: the
    tail differs (nothing written); 2: no such session."""
    return f"""
        CREATE FUNCTION {name}(
            p_session text, p_generation bigint, p_expect bigint, {line_params},
            p_entries integer, p_messages integer, p_size bigint,
            p_name_set boolean, p_name bytea, p_first_message bytea, p_last_activity double precision
        ) RETURNS TABLE (o_status integer, o_generation bigint, o_next_seq bigint)
        LANGUAGE plpgsql AS $fn$
        DECLARE
            g bigint;
            n bigint;
            nl boolean;
        BEGIN
            PERFORM pg_advisory_xact_lock(hashtextextended('picontext:' || p_session, 0));
            SELECT s.generation, s.next_seq, s.ends_with_newline INTO g, n, nl
              FROM picontext_session s WHERE s.id = p_session FOR UPDATE;
            IF NOT FOUND THEN
                RETURN QUERY SELECT 2, NULL::bigint, NULL::bigint;
                RETURN;
            END IF;
            IF p_expect IS NOT NULL AND (g <> p_generation OR n <> p_expect) THEN
                RETURN QUERY SELECT 1, g, n;
                RETURN;
            END IF;
            INSERT INTO picontext_entry (session_id, seq, entry_id, parent_id, type, head, line) {rows};
            UPDATE picontext_session s SET
                next_seq = n + {count},
                ends_with_newline = true,
                entry_count = s.entry_count + p_entries,
                message_count = s.message_count + p_messages,
                -- a file without its final newline gets one before the appended lines
                size = s.size + p_size + CASE WHEN nl THEN 0 ELSE 1 END,
                name = CASE WHEN p_name_set THEN p_name ELSE s.name END,
                first_message = CASE WHEN s.first_message = ''::bytea THEN p_first_message ELSE s.first_message END,
                last_activity_ms = greatest(s.last_activity_ms, p_last_activity),
                updated_at = now()
              WHERE s.id = p_session;
            RETURN QUERY SELECT 0, g, n + {count};
        END
        $fn$
        """


MIGRATIONS: list[list[str]] = [
    # 1: sessions, their lines, backups of replaced logs, the append function.
    [
        """
        CREATE TABLE picontext_session (
            id              text PRIMARY KEY,          -- the header's session id
            generation      bigint NOT NULL DEFAULT 1, -- bumped when the log is replaced whole
            next_seq        bigint NOT NULL,           -- number of stored lines: the tail
            ends_with_newline boolean NOT NULL DEFAULT true,
            cwd             text NOT NULL DEFAULT '',
            header_timestamp text,
            created_ms      double precision,         -- header timestamp as epoch ms (NaN if unreadable)
            parent_session  text,
            name            bytea,                    -- UTF-8 (surrogates kept): text refuses NUL
            first_message   bytea NOT NULL DEFAULT '',
            entry_count     integer NOT NULL DEFAULT 0,
            message_count   integer NOT NULL DEFAULT 0,
            size            bigint NOT NULL DEFAULT 0,
            last_activity_ms double precision NOT NULL DEFAULT 0,
            created_at      timestamptz NOT NULL DEFAULT now(),
            updated_at      timestamptz NOT NULL DEFAULT now()
        )
        """,
        "CREATE INDEX picontext_session_cwd ON picontext_session (cwd)",
        """
        CREATE TABLE picontext_entry (
            session_id  text NOT NULL REFERENCES picontext_session (id) ON DELETE CASCADE,
            seq         bigint NOT NULL,   -- 0-based line number in the equivalent JSONL file
            entry_id    text,              -- id / parentId / type when they are strings
            parent_id   text,
            type        text,
            line        bytea NOT NULL,    -- the JSONL line exactly, without its "\\n"
            PRIMARY KEY (session_id, seq)
        )
        """,
        # Lines are read back whole and in order: no compression, so a resume costs a copy.
        "ALTER TABLE picontext_entry ALTER COLUMN line SET STORAGE EXTERNAL",
        "CREATE INDEX picontext_entry_id ON picontext_entry (session_id, entry_id)",
        """
        CREATE TABLE picontext_backup (
            session_id  text NOT NULL,
            suffix      text NOT NULL,
            content     bytea NOT NULL,
            created_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (session_id, suffix)
        )
        """,
        # One round trip per append: see migration 2, which replaced this function.
        # One round trip per append: wait for the session's writer lock, check the tail, insert the
        # lines and update the listing facts, all in the caller's transaction.
        """
        CREATE FUNCTION picontext_append(
            p_session text, p_generation bigint, p_expect bigint,
            p_entry_ids text[], p_parent_ids text[], p_types text[], p_lines bytea[],
            p_entries integer, p_messages integer, p_size bigint,
            p_name_set boolean, p_name bytea, p_first_message bytea, p_last_activity double precision
        ) RETURNS TABLE (o_status integer, o_generation bigint, o_next_seq bigint)
        LANGUAGE plpgsql AS $fn$
        DECLARE
            g bigint;
            n bigint;
            nl boolean;
        BEGIN
            PERFORM pg_advisory_xact_lock(hashtextextended('picontext:' || p_session, 0));
            SELECT s.generation, s.next_seq, s.ends_with_newline INTO g, n, nl
              FROM picontext_session s WHERE s.id = p_session FOR UPDATE;
            IF NOT FOUND THEN
                RETURN QUERY SELECT 2, NULL::bigint, NULL::bigint;
                RETURN;
            END IF;
            IF p_expect IS NOT NULL AND (g <> p_generation OR n <> p_expect) THEN
                RETURN QUERY SELECT 1, g, n;
                RETURN;
            END IF;
            INSERT INTO picontext_entry (session_id, seq, entry_id, parent_id, type, line)
            SELECT p_session, n + u.ord - 1, u.eid, u.pid, u.typ, u.line
              FROM unnest(p_entry_ids, p_parent_ids, p_types, p_lines) WITH ORDINALITY AS u(eid, pid, typ, line, ord);
            UPDATE picontext_session s SET
                next_seq = n + cardinality(p_lines),
                ends_with_newline = true,
                entry_count = s.entry_count + p_entries,
                message_count = s.message_count + p_messages,
                -- a file without its final newline gets one before the appended lines
                size = s.size + p_size + CASE WHEN nl THEN 0 ELSE 1 END,
                name = CASE WHEN p_name_set THEN p_name ELSE s.name END,
                first_message = CASE WHEN s.first_message = ''::bytea THEN p_first_message ELSE s.first_message END,
                last_activity_ms = greatest(s.last_activity_ms, p_last_activity),
                updated_at = now()
              WHERE s.id = p_session;
            RETURN QUERY SELECT 0, g, n + cardinality(p_lines);
        END
        $fn$
        """,
    ],
    # 2: the head of each lazily readable line (a resume ships only the lines it needs); the
    # append takes the heads, and has a one-line variant with plain parameters (arrays cost the
    # client more to encode than the rest of an append).
    [
        "ALTER TABLE picontext_entry ADD COLUMN head bytea",
        "DROP FUNCTION picontext_append(text, bigint, bigint, text[], text[], text[], bytea[], integer, integer,"
        " bigint, boolean, bytea, bytea, double precision)",
        _append_function(
            "picontext_append",
            "p_entry_ids text[], p_parent_ids text[], p_types text[], p_heads bytea[], p_lines bytea[]",
            "SELECT p_session, n + u.ord - 1, u.eid, u.pid, u.typ, u.head, u.line"
            " FROM unnest(p_entry_ids, p_parent_ids, p_types, p_heads, p_lines)"
            " WITH ORDINALITY AS u(eid, pid, typ, head, line, ord)",
            "cardinality(p_lines)"),
        _append_function(
            "picontext_append_one",
            "p_entry_id text, p_parent_id text, p_type text, p_head bytea, p_line bytea",
            "VALUES (p_session, n, p_entry_id, p_parent_id, p_type, p_head, p_line)",
            "1"),
        # A lazy load in one statement (PgSessionStore._load_lazily): per record in order its
        # kind (H: a head is sent, L: the whole line), the heads as one JSON array, the other
        # lines joined by newlines. Records are read in the primary key's order; sorting is
        # disabled so that stale statistics (right after an import) cannot turn that into an
        # on-disk sort of every line.
        r"""
        CREATE FUNCTION picontext_load_heads(p_session text)
        RETURNS TABLE (o_generation bigint, o_next_seq bigint, o_ends_with_newline boolean, o_size bigint,
                       o_kinds bytea, o_heads bytea, o_lines bytea)
        LANGUAGE sql STABLE SET enable_sort = off AS $fn$
            SELECT s.generation, s.next_seq, s.ends_with_newline, s.size, a.kinds, a.heads, a.lines
              FROM picontext_session s,
              LATERAL (SELECT
                  string_agg(CASE WHEN e.head IS NULL THEN '\x4c'::bytea ELSE '\x48'::bytea END, ''::bytea) AS kinds,
                  '\x5b'::bytea || coalesce(string_agg(e.head, '\x2c'::bytea) FILTER (WHERE e.head IS NOT NULL),
                                            ''::bytea) || '\x5d'::bytea AS heads,
                  string_agg(e.line, '\x0a'::bytea) FILTER (WHERE e.head IS NULL) AS lines
                FROM (SELECT x.head, x.line FROM picontext_entry x WHERE x.session_id = s.id ORDER BY x.seq) e) a
             WHERE s.id = p_session
        $fn$
        """,
    ],
]

SCHEMA_VERSION = len(MIGRATIONS)


class SchemaTooNew(SessionError):
    pass


def ensure_schema(conn: Any) -> int:
    """Apply missing migrations on `conn` (a psycopg connection in autocommit mode); returns the
    schema version now in place."""
    current = _current_version(conn)
    if current == SCHEMA_VERSION:
        return current
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS picontext_schema ("
            " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
    current = _current_version(conn)
    if current > SCHEMA_VERSION:
        raise SchemaTooNew(f"the session database has schema version {current}; this picontext knows only up to "
                           f"{SCHEMA_VERSION}: upgrade picontext")
    for version in range(current + 1, SCHEMA_VERSION + 1):
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            if _current_version(conn) >= version:
                continue  # another process applied it while we waited
            for statement in MIGRATIONS[version - 1]:
                conn.execute(statement)
            conn.execute("INSERT INTO picontext_schema (version) VALUES (%s)", (version,))
    return SCHEMA_VERSION


def _current_version(conn: Any) -> int:
    row = conn.execute(
        "SELECT CASE WHEN to_regclass('picontext_schema') IS NULL THEN -1 ELSE 0 END"
    ).fetchone()
    if row[0] < 0:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM picontext_schema").fetchone()
    return int(row[0])

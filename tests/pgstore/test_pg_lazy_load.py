"""A lazy load from PostgreSQL (what `SessionManager.open` does) ships the heads of the bulky
entries and fetches their lines only when parsed (docs/storage.md, "Resuming"); it must give what
the JSONL store's lazy load gives for the same bytes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg_corpus import corpus

from picontext.errors import SessionError
from picontext.session.manager import SessionManager
from picontext.session.postgres import PgSessionStore, database
from picontext.session.postgres.repository import PostgresRepository
from picontext.session.postgres.schema import MIGRATIONS
from picontext.session.postgres.store import LINE_WINDOW
from picontext.session.postgres.transfer import import_bytes, import_file
from picontext.session.store import RawLine, parse_session_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from gen_sessions import generate


def _heads(entries: list[Any]) -> list[Any]:
    return [(e.type, e.id, e.parentId, e.role) if type(e) is RawLine else "parsed" for e in entries]


def _parsed(entries: list[Any]) -> str:
    return repr([e.parse() if type(e) is RawLine else e for e in entries])


def test_lazy_load_equals_the_files_lazy_load_for_the_whole_corpus(pg_url: str) -> None:
    db = database(pg_url)
    checked = 0
    for name, data, _valid in corpus():
        from_file = parse_session_bytes(data, lazy=True)
        if not from_file.valid:
            continue
        session_id, _ = import_bytes(db, data, source=name)
        loaded = PgSessionStore(db, session_id).load(lazy=True)
        assert loaded.valid and loaded.size == len(data), name
        assert loaded.missing_newline == from_file.missing_newline, name
        assert [(s.line, s.torn) for s in loaded.skipped] == [(s.line, s.torn) for s in from_file.skipped], name
        assert _heads(loaded.entries) == _heads(from_file.entries), name
        assert _parsed(loaded.entries) == _parsed(from_file.entries), name  # every deferred line fetched
        checked += 1
    assert checked >= 250


def test_a_resume_fetches_the_context_not_the_session(pg_url: str, tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    generate(str(path), 12_000, compact_every=2500)
    db = database(pg_url)
    session_id, _ = import_file(db, str(path))
    from_file = SessionManager.open(str(path), warn=lambda m: None)
    manager = PostgresRepository(db).open(session_id, warn=lambda m: None)
    assert repr(manager.build_session_context()) == repr(from_file.build_session_context())
    entries = manager._index.entries
    deferred = [e for e in entries if type(e) is RawLine]
    not_fetched = [e for e in deferred if e.source is not None]
    # Only the records around the kept tail were read: at most two windows' worth.
    assert len(deferred) - len(not_fetched) <= 2 * LINE_WINDOW
    assert len(not_fetched) > len(entries) // 2
    # What was not read is read when asked for, and is the file's.
    file_entries = from_file._index.entries
    assert entries[0].parse() == (file_entries[0].parse() if type(file_entries[0]) is RawLine else file_entries[0])


def test_a_log_replaced_while_being_read_is_an_error_not_a_wrong_line(pg_url: str, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    generate(str(path), 300, compact_every=100)
    db = database(pg_url)
    session_id, _ = import_file(db, str(path))
    store = PgSessionStore(db, session_id)
    loaded = store.load(lazy=True)
    first = next(e for e in loaded.entries if type(e) is RawLine)
    store.replace(store.load().entries)  # the same content, a new generation
    with pytest.raises(SessionError, match="was replaced while being read"):
        first.parse()


def test_sessions_written_before_schema_2_are_read_whole(pg_url: str, tmp_path: Path) -> None:
    """Rows stored by schema 1 have no heads: migrating adds the column, and a lazy load of
    such a session ships its lines (and equals the file)."""
    path = tmp_path / "old.jsonl"
    generate(str(path), 200, compact_every=80)
    data = path.read_bytes()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE picontext_schema (version integer PRIMARY KEY,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO picontext_schema (version) VALUES (1)")
        lines = data.split(b"\n")[:-1]
        header_id = parse_session_bytes(data).entries[0]["id"]
        conn.execute("INSERT INTO picontext_session (id, next_seq) VALUES (%s, 0)", (header_id,))
        conn.execute("SELECT * FROM picontext_append(%s, 1, 0, %s, %s, %s, %s, 0, 0, 0, false, NULL, '', 0)",
                     (header_id, [None] * len(lines), [None] * len(lines), [None] * len(lines), lines))
    store = PgSessionStore(pg_url, header_id)
    loaded = store.load(lazy=True)  # migrates the schema first
    assert not any(type(e) is RawLine for e in loaded.entries)
    assert _parsed(loaded.entries) == _parsed(parse_session_bytes(data).entries)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT max(version) FROM picontext_schema").fetchone() == (len(MIGRATIONS),)
    tail = store.append([{"type": "custom", "customType": "x", "id": "after", "parentId": None, "timestamp": "t"}],
                        expect=loaded.tail)
    assert tail.offset == len(lines) + 1
    assert type(store.load(lazy=True).entries[-1]) is RawLine  # new rows have heads

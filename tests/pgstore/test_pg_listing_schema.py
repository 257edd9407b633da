"""Listing from the session rows agrees with the JSONL listing; the schema is migrated on first use
(once, also when several processes start at once) and a newer schema is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from pg_corpus import corpus

from picontext.errors import AmbiguousSession, SessionNotFound
from picontext.session.listing import build_session_info
from picontext.session.postgres import PgSessionStore, database
from picontext.session.postgres.database import close_all
from picontext.session.postgres.listing import list_sessions, resolve_session
from picontext.session.postgres.schema import SCHEMA_VERSION, SchemaTooNew
from picontext.session.postgres.transfer import import_bytes
from picontext.session.store import JsonlSessionStore, parse_session_bytes

FIELDS = ("id", "cwd", "name", "parent_session_path", "created", "modified", "message_count", "entry_count",
          "size", "first_message")


def _facts(info: object) -> dict[str, object]:
    return {f: getattr(info, f) for f in FIELDS}


def test_listing_agrees_with_the_jsonl_listing(pg_url: str, tmp_path: Path) -> None:
    db = database(pg_url)
    expected = {}
    for name, data, _valid in corpus():
        if not parse_session_bytes(data).valid:
            continue
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data)
        info = build_session_info(str(path))
        if info is None or info.modified is None:
            continue
        session_id, _ = import_bytes(db, data, source=name)
        expected[session_id] = (path, info)
    listed = {i.id: i for i in list_sessions(db)}
    assert set(listed) == set(expected)
    mismatches = [(sid, _facts(listed[sid]), _facts(info)) for sid, (_p, info) in expected.items()
                  if _facts(listed[sid]) != _facts(info)]
    # Sessions without any timestamp fall back to the file's mtime (JSONL) / the row's update
    # time (PostgreSQL); everything else must agree.
    mismatches = [m for m in mismatches if {k for k in m[1] if m[1][k] != m[2][k]} != {"modified"}]
    assert not mismatches, [(m[0], {k: (m[1][k], m[2][k]) for k in m[1] if m[1][k] != m[2][k]}) for m in mismatches[:5]]

    # Appending keeps the facts current, as appending to the file does.
    sid, (path, _info) = next(iter(expected.items()))
    store = PgSessionStore(db, sid)
    loaded = store.load()
    new = [{"type": "session_info", "id": "n1", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
            "name": "  renamed  "},
           {"type": "message", "id": "n2", "parentId": "n1", "timestamp": "2026-01-02T00:00:00.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": "later"}], "timestamp": 1767312000000}}]
    store.append(new, expect=loaded.tail)
    JsonlSessionStore(str(path)).append(new)
    after = build_session_info(str(path))
    assert _facts(next(i for i in list_sessions(db) if i.id == sid)) == _facts(after)
    assert [i.id for i in list_sessions(db, cwd=after.cwd)] .count(sid) == 1


def test_session_ids_resolve_from_unique_prefixes(pg_url: str) -> None:
    db = database(pg_url)
    for sid in ("abc-1", "abc-2", "abd"):
        PgSessionStore(db, sid).create([{"type": "session", "version": 3, "id": sid, "timestamp": "x", "cwd": "/"}])
    assert resolve_session(db, "abd") == "abd"
    assert resolve_session(db, "abc-2") == "abc-2"
    assert resolve_session(db, "abc-1") == "abc-1"
    with pytest.raises(AmbiguousSession, match="ambiguous"):
        resolve_session(db, "abc")
    with pytest.raises(SessionNotFound, match="no session with id 'zz'"):
        resolve_session(db, "zz")
    with pytest.raises(SessionNotFound, match="no session with id '_'"):
        resolve_session(db, "_")  # not a LIKE wildcard


def test_schema_is_applied_once_by_processes_starting_together(pg_url: str) -> None:
    code = ("import sys; from picontext.session.postgres import PgSessionStore;"
            " print(PgSessionStore(sys.argv[1], 'x').exists())")
    procs = [subprocess.Popen([sys.executable, "-c", code, pg_url], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    assert [p.communicate(timeout=60)[0] for p in procs] == ["False\n"] * 4
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT version FROM picontext_schema ORDER BY version").fetchall() == [
            (v,) for v in range(1, SCHEMA_VERSION + 1)]


def test_a_newer_schema_is_refused(pg_url: str) -> None:
    assert not PgSessionStore(pg_url, "x").exists()
    close_all()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO picontext_schema (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaTooNew, match=f"schema version {SCHEMA_VERSION + 1}.*upgrade picontext"):
        PgSessionStore(pg_url, "x").exists()


def test_replace_keeps_a_backup_and_changes_the_generation(pg_url: str) -> None:
    store = PgSessionStore(pg_url, "r1")
    header = {"type": "session", "version": 3, "id": "r1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}
    tail = store.create([header, {"type": "custom", "id": "c1", "parentId": None, "timestamp": "t"}])
    before = store.export_bytes()
    new_tail = store.replace([header], backup_suffix=".v1.bak")
    assert new_tail.generation != tail.generation
    assert store.backup(".v1.bak") == before
    assert store.read_since(tail) is None  # the log no longer extends the old tail
    assert store.export_bytes() == b'{"type":"session","version":3,"id":"r1","timestamp":"2026-01-01T00:00:00.000Z",' \
        b'"cwd":"/"}\n'


def test_a_session_id_that_cannot_be_a_key_is_refused(pg_url: str) -> None:
    from picontext.errors import SessionFormatError

    data = b'{"type":"session","version":3,"id":"bad\\u0000id","timestamp":"t","cwd":"/"}\n'
    with pytest.raises(SessionFormatError, match="cannot be a database key"):
        import_bytes(database(pg_url), data, source="x.jsonl")

"""Import/export through PostgreSQL is lossless, and what a session projects to does not depend on
where it is stored (docs/storage.md, "PostgreSQL")."""

from __future__ import annotations

from typing import Any

import pytest
from pg_corpus import corpus

from picontext.errors import SessionFormatError
from picontext.session.migrations import migrate_to_current
from picontext.session.postgres import PgSessionStore, database
from picontext.session.postgres.transfer import export_bytes, import_bytes
from picontext.session.projection import LAST, build_session_context
from picontext.session.store import parse_session_bytes


def test_export_of_import_is_byte_identical_for_the_whole_corpus(pg_url: str) -> None:
    db = database(pg_url)
    imported = 0
    for name, data, valid in corpus():
        if not parse_session_bytes(data).valid:
            assert not valid, name
            with pytest.raises(SessionFormatError):
                import_bytes(db, data, source=name)
            continue
        session_id, _tail = import_bytes(db, data, source=name)
        assert export_bytes(db, session_id) == data, name
        imported += 1
    assert imported >= 250


MAX_LEAVES = 200


def _contexts(file_entries: list[Any]) -> dict[Any, Any]:
    migrate_to_current(file_entries)
    entries = [e for e in file_entries if not (isinstance(e, dict) and e.get("type") == "session")]
    ids = [e.get("id") for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]
    if len(ids) > MAX_LEAVES:  # the real sessions: evenly spaced leaves (projection is O(n) per leaf)
        ids = ids[:: len(ids) // MAX_LEAVES]
    leaves: list[Any] = [LAST, None, *ids]
    out = {}
    for leaf in leaves:
        try:
            out[repr(leaf)] = repr(build_session_context(entries, leaf))  # repr: NaN equals NaN
        except Exception as exc:  # the same error on both sides counts as agreement
            out[repr(leaf)] = f"{type(exc).__name__}: {exc}"
    return out


def test_projection_from_postgres_equals_the_file_at_every_leaf(pg_url: str) -> None:
    db = database(pg_url)
    checked = 0
    for name, data, _valid in corpus():
        from_file = parse_session_bytes(data)
        if not from_file.valid:
            continue
        session_id, _ = import_bytes(db, data, source=name)
        loaded = PgSessionStore(db, session_id).load()
        assert loaded.valid and loaded.size == len(data), name
        assert [s.line for s in loaded.skipped] == [s.line for s in from_file.skipped], name
        assert repr(loaded.entries) == repr(from_file.entries), name
        assert _contexts(loaded.entries) == _contexts(from_file.entries), name
        checked += 1
    assert checked >= 250

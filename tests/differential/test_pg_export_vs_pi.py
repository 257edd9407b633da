"""Pi reads what comes out of the PostgreSQL store: exports of imported sessions, and a session
written by picontext on the database (appends, a label, a branch, a compaction), exported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sessiongen
from test_projection_vs_pi import REAL_SESSIONS, PythonSide, compare_file

from picontext.session.postgres import database
from picontext.session.postgres.repository import PostgresRepository
from picontext.session.postgres.transfer import export_bytes, import_bytes

PiReference = Any
SAMPLE = [*range(0, 300, 15)]

pytestmark = pytest.mark.differential


def test_pi_reads_exports_of_imported_sessions(pi: PiReference, pg_url: str, tmp_path: Path) -> None:
    db = database(pg_url)
    py = PythonSide(tmp_path)
    compared = 0
    sources = [(f"gen-{s}", sessiongen.generate(s)) for s in SAMPLE]
    for name, g in sources:
        if not g.valid:
            continue
        session_id, _ = import_bytes(db, g.data, source=name)
        out = tmp_path / f"{name}.jsonl"
        out.write_bytes(export_bytes(db, session_id) or b"")
        compared += compare_file(pi, py, out, g.leaves, label=name)
    for path in REAL_SESSIONS:
        session_id, _ = import_bytes(db, path.read_bytes(), source=str(path))
        out = tmp_path / path.name
        out.write_bytes(export_bytes(db, session_id) or b"")
        compared += compare_file(pi, py, out, [sessiongen.UNDEFINED, {"index": 5}], label=path.name)
    assert compared > 50


def test_pi_reads_a_session_written_on_the_database(pi: PiReference, pg_url: str, tmp_path: Path) -> None:
    manager = PostgresRepository(pg_url).create(str(tmp_path))
    u1 = manager.append_message({"role": "user", "content": "plan the refactor", "timestamp": 1})
    a1 = manager.append_message({"role": "assistant", "content": [{"type": "text", "text": "step 1"}],
                                 "timestamp": 2})
    manager.append_label_change(u1, "start")
    manager.append_message({"role": "user", "content": "go on", "timestamp": 3})
    manager.append_message({"role": "assistant", "content": [{"type": "text", "text": "step 2"}], "timestamp": 4})
    manager.append_compaction("## Goal\nrefactor", a1, 1234)
    manager.append_message({"role": "user", "content": "after compaction", "timestamp": 5})
    manager.branch(u1)
    manager.append_message({"role": "assistant", "content": [{"type": "text", "text": "other way"}],
                            "timestamp": 6})
    out = tmp_path / "written.jsonl"
    out.write_bytes(export_bytes(database(pg_url), manager.get_session_id()) or b"")
    ids = [e["id"] for e in manager.get_entries()]
    assert compare_file(pi, PythonSide(tmp_path), out, [sessiongen.UNDEFINED, None, *ids],
                        label="written on the database") == len(ids) + 2


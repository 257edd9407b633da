"""`picontext store import` / `export`: JSONL files in and out of the database, losslessly.

Import keeps every line of the file as it is (blank, unreadable and torn lines, odd numbers,
unknown entry types, a missing final newline), so exporting gives back the same bytes; only the
header's id is interpreted, as the session's key. A file that is not a session is refused with
the same one-line message as opening it.
"""

from __future__ import annotations

from typing import Any

from picontext import _json
from picontext.errors import SessionFormatError
from picontext.session.postgres.database import Database
from picontext.session.postgres.store import Batch, PgSessionStore, clean_text
from picontext.session.protocol import Tail
from picontext.session.store import _is_js_falsy, parsed_values, read_session_bytes


def batch_of_bytes(data: bytes) -> tuple[Batch, bool]:
    """Every line of a file as stored rows, and whether the file ends with a newline."""
    lines = data.split(b"\n")
    ends_with_newline = lines[-1] == b""
    if ends_with_newline:
        lines.pop()
    batch = Batch()
    for raw in lines:
        value: Any = None
        parsed = bool(raw.strip(b" \t\r\n\x0b\x0c"))
        if parsed:
            try:
                value = _json.loads(raw)
            except _json.JsonLineError:
                parsed = False
        batch.add(raw, value, parsed=parsed)
    return batch, ends_with_newline


def import_bytes(db: Database, data: bytes, *, source: str = "<bytes>") -> tuple[str, Tail]:
    """Store a session file's bytes; returns its session id. FileExistsError if the id is taken."""
    batch, ends_with_newline = batch_of_bytes(data)
    header = batch.header
    if header is None or not _header_first(batch):
        raise SessionFormatError(f"Session file is not a valid pi session: {source}", path=source)
    session_id = header["id"]
    if clean_text(session_id) != session_id or not session_id:
        raise SessionFormatError(f"Session id {session_id!r} cannot be a database key (empty, NUL or a lone "
                                 f"surrogate): {source}", path=source)
    store = PgSessionStore(db, session_id)
    return session_id, store.create_lines(batch, ends_with_newline=ends_with_newline)


def _header_first(batch: Batch) -> bool:
    """The file's first parsed, non-falsy value is the header (the rule for a valid session)."""
    for value in parsed_values(batch.lines):
        if _is_js_falsy(value):
            continue
        return value is batch.header or value == batch.header
    return False


def import_file(db: Database, path: str) -> tuple[str, Tail]:
    """A FIFO, a device or a directory is refused before it is opened, a file that does not
    start as a session before more than 1 MiB of it is read (SessionFormatError)."""
    return import_bytes(db, read_session_bytes(path), source=path)


def export_bytes(db: Database, session_id: str) -> bytes | None:
    return PgSessionStore(db, session_id).export_bytes()

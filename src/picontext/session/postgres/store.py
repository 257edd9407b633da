"""`PgSessionStore`: one session's log in PostgreSQL, behind the same `SessionStore` protocol as
the JSONL file (docs/storage.md).

Each line of the equivalent JSONL file is one `picontext_entry` row, keyed by (session, seq), its
bytes stored exactly as written; parsing goes through the same code as a file, so what a session
holds, projects to and exports as does not depend on where it is stored.

Concurrency rule: the tail is (generation, number of lines). An append names the tail it
extends; `picontext_append` takes the session's writer lock, compares, and inserts all lines or
none, in one statement and one transaction (one round trip on an autocommit connection). A
writer that is behind gets `StaleSessionError`; two writers can never both extend the same tail.
The writer section (`writer()`/`awriter()`) is a transaction holding the same lock on a pooled
connection; the holder's appends (same thread or asyncio task) go through that connection,
everybody else's appends wait for it in the server until it ends (`lock_timeout` bounds the wait
for a section, not for an append).

Sessions are named by id; `PostgresRepository` (repository.py) opens them as `SessionManager`s.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
import orjson
import psycopg

from picontext import _json
from picontext._clock import js_date_ms
from picontext.errors import (
    SessionError,
    SessionLockedError,
    SessionWriteError,
    StaleSessionError,
    WriteOutcomeUnknown,
)
from picontext.session.postgres.database import (
    Database,
    StoreUnavailableError,
    answer_lost,
    connection_lost,
    database,
)
from picontext.session.postgres.facts import FactsDelta
from picontext.session.protocol import ListingFacts, LoadResult, Tail
from picontext.session.records import (
    LAZY_TYPES,
    MessageHead,
    RawLine,
    decode_head,
    is_current,
    is_header,
    is_js_falsy,
    parse_full,
    parse_line,
    parse_rest_lazily,
    parse_session_bytes,
)

LOCK_POLL = 0.005
_encode_json = msgspec.json.Encoder().encode
_decode_heads = msgspec.json.Decoder(list[RawLine]).decode
LINE_WINDOW = 4096  # records fetched together when one deferred line is needed
# Written with `$n` placeholders, run by a RawCursor: psycopg's conversion of `%s` placeholders
# was a fifth of an append's client CPU (docs/performance.md).
_PARAMS = ", ".join(f"${n}" for n in range(1, 16))
APPEND_ONE = f"SELECT * FROM picontext_append_one({_PARAMS})"
APPEND = f"SELECT * FROM picontext_append({_PARAMS})"
# The writer sections this thread or task holds: (url, session) -> the section's connection.
_HELD: contextvars.ContextVar[dict[tuple[str, str], Any] | None] = contextvars.ContextVar("picontext_pg_held",
                                                                                          default=None)


def _held() -> dict[tuple[str, str], Any]:
    return _HELD.get() or {}


def _connection_failed(exc: BaseException) -> bool:
    """The store error came from a broken or missing connection (worth one retry), not from a
    statement the server refused (read-only database, disk full, timeout: retrying repeats it)."""
    cause = exc.__cause__
    return cause is None or connection_lost(cause)


def clean_text(value: Any) -> str | None:
    """A str PostgreSQL `text` accepts (no NUL, no lone surrogates), or None for anything else."""
    if not isinstance(value, str):
        return None
    if "\x00" in value:
        value = value.replace("\x00", "")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "replace").decode("utf-8")
    return value


def fact_bytes(value: str | None) -> bytes | None:
    """A listing string as stored (bytea: exact, NUL and lone surrogates included)."""
    return None if value is None else value.encode("utf-8", "surrogatepass")


def fact_text(value: bytes | None) -> str | None:
    return None if value is None else bytes(value).decode("utf-8", "surrogatepass")


def encode_line(entry: Any) -> bytes:
    """The JSONL line of an entry, without its newline."""
    if type(entry) is RawLine:
        return bytes(entry.line)
    return _json.dumps_line(entry)[:-1]


def head_of(line: bytes) -> bytes | None:
    """What a lazy load needs of a line without the line itself (type, id, parentId, message
    role, as the JSONL store's lazy load decodes them), as JSON; None for a line that is always
    read whole (not a bulky entry type, or not decodable)."""
    head = decode_head(line)
    if head is None or type(head.type) is not str or head.type not in LAZY_TYPES:
        return None
    fields: dict[str, Any] = {"type": head.type}
    if head.id is not msgspec.UNSET:
        fields["id"] = head.id
    if head.parentId is not msgspec.UNSET:
        fields["parentId"] = head.parentId
    message = head.message
    if message is None:
        fields["message"] = None
    elif type(message) is MessageHead:
        fields["message"] = {} if message.role is msgspec.UNSET else {"role": message.role}
    return _encode_json(fields)


def _columns(entry: Any) -> tuple[str | None, str | None, str | None]:
    if type(entry) is RawLine:
        return clean_text(entry.id), clean_text(entry.parent_id), clean_text(entry.type)
    if isinstance(entry, dict):
        return clean_text(entry.get("id")), clean_text(entry.get("parentId")), clean_text(entry.get("type"))
    return None, None, None


class Batch:
    """Lines to store with their index columns and the listing facts they add."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.ids: list[str | None] = []
        self.parents: list[str | None] = []
        self.types: list[str | None] = []
        self.heads: list[bytes | None] = []
        self.facts = FactsDelta()
        self.header: dict[str, Any] | None = None

    def add(self, line: bytes, value: Any, *, parsed: bool = True) -> None:
        """One line; `value` is its parsed JSON (None with parsed=False for a line that does not
        parse). The first header seen is the session's; every later value feeds the facts."""
        self.lines.append(line)
        self.facts.size += len(line) + 1
        entry_id, parent, kind = _columns(value) if parsed else (None, None, None)
        self.ids.append(entry_id)
        self.parents.append(parent)
        self.types.append(kind)
        self.heads.append(head_of(line) if parsed else None)
        if not parsed or is_js_falsy(value):
            return
        if self.header is None and is_header(value):
            self.header = value
            return
        self.facts.add(value)

    def call(self, session_id: str, generation: Any, expect: int | None) -> tuple[str, tuple[Any, ...]]:
        """The statement that appends this batch after tail (generation, expect) (any tail when
        `expect` is None): one line goes as plain parameters, several as arrays."""
        f = self.facts
        facts = (f.entry_count, f.message_count, f.size, f.name_set, fact_bytes(f.name),
                 fact_bytes(f.first_message), f.last_activity_ms)
        if len(self.lines) == 1:
            return APPEND_ONE, (session_id, generation, expect, self.ids[0], self.parents[0], self.types[0],
                                self.heads[0], self.lines[0], *facts)
        return APPEND, (session_id, generation, expect, self.ids, self.parents, self.types, self.heads, self.lines,
                        *facts)

    @classmethod
    def of_entries(cls, entries: list[Any]) -> Batch:
        batch = cls()
        for entry in entries:
            batch.add(encode_line(entry), entry)
        return batch


class LineSource:
    """Fetches the lines a lazy load left in the database, for `RawLine.line`: a window of
    records at a time, from the same generation of the log (a log replaced meanwhile is an
    error, not a wrong line)."""

    def __init__(self, store: PgSessionStore, generation: int) -> None:
        self.store = store
        self.generation = generation
        self.pending: set[int] = set()  # deferred records not fetched yet
        self.lines: dict[int, bytes] = {}  # fetched, not handed out yet

    def line_of(self, seq: int) -> bytes:
        line = self.lines.pop(seq, None)
        if line is None:
            # A projection parses runs of neighbouring records (the context is the tail of a
            # path), forwards or backwards: fetch the records around this one with it.
            lo, hi = max(0, seq - LINE_WINDOW // 2), seq + LINE_WINDOW // 2
            self._fetch(seq, lo, hi)
            line = self.lines.pop(seq, None)
            if line is None:
                raise SessionError(f"Session {self.store.session_id} was replaced while being read "
                                   f"(record {seq} is gone): reload it")
        return line

    def _fetch(self, seq: int, lo: int, hi: int) -> None:
        rows = self.store._fetch(
            "SELECT e.seq, e.line FROM picontext_entry e JOIN picontext_session s ON s.id = e.session_id"
            " WHERE e.session_id = %s AND s.generation = %s AND e.seq >= %s AND e.seq < %s AND e.head IS NOT NULL",
            (self.store.session_id, self.generation, lo, hi), binary=True, many=True)
        pending, lines = self.pending, self.lines
        for number, line in rows:
            if number in pending or number == seq:
                lines[number] = bytes(line)
                pending.discard(number)


class PgSessionStore:
    """One session (by its header id) in the database at `url`."""

    def __init__(self, url: str | Database, session_id: str, *, lock_timeout: float = 30.0) -> None:
        self.db = url if isinstance(url, Database) else database(url)
        self.session_id = session_id
        self.lock_timeout = lock_timeout
        self._key = (self.db.url, session_id)

    @property
    def location(self) -> str:
        return f"{self.db.display}#{self.session_id}"

    @property
    def path(self) -> str:  # the name older callers use for `location`
        return self.location

    def __repr__(self) -> str:
        return f"PgSessionStore({self.location!r})"

    # ------------------------------------------------------------------ connections

    @contextlib.contextmanager
    def _conn(self, *, writing: bool = False) -> Iterator[Any]:
        held = _held().get(self._key)
        if held is not None:
            try:
                yield held
            except psycopg.Error as exc:
                raise self.db.unavailable(exc, writing=writing, what=self.session_id) from exc
            return
        with self.db.connection(writing=writing, what=self.session_id) as conn:
            yield conn

    def _retrying(self) -> bool:
        """A pooled connection that fails is retried once on a fresh one (it may have been dropped
        while idle); inside a writer section the section's connection is the only one."""
        return self._key not in _held()

    def _fetch(self, sql: str, params: tuple[Any, ...], *, binary: bool = False, many: bool = False) -> Any:
        """Run one read-only statement (retried once if the connection fails)."""
        for attempt in (0, 1):
            try:
                with self._conn() as conn:
                    cur = conn.execute(sql, params, binary=binary)
                    return cur.fetchall() if many else cur.fetchone()
            except StoreUnavailableError:
                if attempt or not self._retrying():
                    raise
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ reading

    def exists(self) -> bool:
        return self._fetch("SELECT 1 FROM picontext_session WHERE id = %s", (self.session_id,)) is not None

    def tail(self) -> Tail | None:
        row = self._fetch("SELECT generation, next_seq FROM picontext_session WHERE id = %s", (self.session_id,))
        return None if row is None else Tail(row[0], row[1])

    def _read(self, after: int) -> tuple[int, int, bool, list[bytes]] | None:
        """(generation, next_seq, ends_with_newline, the lines from seq `after` on), read in one
        statement, so the lines and the tail are of the same moment."""
        rows = self._fetch(
            "SELECT s.generation, s.next_seq, s.ends_with_newline, e.line FROM picontext_session s"
            " LEFT JOIN picontext_entry e ON e.session_id = s.id AND e.seq >= %s"
            " WHERE s.id = %s ORDER BY e.seq",
            (after, self.session_id), binary=True, many=True)
        if not rows:
            return None
        generation, next_seq, ends_with_newline, _ = rows[0]
        lines = [bytes(r[3]) for r in rows] if rows[0][3] is not None else []
        return generation, next_seq, ends_with_newline, lines

    def load(self, *, lazy: bool = False) -> LoadResult:
        notice = None
        if lazy:
            try:
                result = self._load_lazily()
            except (msgspec.DecodeError, StopIteration) as exc:
                # The heads are a copy of what the lines say, for speed; the lines are the session.
                result = None
                notice = f"its stored heads are unreadable ({exc or 'fewer than its records'}); read whole instead"
            if result is not None:
                return result
        got = self._read(0)
        if got is None:
            return LoadResult()
        generation, next_seq, ends_with_newline, lines = got
        size = sum(map(len, lines)) + len(lines) - (0 if ends_with_newline or not lines else 1)
        if ends_with_newline or not lines:
            lines.append(b"")  # what splitting a file's bytes on "\n" leaves after the last newline
        result = parse_session_bytes(lines, lazy=lazy)
        result.size = size
        result.tail = Tail(generation, next_seq)
        if notice is not None:
            result.notices.append(notice)
        return result

    def _load_lazily(self) -> LoadResult | None:
        """A lazy load that ships the heads of the bulky entries, not their lines (None: read it
        whole instead).

        One statement returns, in record order, a kind per record (`H`: a bulky entry, of which
        only the head is sent — type, id, parentId, message role, what the JSONL store's lazy
        load decodes from a file's lines; `L`: anything else, sent whole: header, compactions,
        labels, lines that do not parse), the heads as one JSON array and the other lines joined
        by newlines. Heads become `RawLine`s that fetch their line when first parsed
        (`LineSource`), so a resume reads the lines of the context it projects, not the session.
        """
        row = self._fetch("SELECT * FROM picontext_load_heads(%s)", (self.session_id,), binary=True)
        if row is None:
            return LoadResult()
        generation, next_seq, ends_with_newline, size, kinds, heads_json, lines_blob = row
        if kinds is None or len(kinds) != next_seq:
            return None
        heads = iter(_decode_heads(bytes(heads_json)))
        lines = iter(bytes(lines_blob).split(b"\n")) if lines_blob is not None else iter(())
        result = LoadResult()
        entries = result.entries
        append = entries.append
        source = LineSource(self, generation)
        last = next_seq - 1 if not ends_with_newline else -1
        header_checked = False
        for seq, kind in enumerate(bytes(kinds)):
            if kind == 72:  # "H"
                if not header_checked:
                    return None  # the first record is not a header: read as a file would be
                raw = next(heads)
                raw.seq = seq
                raw.source = source
                append(raw)
                continue
            line = next(lines)
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                parse_line(line, seq + 1, result, last=seq == last)
                continue
            if is_js_falsy(value):
                continue
            if not header_checked:
                if not (is_header(value) and is_current(value)):
                    return None  # not a current header: parsed (and migrated) from the whole lines
                header_checked = True
            append(value)
        source.pending.update(range(next_seq))
        result.missing_newline = not ends_with_newline
        result.valid = bool(entries) and is_header(entries[0])
        result.size = size
        result.tail = Tail(generation, next_seq)
        return result

    def read_since(self, tail: Tail, *, lazy: bool = False) -> LoadResult | None:
        got = self._read(tail.offset)
        if got is None:
            return None
        generation, next_seq, _ends, lines = got
        if generation != tail.generation or next_seq < tail.offset:
            return None
        result = LoadResult()
        (parse_rest_lazily if lazy else parse_full)(lines, 0, result)
        for skipped in result.skipped:  # numbered as lines of the whole log
            skipped.line += tail.offset
        result.size = sum(map(len, lines)) + len(lines)
        result.tail = Tail(generation, next_seq)
        return result

    def read_header(self) -> dict[str, Any] | None:
        rows = self._fetch("SELECT line FROM picontext_entry WHERE session_id = %s ORDER BY seq LIMIT 64",
                           (self.session_id,), binary=True, many=True)
        for (raw,) in rows:
            if not bytes(raw).strip():
                continue
            try:
                value = _json.loads(bytes(raw))
            except _json.JsonLineError:
                continue
            if is_js_falsy(value):
                continue
            return value if is_header(value) else None
        return None

    def facts(self) -> ListingFacts | None:
        header = self.read_header()
        if header is None:
            return None
        row = self._fetch(
            "SELECT name, message_count, entry_count, first_message, last_activity_ms, size,"
            " extract(epoch FROM updated_at) * 1000 FROM picontext_session WHERE id = %s", (self.session_id,))
        if row is None:
            return None
        return ListingFacts(header=header, name=fact_text(row[0]), message_count=row[1], entry_count=row[2],
                            first_message=fact_text(row[3]) or "", last_activity_ms=row[4], size=row[5],
                            modified_ms=float(row[6]))

    def export_bytes(self) -> bytes | None:
        """The session as a JSONL file, byte for byte; None when it does not exist."""
        got = self._read(0)
        if got is None:
            return None
        _generation, _next_seq, ends_with_newline, lines = got
        if not lines:
            return b""
        return b"\n".join(lines) + (b"\n" if ends_with_newline else b"")

    # ------------------------------------------------------------------ writing

    def append(self, entries: list[Any], *, expect: Tail | None = None) -> Tail:
        if not entries:
            current = self.tail()
            if current is None:
                raise SessionWriteError(f"Session disappeared: {self.location}", missing=True)
            return current
        batch = Batch.of_entries(entries)
        sql, params = batch.call(self.session_id, expect.generation if expect else 0,
                                 expect.offset if expect else None)
        retried = False
        lost: WriteOutcomeUnknown | None = None  # the first attempt was sent and its answer lost
        while True:
            try:
                status, generation, next_seq = self._call(sql, params)
                break
            except SessionWriteError as exc:
                # The connection failed: maybe before the statement ran, maybe after it committed.
                # Only a conditional append can be retried safely: the tail check tells which.
                if isinstance(exc, WriteOutcomeUnknown) and lost is None:
                    lost = exc
                if retried or expect is None or not self._retrying() or not _connection_failed(exc):
                    if lost is not None and lost is not exc:
                        raise WriteOutcomeUnknown(f"{lost}; checking it failed too: {exc}") from exc
                    raise
                retried = True
        if status == 1 and retried and self._is_ours(expect, batch.lines):
            return Tail(generation, next_seq)  # the first attempt did commit
        if status == 2:
            raise SessionWriteError(f"Session disappeared: {self.location}", missing=True)
        if status == 1:
            assert expect is not None
            raise StaleSessionError(
                f"Session {self.session_id} was changed by another writer: it now has {next_seq} records, "
                f"this writer last saw {expect.offset}"
                + (" (and the log was replaced)" if generation != expect.generation else "")
                + "; nothing was appended: reload the session and retry")
        return Tail(generation, next_seq)

    def _call(self, sql: str, params: tuple[Any, ...]) -> Any:
        """One append statement, through the writer section's connection if this thread or task
        holds it, else on a pooled one (autocommit: the statement is its own transaction, one
        round trip)."""
        held = _held().get(self._key)
        if held is None:
            return self.db.call(sql, params, writing=True, what=self.session_id)
        try:
            return psycopg.RawCursor(held).execute(sql, params).fetchone()
        except psycopg.Error as exc:
            raise self.db.unavailable(exc, writing=True, what=self.session_id) from exc

    def _is_ours(self, expect: Tail | None, lines: list[bytes]) -> bool:
        """The log right after `expect` is exactly `lines` (and nothing else)."""
        if expect is None:
            return False
        got = self._read(expect.offset)
        return got is not None and got[0] == expect.generation and got[1] == expect.offset + len(lines) \
            and got[3] == lines

    def create(self, file_entries: list[Any]) -> Tail:
        return self.create_lines(Batch.of_entries(file_entries), ends_with_newline=True)

    def create_lines(self, batch: Batch, *, ends_with_newline: bool) -> Tail:
        """Insert a new session from whole lines (import keeps a file's missing final newline).

        If the connection breaks while the COMMIT's answer is awaited, the session may or may
        not exist: it is read back (on a fresh connection). Stored exactly as sent: created;
        absent: created now; another log under this id: FileExistsError. Only if it cannot even
        be read does the caller get WriteOutcomeUnknown."""
        header = batch.header or {}
        if header.get("id") != self.session_id:
            raise ValueError(f"header id {header.get('id')!r} is not the store's session {self.session_id!r}")
        try:
            return self._create_once(batch, ends_with_newline)
        except WriteOutcomeUnknown as lost:
            if not self._retrying():
                raise
            try:
                got = self._read(0)
                if got is None:
                    return self._create_once(batch, ends_with_newline)
            except SessionError as exc:
                raise WriteOutcomeUnknown(f"{lost}; checking it failed too: {exc}") from exc
            generation, next_seq, ends, lines = got
            if (generation, next_seq, ends, lines) == (1, len(batch.lines), ends_with_newline, batch.lines):
                return Tail(generation, next_seq)  # it did commit
            raise FileExistsError(f"session already exists: {self.location}") from None

    def _create_once(self, batch: Batch, ends_with_newline: bool) -> Tail:
        header = batch.header or {}
        with self._conn(writing=True) as conn, conn.transaction():
            inserted = conn.execute(
                "INSERT INTO picontext_session (id, next_seq, ends_with_newline, cwd, header_timestamp, created_ms,"
                " parent_session) VALUES (%s, 0, true, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                (self.session_id, clean_text(header.get("cwd")) or "", clean_text(header.get("timestamp")),
                 float(js_date_ms(header.get("timestamp"))), clean_text(header.get("parentSession"))),
            ).rowcount
            if not inserted:
                raise FileExistsError(f"session already exists: {self.location}")
            tail = self._insert(conn, batch, 1, 0)
            if not ends_with_newline:
                conn.execute("UPDATE picontext_session SET ends_with_newline = false, size = size - 1 WHERE id = %s",
                             (self.session_id,))
        return tail

    def _insert(self, conn: Any, batch: Batch, generation: int, expect: int) -> Tail:
        row: Any = psycopg.RawCursor(conn).execute(*batch.call(self.session_id, generation, expect)).fetchone()
        status, generation, next_seq = row
        if status != 0:  # impossible inside the transaction that holds the row
            raise StaleSessionError(f"Session {self.session_id} changed while being written")
        return Tail(generation, next_seq)

    def replace(self, file_entries: list[Any], *, backup_suffix: str | None = None) -> Tail:
        batch = Batch.of_entries(file_entries)
        header = batch.header or {}
        with self._conn(writing=True) as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('picontext:' || %s, 0))", (self.session_id,))
            row = conn.execute("SELECT generation FROM picontext_session WHERE id = %s FOR UPDATE",
                               (self.session_id,)).fetchone()
            if row is None:
                conn.execute("INSERT INTO picontext_session (id, next_seq) VALUES (%s, 0)", (self.session_id,))
                row = (0,)
            elif backup_suffix:
                conn.execute(
                    "INSERT INTO picontext_backup (session_id, suffix, content)"
                    " SELECT s.id, %s, coalesce((SELECT string_agg(e.line, '\\x0a'::bytea ORDER BY e.seq)"
                    "   FROM picontext_entry e WHERE e.session_id = s.id), '') || CASE WHEN s.ends_with_newline"
                    "   AND s.next_seq > 0 THEN '\\x0a'::bytea ELSE ''::bytea END"
                    " FROM picontext_session s WHERE s.id = %s ON CONFLICT DO NOTHING",
                    (backup_suffix, self.session_id))
            generation = row[0] + 1
            conn.execute("DELETE FROM picontext_entry WHERE session_id = %s", (self.session_id,))
            conn.execute(
                "UPDATE picontext_session SET generation = %s, next_seq = 0, ends_with_newline = true, cwd = %s,"
                " header_timestamp = %s, created_ms = %s, parent_session = %s, name = NULL, first_message = ''::bytea,"
                " entry_count = 0, message_count = 0, size = 0, last_activity_ms = 0 WHERE id = %s",
                (generation, clean_text(header.get("cwd")) or "", clean_text(header.get("timestamp")),
                 float(js_date_ms(header.get("timestamp"))), clean_text(header.get("parentSession")),
                 self.session_id))
            return self._insert(conn, batch, generation, 0)

    def backup(self, suffix: str) -> bytes | None:
        row = self._fetch("SELECT content FROM picontext_backup WHERE session_id = %s AND suffix = %s",
                          (self.session_id, suffix), binary=True)
        return None if row is None else bytes(row[0])

    def delete(self) -> bool:
        with self._conn(writing=True) as conn:
            return bool(conn.execute("DELETE FROM picontext_session WHERE id = %s", (self.session_id,)).rowcount)

    # ------------------------------------------------------------------ writer section

    # A writer section is one transaction on a pooled connection holding the session's
    # transaction-level advisory lock (the one every append waits for). Transaction-level, not
    # session-level: through a transaction-pooling PgBouncer a session-level lock would stay on
    # whichever server connection took it. Appends in the section commit when it ends, and the
    # connection goes back to the pool (a section used to open, and close, one of its own).

    def _try_lock(self, conn: Any, deadline: float) -> bool:
        """One attempt at the section's lock; SessionLockedError once `deadline` has passed."""
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            conn.execute("BEGIN")
        row = conn.execute("SELECT pg_try_advisory_xact_lock(hashtextextended('picontext:' || %s, 0))",
                           (self.session_id,)).fetchone()
        if row[0]:
            return True
        if time.monotonic() > deadline:
            raise SessionLockedError(f"Session {self.session_id} is locked by another writer ({self.db.display})")
        return False

    @contextlib.contextmanager
    def _locking(self, pool: Any, conn: Any) -> Iterator[float]:
        """Around the wait for the lock (yields its deadline): on any failure the transaction is
        rolled back and the connection given back."""
        try:
            yield time.monotonic() + self.lock_timeout
        except BaseException as exc:
            self._end(pool, conn, commit=False)
            if isinstance(exc, psycopg.Error):
                raise self.db.unavailable(exc, writing=True, what=self.session_id) from exc
            raise

    @contextlib.contextmanager
    def _holding(self, pool: Any, conn: Any) -> Iterator[Tail | None]:
        """The section itself, once locked: this thread's or task's appends go through `conn`.
        Its writes are committed at the end, also when the body failed (what it appended before
        the failure stays appended, as with a file). Then the body's error is the one raised: the
        caller checks what was stored anyway (SessionManager settles its section's writes)."""
        token = _HELD.set({**_held(), self._key: conn})
        try:
            yield self.tail()
        except BaseException:
            _HELD.reset(token)
            self._end(pool, conn, commit=True, quiet=True)
            raise
        _HELD.reset(token)
        self._end(pool, conn, commit=True)

    def _end(self, pool: Any, conn: Any, *, commit: bool, quiet: bool = False) -> None:
        """Commit (or roll back) what the section wrote, which releases the lock, and give the
        connection back (the pool discards it if it broke). A COMMIT whose answer is lost leaves
        the section's writes stored or not: WriteOutcomeUnknown; a connection that broke before
        the COMMIT took them with it: SessionWriteError."""
        TS = psycopg.pq.TransactionStatus
        status = conn.info.transaction_status
        try:
            if status == TS.UNKNOWN or conn.closed:  # broken before the end: the server rolled back
                if commit and not quiet:
                    raise SessionWriteError(f"Lost the connection to {self.db.display} before session "
                                            f"{self.session_id}'s writer section was committed: its writes were "
                                            "not stored")
            elif status != TS.IDLE:
                conn.execute("COMMIT" if commit and status != TS.INERROR else "ROLLBACK")
        except psycopg.Error as exc:
            if commit and not quiet:
                if status == TS.INTRANS and answer_lost(exc):
                    raise WriteOutcomeUnknown(
                        f"Lost the connection to {self.db.display} while committing session {self.session_id} "
                        f"({self.db.reason(exc)}): whether its writer section's writes were stored is not known yet"
                    ) from exc
                raise self.db.failure(exc, writing=True, what=self.session_id) from exc
        finally:
            self.db.checkin(pool, conn)

    @contextlib.contextmanager
    def writer(self) -> Iterator[Tail | None]:
        if self._key in _held():
            yield self.tail()
            return
        pool, conn = self.db.checkout(what=self.session_id)
        with self._locking(pool, conn) as deadline:
            while not self._try_lock(conn, deadline):
                time.sleep(LOCK_POLL)
        with self._holding(pool, conn) as tail:
            yield tail

    @contextlib.contextmanager
    def try_writer(self) -> Iterator[Tail | None]:
        """`writer()` without the wait: one try at the lock, SessionLockedError at once when
        another writer holds it (the connection goes back to the pool)."""
        if self._key in _held():
            yield self.tail()
            return
        pool, conn = self.db.checkout(what=self.session_id)
        with self._locking(pool, conn):
            self._try_lock(conn, 0.0)  # a deadline already past: refused at the first miss
        with self._holding(pool, conn) as tail:
            yield tail

    async def _acheckout(self) -> tuple[Any, Any]:
        """`db.checkout` off the event loop; if the task is cancelled meanwhile (an abort), the
        connection the thread still gets goes back to the pool instead of being lost to it."""
        checkout = asyncio.ensure_future(asyncio.to_thread(self.db.checkout, what=self.session_id))
        try:
            return await asyncio.shield(checkout)
        except asyncio.CancelledError:
            def give_back(done: asyncio.Future[tuple[Any, Any]]) -> None:
                if not done.cancelled() and done.exception() is None:
                    self.db.checkin(*done.result())

            checkout.add_done_callback(give_back)
            raise

    @contextlib.asynccontextmanager
    async def awriter(self) -> AsyncIterator[Tail | None]:
        """`writer()` for asyncio: the waits for a connection and for the lock run off the event
        loop, so it keeps running while another process holds the section."""
        if self._key in _held():
            yield await asyncio.to_thread(self.tail)
            return
        pool, conn = await self._acheckout()
        with self._locking(pool, conn) as deadline:
            while True:
                if await asyncio.to_thread(self._try_lock, conn, deadline):
                    break
                await asyncio.sleep(LOCK_POLL)
        with self._holding(pool, conn) as tail:
            yield tail

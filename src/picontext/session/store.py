"""`JsonlSessionStore`: a session in one JSONL file, read the way Pi reads it, written safely.

Implements the `SessionStore` protocol (`protocol.py`); this is the only module that opens,
stats or locks a session file.

Writing rules (docs/storage.md):
* one `os.write` per batch of whole lines on an O_APPEND descriptor, under an advisory
  `flock`, so two processes never interleave or lose a line; with `expect=`, the batch is
  refused (StaleSessionError) when the file no longer ends where the writer last saw it;
* before appending, the last byte on disk is checked: a torn line left by a crash (ours or
  anybody's) is closed with a newline first, so the new entry starts on a fresh line; the torn
  fragment itself is never modified;
* a failed write (full disk, ...) is truncated back to the previous size and raised: the file
  is byte-identical to before and the caller keeps nothing it could not persist;
* whole-file writes (new files, legacy upgrades) go to a temporary file that is fsynced and
  renamed over the target; an upgraded legacy file keeps its original as `<name>.v<N>.bak`.
* fsync: on creation and whole-file writes always; on appends only when `fsync=True`.

Reading refuses anything that is not a regular file (FIFO, device, directory) before opening it.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import fcntl
import os
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import msgspec

from picontext import _files, _json
from picontext._gc import gc_paused
from picontext.errors import SessionFormatError, SessionLockedError, SessionWriteError, StaleSessionError
from picontext.session import jsonl_columns, jsonl_index
from picontext.session.long_lines import LONG_LINE, LongLine, hollow_content, load_long
from picontext.session.paths import ensure_dir
from picontext.session.protocol import ListingFacts, LoadResult, SessionStore, SkippedLine, Tail, account_listing_fact
from picontext.session.records import (
    HEADER_SCAN_LIMIT,
    RawLine,
    decode_head,
    is_header,
    is_js_falsy,
    parse_appended,
    parse_session_bytes,
    parsed_values,
)

__all__ = [
    "JsonlSessionStore",
    "ListingFacts",
    "LoadResult",
    "RawLine",
    "SessionStore",
    "SkippedLine",
    "Tail",
    "is_header",
    "load_file_entries",
    "parse_session_bytes",
    "parsed_values",
    "read_session_bytes",
    "read_session_file",
    "read_session_header",
]

# Real paths of the session files whose writer section this thread or task holds.
_HELD: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("picontext_held_locks", default=frozenset())


def _not_regular(path: str, kind: str) -> SessionFormatError:
    return SessionFormatError(f"not a regular file ({kind}), cannot be a session: {path}", path=path)


def _open_regular(path: str, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """Open `path` only if it is a regular file (`_files.open_regular`: checked before opening,
    so a FIFO never blocks us, and again on the descriptor). FileNotFoundError passes through."""
    try:
        return _files.open_regular(path, flags, mode)
    except _files.NotRegularFile as exc:
        raise _not_regular(path, exc.kind) from None


def _generation(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


def read_session_file(path: str, *, lazy: bool = False) -> LoadResult:
    """Read and parse a whole file; a missing file is an empty result (see parse_session_bytes).

    (Building the manager's entry objects from cached per-entry columns was measured slower than
    decoding the heads of the lines directly, see docs/performance.md, so loading a session reads
    the file itself; `indexed_columns` serves `context --json`, which builds no entry objects.)
    """
    try:
        fd = _open_regular(path)
    except FileNotFoundError:
        return LoadResult()
    with open(fd, "rb") as f:
        st = os.fstat(fd)
        refused = _refused_early(f, st)
        if refused is not None:
            return refused
        source = FileLines(path, _generation(st)) if lazy else None
        lines, size = _split_file(f, source)
    with gc_paused():
        result = parse_session_bytes(lines, lazy=lazy, source=source)
    result.size = size
    result.tail = Tail(_generation(st), size)
    return result


def read_appended(path: str, tail: Tail, *, lazy: bool = False) -> LoadResult | None:
    """Complete lines appended to `path` after `tail`, or None when the file no longer extends it."""
    try:
        fd = _open_regular(path)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if _generation(st) != tail.generation or st.st_size < tail.offset:
            return None
        offset = tail.offset
        data = os.pread(fd, st.st_size - offset, offset) if st.st_size > offset else b""
        if offset > 0 and data and os.pread(fd, 1, offset - 1) != b"\n":
            # `tail` ended inside a torn line: whatever follows up to the next newline belongs to
            # that line (as a whole reader sees it), so it is not a record of its own.
            cut = data.find(b"\n")
            if cut < 0:
                return LoadResult(tail=tail)
            offset += cut + 1
            data = data[cut + 1 :]
    finally:
        os.close(fd)
    data = data[: data.rfind(b"\n") + 1]  # complete lines only: a writer may be mid-line
    with gc_paused():
        result = parse_appended(data, lazy=lazy)
    result.tail = Tail(tail.generation, offset + len(data))
    return result


def indexed_facts(path: str) -> ListingFacts | None:
    """Listing facts through the index cache: when the file did not change since it was indexed
    (`CoveredPrefix.unchanged`), only the index and the two ends of the file are read; otherwise
    the file is, and the index is extended (the file grew and still starts with what was indexed)
    or rebuilt (anything else), and written back."""
    real = os.path.realpath(path)
    fd = _open_regular(path)
    try:
        checked_ns = jsonl_index.clock_ns()  # before the stat: see CoveredPrefix.clean
        st = os.fstat(fd)
        data = jsonl_index.read_index(real, st)
        if data is not None and data.unchanged(st, fd):
            return jsonl_index.facts_of(data, st)
        with open(fd, "rb", closefd=False) as f:
            if _refused_early(f, st) is not None:
                return None
            buffer = f.read()
    finally:
        os.close(fd)
    hasher = None if data is None else jsonl_index.check_prefix(data, st, buffer)
    if data is None or hasher is None:
        data = jsonl_index.new_index(st)
    before = None if hasher is None else data.state()
    jsonl_index.extend(data, buffer, st, checked_ns, hasher)
    if data.state() != before:
        jsonl_index.write_index(real, data)
    rest = buffer[data.size :]
    if rest.strip():  # an unterminated last line counts if it parses, as in a whole read
        data = msgspec.structs.replace(data)
        jsonl_index.add_line(data, rest)
    return jsonl_index.facts_of(data, st)


def indexed_columns(path: str) -> jsonl_columns.ColumnView | None:
    """The entry columns of `path` through the columns cache (`jsonl_columns.py`), or None when
    the file is not one the columns can describe (the caller then reads it whole). Unchanged file
    (`CoveredPrefix.unchanged`): only the cache and the file's two ends are read; grown with the
    covered bytes unchanged: extended; otherwise rebuilt. Either way written back (unless
    `PICONTEXT_INDEX=0`). Lines are read later, by offset, from the descriptor the view keeps
    (never a mapping: a file truncated meanwhile cannot crash us)."""
    fd = _open_regular(path)
    try:
        checked_ns = jsonl_index.clock_ns()  # before the stat: see CoveredPrefix.clean
        st = os.fstat(fd)
        use_cache = jsonl_index.enabled()
        real = os.path.realpath(path)
        data = jsonl_columns.read_columns(real, st) if use_cache else None
        tail = b""
        if data is None or not data.unchanged(st, fd):
            with open(fd, "rb", closefd=False) as f:
                if _refused_early(f, st) is not None:
                    os.close(fd)
                    return None  # the full reader says why, without reading the rest either
                hasher = None if data is None else jsonl_columns.covers_prefix(data, st, f)
                before = None
                if data is None or hasher is None:
                    data = jsonl_columns.new_columns(st)
                    hasher = jsonl_index.new_hasher()
                    f.seek(0)
                else:
                    before = data.state()
                with gc_paused():
                    tail = jsonl_columns.extend(data, f, st, hasher, checked_ns)
            if use_cache and data.state() != before:
                jsonl_columns.write_columns(real, data)
        if not (data.regular and data.header_seen) or tail.strip():
            os.close(fd)  # an unterminated last line, or a file only the full reader understands
            return None
        return jsonl_columns.ColumnView(data, fd)
    except BaseException:
        os.close(fd)
        raise


_CHUNK = 8 * 1024 * 1024
_LAZY_CHUNK = 64 * 1024
"""A lazy open keeps the lines, so what it reads at a time (and the split copy of it) is pure
overhead: measured against 1 MiB chunks, a 1.2 MB session (one 1.15 MB output) peaks at 1.4x its
size instead of 1.7x, and a 5 MB one holding 2.5 MB of ordinary turns stays at 2.8x instead of
3.1x once parsed (less of the heap is left in holes between the lines); the time to open the
latter is the same (26-33 ms)."""


def _split_file(f: Any, source: FileLines | None = None) -> tuple[list[Any], int]:
    """The file's lines (split on "\\n" only), read in chunks so the whole file is never held
    twice: peak memory is the lines plus one chunk. With a `source` (a lazy load), a line of
    `LONG_LINE` bytes or more is not read into memory: a `LongLine` stands in its place."""
    lines: list[Any] = []
    pending: list[bytes] = []  # the line that straddles chunk boundaries, in parts
    pending_size = 0
    pending_start = 0  # where it starts in the file
    long_start = -1  # where the long line being skipped starts
    size = 0
    while chunk := f.read(_CHUNK if source is None else _LAZY_CHUNK):
        at = size
        size += len(chunk)
        if long_start >= 0:
            cut = chunk.find(b"\n")
            if cut < 0:
                continue
            assert source is not None
            lines.append(source.long_line(long_start, at + cut - long_start))
            long_start, pending_start = -1, at + cut + 1
            chunk = chunk[cut + 1 :]
        parts = chunk.split(b"\n")
        if len(parts) > 1:
            last = parts.pop()
            if source is not None and pending_size + len(parts[0]) >= LONG_LINE:
                # A long line that ends in this chunk: it was not yet long when the chunk before
                # ended, and is left in the file like any other.
                lines.append(source.long_line(pending_start, pending_size + len(parts[0])))
                del parts[0]
            elif pending:
                parts[0] = b"".join((*pending, parts[0]))
            lines.extend(parts)
            pending, pending_size, pending_start = [last], len(last), size - len(last)
        else:
            pending.append(parts[0])
            pending_size += len(parts[0])
        if source is not None and pending_size >= LONG_LINE:
            long_start, pending, pending_size = pending_start, [], 0
    if long_start >= 0:
        assert source is not None
        lines.append(source.long_line(long_start, size - long_start))
    else:
        lines.append(b"".join(pending))
    return lines, size


class FileLines:
    """Gives the lines of a lazily loaded file again, by offset (`RawLine.seq`), so that what
    was parsed is not held as bytes as well, and long lines are never held whole: each read
    opens the file, checks that it is still the one that was read (same inode, long enough) and
    that the line is the entry asked for, or raises SessionFormatError."""

    rereads = True

    def __init__(self, path: str, generation: tuple[int, int]) -> None:
        self.path = path
        self.generation = generation
        self.long: dict[int, int] = {}  # offset -> length of the long lines

    def long_line(self, offset: int, length: int) -> LongLine:
        self.long[offset] = length
        return LongLine(self, offset, length)

    def _changed(self) -> SessionFormatError:
        return SessionFormatError(f"{self.path} changed on disk since it was read (it was replaced or rewritten); "
                                  "open it again", path=self.path)

    def _open(self, end: int) -> int:
        try:
            fd = _open_regular(self.path)
        except FileNotFoundError:
            raise self._changed() from None
        st = os.fstat(fd)
        if _generation(st) != self.generation or st.st_size < end:
            os.close(fd)
            raise self._changed()
        return fd

    def line_of(self, offset: int, entry_id: Any = msgspec.UNSET) -> bytes:
        """The line at `offset`, without its newline; with `entry_id`, checked to be that entry's."""
        line = self._line_at(offset)
        if entry_id is not msgspec.UNSET:
            head = decode_head(line)
            if head is None or head.id != entry_id:
                raise self._changed()
        return line

    def _line_at(self, offset: int) -> bytes:
        length = self.long.get(offset)
        fd = self._open(offset)
        try:
            if length is not None:
                return os.pread(fd, length, offset)
            parts: list[bytes] = []
            at = offset
            while piece := os.pread(fd, 65536, at):
                cut = piece.find(b"\n")
                if cut >= 0:
                    parts.append(piece[:cut])
                    break
                parts.append(piece)
                at += len(piece)
            return b"".join(parts)
        finally:
            os.close(fd)

    def load_long(self, offset: int, length: int, *, texts: bool = True) -> Any:
        fd = self._open(offset + length)
        try:
            return load_long(lambda at, n: os.pread(fd, n, offset + at), length, texts=texts)
        finally:
            os.close(fd)

    def head_of(self, offset: int, entry_id: Any) -> Any:
        """The long line at `offset` (which must hold `entry_id`) without its long strings, each
        "", or None when the line is not long or has a long string outside its message's content."""
        length = self.long.get(offset)
        if length is None:
            return None
        value = self.load_long(offset, length, texts=False)
        if not isinstance(value, dict) or value.get("id", msgspec.UNSET) != entry_id:
            raise self._changed()
        return hollow_content(value)

    def load_entry(self, offset: int, entry_id: Any) -> Any:
        """The value of the entry at `offset`, which must have `entry_id`."""
        length = self.long.get(offset)
        value = _json.loads(self._line_at(offset)) if length is None else self.load_long(offset, length)
        if not isinstance(value, dict) or value.get("id", msgspec.UNSET) != entry_id:
            raise self._changed()
        return value


def read_session_bytes(path: str) -> bytes:
    """The whole of a session file, to copy it elsewhere (`store import`): what is not a regular
    file, or does not start as a session, is refused (SessionFormatError) after reading at most
    its first 1 MiB."""
    with open(_open_regular(path), "rb") as f:
        if _refused_early(f, os.fstat(f.fileno())) is not None:
            raise SessionFormatError(f"Session file is not a valid pi session: {path}", path=path)
        return f.read()


def load_file_entries(path: str) -> list[Any]:
    """Pi `loadEntriesFromFile` without its write: all parsed values, or [] if not a session."""
    result = read_session_file(path)
    return result.entries if result.valid else []


def read_session_header(path: str) -> dict[str, Any] | None:
    """The header if the first parsed value of the file is one, reading at most 1 MiB."""
    with open(_open_regular(path), "rb") as f:
        found, value = _scan_header(f)
    return value if found == "header" else None


def _scan_header(f: Any) -> tuple[str, Any]:
    """What the first HEADER_SCAN_LIMIT bytes of `f` (from its position) say, as Pi's bounded
    header discovery reads them (blank, unreadable and falsy lines skipped): ("header", value),
    ("other", value) for a first value that is not a header, ("limit", None) when the budget
    ran out first, ("end", None) when the file did."""
    left = HEADER_SCAN_LIMIT

    def lines() -> Iterator[bytes]:
        nonlocal left
        while raw := f.readline(left + 1):
            left -= len(raw)
            if left < 0:
                return
            yield raw

    for value in parsed_values(lines()):
        if not is_js_falsy(value):
            return ("header" if is_header(value) else "other"), value
    return ("limit" if left < 0 else "end"), None


def _refused_early(f: Any, st: os.stat_result) -> LoadResult | None:
    """An invalid result when the start of the file already shows it is not a session: its first
    value is not a header (Pi discards such a file whole), or nothing parses in its first 1 MiB
    (a header is a small line: a 2 GB line of NULs is not read to find that out). None when the
    whole file has to be read; `f` is then back at the start."""
    found, value = _scan_header(f)
    f.seek(0)
    if found in ("header", "end"):
        return None
    result = LoadResult(entries=[value] if found == "other" else [], size=st.st_size)
    result.tail = Tail(_generation(st), st.st_size)
    return result


def scan_listing_facts(path: str) -> ListingFacts | None:
    """Listing facts from a whole read of the file (Pi's buildSessionInfo rules); None if the
    first parsed value is not a session header."""

    header: dict[str, Any] | None = None
    facts: ListingFacts | None = None
    with open(_open_regular(path), "rb") as f:
        st = os.fstat(f.fileno())
        if _refused_early(f, st) is not None:
            return None
        for value in parsed_values(f):
            if header is None:
                if not (isinstance(value, dict) and value.get("type") == "session"):
                    return None
                header = value
                facts = ListingFacts(header, size=st.st_size, modified_ms=st.st_mtime * 1000)
                continue
            assert facts is not None
            account_listing_fact(facts, value)
    return facts


def _encode(entries: Iterable[Any]) -> bytes:
    return b"".join(bytes(e.line) + b"\n" if type(e) is RawLine else _json.dumps_line(e) for e in entries)


def _fsync_dir(path: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class JsonlSessionStore:
    """A session in one JSONL file (see the module docstring). New files get mode 0600."""

    def __init__(self, path: str, *, fsync: bool = False, lock_timeout: float = 30.0) -> None:
        self.path = path
        self.fsync = fsync
        self.lock_timeout = lock_timeout
        self._real: str | None = None  # the held-section key, resolved once (see _key)
        # The append descriptor, kept open across appends (see `append`): opened by process
        # `_fd_pid`, used by one thread at a time (`_fd_busy`); `_end`: the file's generation and
        # size right after our last append through it (its last byte is then our newline).
        self._fd: int | None = None
        self._fd_pid = 0
        self._fd_busy = threading.Lock()
        self._end: tuple[tuple[int, int], int] | None = None

    def close(self) -> None:
        """Close the descriptor kept for appends (reopened by the next append)."""
        fd, self._fd, self._end = self._fd, None, None
        if fd is not None:  # (in a forked child, closing its copy leaves the parent's lock alone)
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # ------------------------------------------------------------------ reading

    @property
    def location(self) -> str:
        return self.path

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def modified(self) -> float:
        """The file's modification time (seconds; 0.0 when it is gone): newest-first orders."""
        try:
            return os.stat(self.path).st_mtime
        except OSError:
            return 0.0

    def tail(self) -> Tail | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return Tail(_generation(st), st.st_size)

    def load(self, *, lazy: bool = False) -> LoadResult:
        return read_session_file(self.path, lazy=lazy)

    def read_since(self, tail: Tail, *, lazy: bool = False) -> LoadResult | None:
        return read_appended(self.path, tail, lazy=lazy)

    def read_header(self) -> dict[str, Any] | None:
        return read_session_header(self.path)

    def check_writable(self) -> None:
        """SessionWriteError when the file (or, for a new one, its directory) cannot be written:
        a read-only filesystem, another user's file or directory, an immutable file."""
        if os.path.exists(self.path):
            if not os.access(self.path, os.W_OK):
                raise SessionWriteError(f"Cannot write session file {self.path}: it is not writable")
            return
        directory = os.path.dirname(self.path) or "."
        if os.path.isdir(directory) and not os.access(directory, os.W_OK | os.X_OK):
            raise SessionWriteError(f"Cannot write session file {self.path}: its directory is not writable")

    def columns(self) -> jsonl_columns.ColumnView | None:
        """The file's entry columns (`indexed_columns`), or None when they cannot describe it."""
        return indexed_columns(self.path)

    def drop_columns(self) -> None:
        """Forget the columns cache of this file (it turned out outdated)."""
        jsonl_columns.drop_columns(os.path.realpath(self.path))

    def facts(self) -> ListingFacts | None:
        """From the index cache when it is on (only the index is read when the file did not
        change); otherwise by reading the file."""
        if not jsonl_index.enabled():
            return scan_listing_facts(self.path)
        return indexed_facts(self.path)

    # ------------------------------------------------------------------ the writer section

    def _key(self) -> str:
        # Resolved once per store: realpath() walks every component of the path (a few lstat()s,
        # a fifth of an append's cost), and a session file does not move while it is in use.
        real = self._real
        if real is None:
            real = self._real = os.path.realpath(self.path)
        return real

    def _held(self) -> bool:
        held = _HELD.get()
        return bool(held) and self._key() in held

    def _open_for_writing(self, flags: int) -> int:
        """`_open_regular`, with a file that cannot be written (a read-only filesystem, another
        user's file, an immutable one) as SessionWriteError: one line, nothing written."""
        try:
            return _open_regular(self.path, flags)
        except (FileNotFoundError, SessionFormatError):
            raise
        except OSError as exc:
            raise SessionWriteError(f"Cannot write session file {self.path}: {exc.strerror or exc}") from None

    def _try_lock(self, flags: int) -> int | None:
        """A descriptor holding the file's flock, or None when another writer holds it."""
        fd = self._open_for_writing(flags)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            # The holder may have replaced the file (atomic upgrade): lock the new one instead.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return fd
            os.close(fd)
            return None
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise

    def _locked(self) -> SessionLockedError:
        return SessionLockedError(f"Session file is locked by another process: {self.path}")

    @contextlib.contextmanager
    def _locked_fd(self, flags: int) -> Iterator[int]:
        if self._held():
            # This thread or task holds the writer section: a second flock from another
            # descriptor would wait for ourselves, so write through a plain descriptor.
            fd = self._open_for_writing(flags)
            try:
                yield fd
            finally:
                os.close(fd)
            return
        deadline = time.monotonic() + self.lock_timeout
        while (locked := self._try_lock(flags)) is None:
            if time.monotonic() > deadline:
                raise self._locked()
            time.sleep(0.005)
        try:
            yield locked
        finally:
            os.close(locked)  # closing releases the flock

    @contextlib.contextmanager
    def writer(self) -> Iterator[Tail | None]:
        """Hold the file's advisory lock, e.g. to check that nobody appended before appending.

        Reentrant for the holding thread or task: appends and replacements made through any store
        of the same file while it is held go through without waiting for the lock again.
        """
        if self._held():
            yield self.tail()
            return
        try:
            cm = self._locked_fd(os.O_RDWR)
            fd = cm.__enter__()
        except FileNotFoundError:
            yield None  # nothing to protect: creating a file is exclusive by itself
            return
        token = _HELD.set(_HELD.get() | {self._key()})
        try:
            yield Tail(_generation(os.fstat(fd)), os.fstat(fd).st_size)
        finally:
            _HELD.reset(token)
            cm.__exit__(None, None, None)

    lock = writer  # the name of the section before the protocol existed

    @contextlib.asynccontextmanager
    async def awriter(self) -> AsyncIterator[Tail | None]:
        """`writer()` for asyncio: while another process holds the lock, the wait yields to the
        event loop (abort, RPC and timers keep running) instead of sleeping in it."""
        import asyncio  # only the agent needs it: not imported by every CLI call

        if self._held():
            yield self.tail()
            return
        deadline = time.monotonic() + self.lock_timeout
        try:
            while (fd := self._try_lock(os.O_RDWR)) is None:
                if time.monotonic() > deadline:
                    raise self._locked()
                await asyncio.sleep(0.005)
        except FileNotFoundError:
            yield None
            return
        with self._holding(fd) as tail:
            yield tail

    @contextlib.contextmanager
    def try_writer(self) -> Iterator[Tail | None]:
        """`writer()` without the wait: SessionLockedError at once while another writer holds it."""
        if self._held():
            yield self.tail()
            return
        try:
            fd = self._try_lock(os.O_RDWR)
        except FileNotFoundError:
            yield None
            return
        if fd is None:
            raise self._locked()
        with self._holding(fd) as tail:
            yield tail

    @contextlib.contextmanager
    def _holding(self, fd: int) -> Iterator[Tail]:
        """The section, once `fd` holds the flock: this thread's or task's appends skip the lock."""
        token = _HELD.set(_HELD.get() | {self._key()})
        try:
            yield Tail(_generation(os.fstat(fd)), os.fstat(fd).st_size)
        finally:
            _HELD.reset(token)
            os.close(fd)  # closing releases the flock

    # ------------------------------------------------------------------ writing

    def append(self, entries: list[Any], *, expect: Tail | None = None) -> Tail:
        """Append whole lines in one write; refuses to recreate a vanished file (caller decides)."""
        if not entries:
            current = self.tail()
            if expect is not None and current != expect:
                raise self._stale()
            return current or Tail((0, 0), 0)
        payload = _encode(entries)
        if not self._held() and self._fd_busy.acquire(blocking=False):
            try:
                return self._append_kept(payload, expect)
            finally:
                self._fd_busy.release()
        # Inside our own writer section (the lock is held through another descriptor), or another
        # thread is appending through this store's descriptor: a descriptor of our own.
        try:
            cm = self._locked_fd(os.O_RDWR | os.O_APPEND)
            fd = cm.__enter__()
        except FileNotFoundError:
            raise self._missing() from None
        try:
            return self._append_locked(fd, os.fstat(fd), payload, expect)
        finally:
            cm.__exit__(None, None, None)

    def _missing(self) -> SessionWriteError:
        return SessionWriteError(f"Session file disappeared: {self.path}", missing=True)

    def _append_kept(self, payload: bytes, expect: Tail | None) -> Tail:
        """`append` through the descriptor kept open across appends: per call only flock, a stat
        of the path, an fstat, the write and the unlock (no realpath, open or close). The stat of
        the path is what notices the file replaced under us (an atomic upgrade, a rewrite by
        another program): the old descriptor is then dropped and the file opened again."""
        deadline: float | None = None
        while True:
            if self._fd is not None and self._fd_pid != os.getpid():
                self.close()  # inherited by a forked child: its flock would be the parent's lock
            fd = self._fd
            if fd is None:
                try:
                    fd = self._open_for_writing(os.O_RDWR | os.O_APPEND)
                except FileNotFoundError:
                    raise self._missing() from None
                self._fd, self._fd_pid, self._end = fd, os.getpid(), None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.lock_timeout
                elif now > deadline:
                    raise self._locked() from None
                time.sleep(0.005)
                continue
            try:
                try:
                    on_path = os.stat(self.path)
                except FileNotFoundError:
                    self.close()
                    raise self._missing() from None
                st = os.fstat(fd)
                if (on_path.st_dev, on_path.st_ino) == _generation(st):
                    return self._append_locked(fd, st, payload, expect)
            finally:
                if self._fd == fd:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            self.close()  # replaced under us: append to the file the path names now

    def _append_locked(self, fd: int, st: os.stat_result, payload: bytes, expect: Tail | None) -> Tail:
        """The append itself, with the file's lock held and `st` its fstat."""
        generation, size = _generation(st), st.st_size
        if expect is not None and Tail(generation, size) != expect:
            raise self._stale()
        # Close a torn or unterminated last line first. Skipped when the file ends where our own
        # last append through this descriptor left it: that byte is the newline we wrote.
        if size > 0 and (fd != self._fd or self._end != (generation, size)) and os.pread(fd, 1, size - 1) != b"\n":
            payload = b"\n" + payload
        try:
            self._write_all(fd, payload, size)
            if self.fsync:
                os.fsync(fd)
        except BaseException:
            if fd == self._fd:
                self._end = None
            raise
        end = size + len(payload)
        if fd == self._fd:
            self._end = (generation, end)
        return Tail(generation, end)

    def _stale(self) -> StaleSessionError:
        return StaleSessionError(f"{self.path} changed since it was read (another writer appended or replaced "
                                 "it); nothing was appended")

    def _write_all(self, fd: int, payload: bytes, size_before: int) -> None:
        view = memoryview(payload)
        try:
            while view:
                written = os.write(fd, view)
                view = view[written:]
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size_before)
            raise SessionWriteError(f"Cannot write session file {self.path}: {exc.strerror}") from exc

    def create(self, file_entries: list[Any]) -> Tail:
        """Write a brand-new file, and its missing directories (0700, as `paths.ensure_dir`);
        fails with FileExistsError if the path already exists."""
        return self.create_bytes(_encode(file_entries))

    def create_bytes(self, data: bytes) -> Tail:
        """`create` with the file's exact bytes (an import: every line kept as it is)."""
        self._make_directory()
        tmp = self._tmp_path()
        self._write_new(tmp, data)
        try:
            # link() fails if the target exists: an exclusive create that is also atomic.
            os.link(tmp, self.path)
        except FileExistsError:
            raise FileExistsError(errno.EEXIST, "file already exists", self.path) from None
        finally:
            os.unlink(tmp)
        _fsync_dir(self.path)
        return self.tail() or Tail((0, 0), len(data))

    def read_bytes(self) -> bytes:
        """The whole file, byte for byte (an export); a FIFO, device or directory is refused
        before it is opened (SessionFormatError)."""
        with open(_open_regular(self.path), "rb") as f:
            return f.read()

    def replace(self, file_entries: list[Any], *, backup_suffix: str | None = None) -> Tail:
        """Atomically replace the file's content (tmp + fsync + rename), keeping a backup."""
        self._make_directory()
        if self.exists() and not os.path.isfile(self.path):
            raise _not_regular(self.path, _files.file_kind(os.stat(self.path).st_mode))
        tmp = self._tmp_path()
        payload = _encode(file_entries)
        self._write_new(tmp, payload)
        try:
            if backup_suffix and os.path.exists(self.path):
                backup = self.path + backup_suffix
                if not os.path.exists(backup):
                    os.link(self.path, backup)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_dir(self.path)
        return self.tail() or Tail((0, 0), len(payload))

    def _make_directory(self) -> None:
        try:
            ensure_dir(os.path.dirname(self.path) or ".")
        except OSError as exc:
            raise SessionWriteError(f"Cannot create the directory of session file {self.path}: "
                                    f"{exc.strerror or exc}") from None

    def _tmp_path(self) -> str:
        return f"{self.path}.{os.getpid()}.{time.monotonic_ns()}.tmp"

    def _write_new(self, tmp: str, payload: bytes) -> None:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:  # a read-only directory or filesystem
            raise SessionWriteError(f"Cannot write session file {self.path}: {exc.strerror or exc}") from None
        try:
            self._write_all(fd, payload, 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd)

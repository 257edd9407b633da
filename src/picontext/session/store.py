"""Session storage: reading JSONL files the way Pi reads them, and writing them safely.

`SessionStore` is the seam: the projection and the manager only need "load the file entries",
"append these entries", "write a whole new file" and "hold the lock". `JsonlSessionStore` is the
embedded default; a sidecar index or a database store implements the same protocol.

Writing rules (docs/storage.md):
* one `os.write` per batch of whole lines on an O_APPEND descriptor, under an advisory
  `flock`, so two processes never interleave or lose a line;
* before appending, the last byte on disk is checked: a torn line left by a crash (ours or
  anybody's) is closed with a newline first, so the new entry starts on a fresh line; the torn
  fragment itself is never modified;
* a failed write (full disk, ...) is truncated back to the previous size and raised: the file
  is byte-identical to before and the caller keeps nothing it could not persist;
* whole-file writes (new files, legacy upgrades) go to a temporary file that is fsynced and
  renamed over the target; an upgraded legacy file keeps its original as `<name>.v<N>.bak`.
* fsync: on creation and whole-file writes always; on appends only when `fsync=True`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
import orjson

from picontext import _json
from picontext._gc import gc_paused
from picontext.errors import SessionLockedError, SessionWriteError

HEADER_SCAN_LIMIT = 1024 * 1024
_HELD: dict[str, int] = {}  # realpath of a session file -> id of the thread holding its lock


@dataclass(slots=True)
class SkippedLine:
    line: int  # 1-based line number in the file
    reason: str
    torn: bool = False  # the unterminated last line: most likely a write cut short by a crash


@dataclass(slots=True)
class LoadResult:
    """What a file held: all parsed values in file order (header first) and what was skipped."""

    entries: list[Any] = field(default_factory=list)
    skipped: list[SkippedLine] = field(default_factory=list)
    missing_newline: bool = False  # the file does not end with "\n"
    valid: bool = False  # first parsed value is a header with a string id
    size: int = 0

    def warnings(self, path: str) -> list[str]:
        out = []
        for s in self.skipped:
            what = "torn last line (incomplete write?)" if s.torn else "unreadable line"
            out.append(f"{path}:{s.line}: {what} skipped: {s.reason}")
        return out


def _is_js_falsy(value: Any) -> bool:
    """Falsy for JavaScript: null, false, 0, "" (but {} and [] are truthy); such lines are skipped."""
    if value is None or value is False or value == "":
        return True
    return type(value) in (int, float) and value == 0


def _parse_line(raw: bytes, number: int, result: LoadResult, *, last: bool) -> None:
    if not raw.strip(b" \t\r\n\x0b\x0c"):
        return
    try:
        value = _json.loads(raw)
    except _json.JsonLineError as exc:
        reason = str(exc).splitlines()[0][:120]
        result.skipped.append(SkippedLine(number, reason, torn=last))
        return
    if not _is_js_falsy(value):
        result.entries.append(value)


def is_header(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "session" and isinstance(value.get("id"), str)


class _MessageHead(msgspec.Struct, gc=False):
    role: Any = msgspec.UNSET


class RawLine(msgspec.Struct, gc=False):
    """An entry not parsed yet: the few fields the tree index needs, and its line.

    Decoded straight from the line by msgspec, which skips every other field without building
    Python objects for it. `line` is filled in afterwards (its JSON name cannot occur in a file).
    Written back to a file as the original bytes, so an entry never parsed is copied byte for byte.
    """

    type: Any = msgspec.UNSET
    id: Any = msgspec.UNSET
    parentId: Any = msgspec.UNSET
    message: _MessageHead | msgspec.UnsetType | None = msgspec.UNSET
    line: bytes = msgspec.field(default=b"", name="@@picontext raw line@@")

    def has_id(self) -> bool:
        return self.id is not msgspec.UNSET

    @property
    def parent_id(self) -> Any:
        return None if self.parentId is msgspec.UNSET else self.parentId

    @property
    def role(self) -> Any:
        message = self.message
        return message.role if type(message) is _MessageHead and message.role is not msgspec.UNSET else None

    def parse(self) -> Any:
        return _json.loads(self.line)


_decode_head = msgspec.json.Decoder(RawLine).decode

# Entry types whose bodies can be large; their lines are kept as bytes until first needed.
LAZY_TYPES = frozenset({"message", "custom_message", "custom", "usage", "branch_summary"})


def _head(raw: bytes) -> RawLine | None:
    try:
        return _decode_head(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def parse_session_bytes(data: bytes | list[bytes], *, lazy: bool = False) -> LoadResult:
    """Parse JSONL text split on "\\n" only, skipping blank, unparseable and falsy lines.

    `data` is the file's bytes, or already split on "\\n". With `lazy`, lines of the bulky entry
    types of a current-version file are kept as `RawLine`s.
    """
    result = LoadResult()
    lines = data.split(b"\n") if isinstance(data, bytes) else data
    start = 0
    if lazy:
        start = _parse_full(lines, 0, result, first_only=True)  # the header decides
        if result.entries and is_header(result.entries[0]) and _is_current(result.entries[0]):
            _parse_rest_lazily(lines, start, result)
            start = len(lines)
    _parse_full(lines, start, result)
    result.missing_newline = lines[-1] != b""
    result.valid = bool(result.entries) and is_header(result.entries[0])
    return result


def _parse_full(lines: list[bytes], start: int, result: LoadResult, *, first_only: bool = False) -> int:
    """Parse lines[start:] completely; with `first_only`, stop after the first kept value."""
    loads = orjson.loads
    entries = result.entries
    last = len(lines) - 1
    for n in range(start, len(lines)):
        raw = lines[n]
        try:
            value = loads(raw)  # fast path: a well-formed line
        except orjson.JSONDecodeError:
            _parse_line(raw, n + 1, result, last=n == last)
            continue
        if not _is_js_falsy(value):
            entries.append(value)
            if first_only:
                return n + 1
    return len(lines)


def _is_current(header: dict[str, Any]) -> bool:
    version = header.get("version")
    return isinstance(version, int | float) and not isinstance(version, bool) and version >= 3


def _parse_rest_lazily(lines: list[bytes], start: int, result: LoadResult) -> None:
    entries = result.entries
    append = entries.append
    lazy_types = LAZY_TYPES
    last = len(lines) - 1
    heads = [_head(raw) for raw in lines[start:]]
    for offset, head in enumerate(heads):
        n = start + offset
        raw = lines[n]
        if head is not None and type(head.type) is str and head.type in lazy_types:
            head.line = raw
            append(head)
            continue
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            _parse_line(raw, n + 1, result, last=n == last)
            continue
        if not _is_js_falsy(value):
            append(value)


def read_session_file(path: str, *, lazy: bool = False) -> LoadResult:
    """Read and parse a whole file; a missing file is an empty result (see parse_session_bytes)."""
    try:
        with open(path, "rb") as f:
            lines, size = _split_file(f)
    except FileNotFoundError:
        return LoadResult()
    with gc_paused():
        result = parse_session_bytes(lines, lazy=lazy)
    result.size = size
    return result


_CHUNK = 8 * 1024 * 1024


def _split_file(f: Any) -> tuple[list[bytes], int]:
    """The file's lines (split on "\\n" only), read in chunks so the whole file is never held
    twice: peak memory is the lines plus one chunk."""
    lines: list[bytes] = []
    pending = b""
    size = 0
    while chunk := f.read(_CHUNK):
        size += len(chunk)
        parts = chunk.split(b"\n")
        if pending:
            parts[0] = pending + parts[0]  # the line that straddles the chunk boundary
        pending = parts.pop()
        lines.extend(parts)
    lines.append(pending)
    return lines, size


def load_file_entries(path: str) -> list[Any]:
    """Pi `loadEntriesFromFile` without its write: all parsed values, or [] if not a session."""
    result = read_session_file(path)
    return result.entries if result.valid else []


def read_session_header(path: str) -> dict[str, Any] | None:
    """The header if the first parsed value of the file is one, reading at most 1 MiB."""
    with open(path, "rb") as f:
        scanned = 0
        while True:
            raw = f.readline(HEADER_SCAN_LIMIT - scanned + 1)
            if not raw:
                return None
            scanned += len(raw)
            if scanned > HEADER_SCAN_LIMIT:
                return None
            if not raw.strip():
                continue
            try:
                value = _json.loads(raw)
            except _json.JsonLineError:
                continue
            if _is_js_falsy(value):
                continue
            return value if is_header(value) else None


class SessionStore(Protocol):
    """Where a session's lines live. All writes are whole lines; nothing is ever rewritten in
    place."""

    path: str

    def exists(self) -> bool: ...
    def load(self) -> LoadResult: ...
    def append(self, entries: list[Any]) -> None: ...
    def create(self, file_entries: list[Any]) -> None: ...
    def replace(self, file_entries: list[Any], *, backup_suffix: str | None = None) -> None: ...
    def lock(self) -> contextlib.AbstractContextManager[None]: ...


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
    """A session in one JSONL file. New files are created with mode 0600."""

    def __init__(self, path: str, *, fsync: bool = False, lock_timeout: float = 30.0) -> None:
        self.path = path
        self.fsync = fsync
        self.lock_timeout = lock_timeout

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def load(self) -> LoadResult:
        return read_session_file(self.path)

    @contextlib.contextmanager
    def _locked_fd(self, flags: int) -> Iterator[int]:
        key = os.path.realpath(self.path)
        if _HELD.get(key) == threading.get_ident():
            # This thread already holds the file's lock (store.lock()): a second flock from another
            # descriptor would wait for ourselves, so write through a plain descriptor.
            fd = os.open(self.path, flags, 0o600)
            try:
                yield fd
            finally:
                os.close(fd)
            return
        deadline = time.monotonic() + self.lock_timeout
        while True:
            fd = os.open(self.path, flags, 0o600)
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            raise SessionLockedError(
                                f"Session file is locked by another process: {self.path}"
                            ) from None
                        time.sleep(0.005)
                # The holder may have replaced the file (atomic upgrade): lock the new one instead.
                try:
                    same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    same = False
                if same:
                    yield fd
                    return
            finally:
                os.close(fd)  # closing releases the flock

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the file's advisory lock, e.g. to check that nobody appended before appending.

        Reentrant for the holding thread: appends and replacements made through any store of the
        same file while it is held go through without waiting for the lock again.
        """
        key = os.path.realpath(self.path)
        if _HELD.get(key) == threading.get_ident():
            yield
            return
        with self._locked_fd(os.O_RDWR | os.O_CREAT):
            _HELD[key] = threading.get_ident()
            try:
                yield
            finally:
                del _HELD[key]

    def append(self, entries: list[Any]) -> None:
        """Append whole lines in one write; refuses to recreate a vanished file (caller decides)."""
        if not entries:
            return
        payload = _encode(entries)
        try:
            cm = self._locked_fd(os.O_RDWR | os.O_APPEND)
            fd = cm.__enter__()
        except FileNotFoundError:
            raise SessionWriteError(f"Session file disappeared: {self.path}", missing=True) from None
        try:
            size = os.fstat(fd).st_size
            if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                payload = b"\n" + payload  # close a torn or unterminated last line first
            self._write_all(fd, payload, size)
            if self.fsync:
                os.fsync(fd)
        finally:
            cm.__exit__(None, None, None)

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

    def create(self, file_entries: list[Any]) -> None:
        """Write a brand-new file; fails with FileExistsError if the path already exists."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        payload = _encode(file_entries)
        tmp = self._tmp_path()
        self._write_new(tmp, payload)
        try:
            # link() fails if the target exists: an exclusive create that is also atomic.
            os.link(tmp, self.path)
        except FileExistsError:
            raise FileExistsError(errno.EEXIST, "file already exists", self.path) from None
        finally:
            os.unlink(tmp)
        _fsync_dir(self.path)

    def replace(self, file_entries: list[Any], *, backup_suffix: str | None = None) -> None:
        """Atomically replace the file's content (tmp + fsync + rename), keeping a backup."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        tmp = self._tmp_path()
        self._write_new(tmp, _encode(file_entries))
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

    def _tmp_path(self) -> str:
        return f"{self.path}.{os.getpid()}.{time.monotonic_ns()}.tmp"

    def _write_new(self, tmp: str, payload: bytes) -> None:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            self._write_all(fd, payload, 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd)

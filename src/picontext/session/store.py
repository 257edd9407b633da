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
import gc
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
import orjson

from picontext import _json
from picontext.errors import SessionLockedError, SessionWriteError

HEADER_SCAN_LIMIT = 1024 * 1024


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


class _MessageHead(msgspec.Struct):
    role: Any = msgspec.UNSET


class _EntryHead(msgspec.Struct):
    type: Any = msgspec.UNSET
    id: Any = msgspec.UNSET
    parentId: Any = msgspec.UNSET
    message: _MessageHead | msgspec.UnsetType | None = msgspec.UNSET


_decode_head = msgspec.json.Decoder(_EntryHead).decode

# Entry types whose bodies can be large; their lines are kept as bytes until first needed.
LAZY_TYPES = frozenset({"message", "custom_message", "custom", "usage", "branch_summary"})


class RawLine:
    """An entry not parsed yet: its line and the few fields the tree index needs.

    `role` is the message role for `message` entries (None otherwise). Written back to a file
    as the original bytes, so an entry that was never parsed is copied byte for byte.
    """

    __slots__ = ("id", "line", "parent_id", "role", "type")

    def __init__(self, line: bytes, type: str, id: Any, parent_id: Any, role: Any) -> None:
        self.line = line
        self.type = type
        self.id = id
        self.parent_id = parent_id
        self.role = role

    def has_id(self) -> bool:
        return self.id is not msgspec.UNSET

    def parse(self) -> Any:
        return _json.loads(self.line)


def _lazy_item(raw: bytes) -> RawLine | None:
    """A RawLine for a well-formed line of a lazy type, else None (the caller parses it fully)."""
    try:
        head = _decode_head(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if type(head.type) is not str or head.type not in LAZY_TYPES:
        return None
    message = head.message
    role = None
    if head.type == "message":
        if not isinstance(message, _MessageHead):
            return None  # odd shapes go through the full parser
        role = None if message.role is msgspec.UNSET else message.role
    parent = None if head.parentId is msgspec.UNSET else head.parentId
    return RawLine(raw, head.type, head.id, parent, role)


def parse_session_bytes(data: bytes, *, lazy: bool = False) -> LoadResult:
    """Parse JSONL text split on "\\n" only, skipping blank, unparseable and falsy lines.

    With `lazy`, lines of the bulky entry types of a current-version file are kept as `RawLine`s.
    """
    result = LoadResult()
    lines = data.split(b"\n")
    last = len(lines) - 1
    entries = result.entries
    loads = orjson.loads
    lazy_ok = False
    for number, raw in enumerate(lines):
        if lazy_ok:
            item = _lazy_item(raw)
            if item is not None:
                entries.append(item)
                continue
        try:
            value = loads(raw)  # fast path: a well-formed line
        except orjson.JSONDecodeError:
            _parse_line(raw, number + 1, result, last=number == last)
            continue
        if value or (value is not None and value is not False and type(value) is not str
                     and type(value) in (dict, list)):
            entries.append(value)
            if lazy and len(entries) == 1 and is_header(value):
                version = value.get("version")
                lazy_ok = isinstance(version, int | float) and not isinstance(version, bool) and version >= 3
    result.missing_newline = lines[-1] != b""
    result.valid = bool(entries) and is_header(entries[0])
    return result


def read_session_file(path: str, *, lazy: bool = False) -> LoadResult:
    """Read and parse a whole file; a missing file is an empty result (see parse_session_bytes)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return LoadResult()
    with gc_paused():
        result = parse_session_bytes(data, lazy=lazy)
    result.size = len(data)
    return result


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC around bulk work on parsed entries.

    Loading allocates millions of containers at once, and each allocation burst makes the cyclic
    collector rescan all of them (JSON values cannot even form cycles); on a 100k-entry session
    that more than doubles load and index time. Reference counting still frees everything.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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
    return b"".join(e.line + b"\n" if type(e) is RawLine else _json.dumps_line(e) for e in entries)


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
        """Hold the file's advisory lock (e.g. while checking that nobody appended)."""
        with self._locked_fd(os.O_RDWR | os.O_CREAT):
            yield

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

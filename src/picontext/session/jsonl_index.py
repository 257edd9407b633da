"""A cached index of one JSONL session file: never needed for correctness, always checked.

Where: `<cache dir>/index/<hash of the file's real path>.idx` (msgpack in a checksummed
envelope), the cache dir being picontext's own (`paths.cache_dir()`: `$PICONTEXT_CACHE_DIR`,
else `$XDG_CACHE_HOME/picontext`, else `~/.cache/picontext`): never beside the session and never
under `PICONTEXT_DIR`, which may be Pi's own `~/.pi/agent`. `PICONTEXT_INDEX=0` turns the cache
off (everything is then read from the file alone, and nothing is written).

What: the header and the listing facts (name, message and entry counts, first user message,
last activity), so listing reads a few hundred bytes per session instead of the session. The
per-entry columns `context --json` uses live in a file of their own (`jsonl_columns.py`), so
listing never loads them.

Trust (docs/storage.md, "Index cache"). The cache file itself: a checksum (BLAKE2b) over its
content, its kind and its name is verified on every load, so a bit flipped on disk or a byte
edited by hand is a cache that is not there. The session file: the cache records what it covers
(`CoveredPrefix`): device, inode, size, mtime and ctime in nanoseconds, when that was taken, a
SHA-256 of every covered byte, and a hash of the first and last `ENDS` bytes of them. The file
always wins:
* same device, inode, size, mtime and ctime, the cache recorded at least `RACY_NS` after the
  file's last change (so that any later write must have moved the ctime), and the two ends of the
  covered bytes unchanged: used as is;
* same file, not shorter, and the covered bytes unchanged (SHA-256): extended from where it
  stopped (Pi appended), or recorded again (only a timestamp moved, or it was recorded racily);
* anything else (truncated, replaced by another file, rewritten): rebuilt from the file.
Only complete lines are indexed; an unterminated last line (a write in progress, or torn by a
crash) is read from the file on every load. The index is written to a temporary file and
renamed, so a reader never sees half of one; failing to write it changes nothing but speed.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import stat as stat_mod
import time
from typing import Any

import msgspec

from picontext import _json
from picontext._clock import js_date_ms
from picontext.session import paths
from picontext.session.protocol import ListingFacts

try:  # what hashlib.blake2b is, without importing hashlib, which loads OpenSSL (~10 ms of every call)
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b as _blake2b

INDEX_VERSION = 4  # 4: ctime, time checked, ends hash; checksummed file

# A write within the same tick of a coarse file clock as the stat a cache recorded would leave
# the ctime as recorded: a cache recorded less than this after the file's ctime is "racy" and
# is checked against every covered byte, not the stat (git's "racily clean" rule). Above the
# coarsest common timestamp granularity (FAT: 2 s).
RACY_NS = 3_000_000_000
ENDS = 4096  # bytes at each end of the covered prefix that a warm call compares (two preads)

_MAGIC = b"picxc\x00\x00\x01"  # 8 bytes: picontext cache, envelope version 1
_SUM = 16  # BLAKE2b digest bytes


class _MessageFacts(msgspec.Struct, gc=False):
    role: Any = None
    timestamp: Any = None


class _Head(msgspec.Struct, gc=False):
    """The fields the index needs from one line; msgspec skips the rest without building it."""

    type: Any = msgspec.UNSET
    id: Any = msgspec.UNSET
    parentId: Any = msgspec.UNSET
    timestamp: Any = None
    message: _MessageFacts | msgspec.UnsetType | None = msgspec.UNSET


_decode_head = msgspec.json.Decoder(_Head).decode


class CoveredPrefix(msgspec.Struct, array_like=True, gc=False):
    """What a cache (this listing index, the entry columns) covers of its session file, and how
    it is known to still describe it (module docstring). Subclasses add their facts after these
    fields."""

    version: int
    dev: int
    ino: int
    size: int  # bytes covered: always just after a "\n" (or 0)
    mtime_ns: int
    ctime_ns: int
    checked_ns: int  # the clock just before the stat above was taken
    prefix_hash: bytes  # SHA-256 of the covered bytes
    ends_hash: bytes  # BLAKE2b of their first and last ENDS bytes (`PrefixHasher.ends_digest`)

    def may_cover(self, st: os.stat_result) -> bool:
        """Same file and not shorter: the covered bytes may still be its start (hash to confirm)."""
        return (self.dev, self.ino) == (st.st_dev, st.st_ino) and st.st_size >= self.size

    def clean(self) -> bool:
        """Recorded long enough after the file's last change that a later write moved its ctime."""
        return self.checked_ns - self.ctime_ns >= RACY_NS

    def unchanged(self, st: os.stat_result, fd: int) -> bool:
        """Nothing was written to the file (open as `fd`, stat `st`) since the cache recorded it:
        same file, size, mtime and ctime, recorded cleanly, and the two ends of the covered bytes
        as they were (where an edit in place on a filesystem whose ctime stands still is most
        likely: the last entries, the header)."""
        return ((self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns)
                == (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                and self.clean() and ends_digest(*read_ends(fd, self.size)) == self.ends_hash)

    def record(self, st: os.stat_result, checked_ns: int, hasher: PrefixHasher) -> None:
        """The file's stat (taken before its bytes were read) and the hashes of the covered bytes."""
        self.mtime_ns = st.st_mtime_ns
        self.ctime_ns = st.st_ctime_ns
        self.checked_ns = checked_ns
        self.prefix_hash = hasher.digest()
        self.ends_hash = hasher.ends_digest()

    def state(self) -> tuple[int, int, int, bool]:
        """What decides whether a checked cache is worth writing back."""
        return (self.size, self.mtime_ns, self.ctime_ns, self.clean())


class IndexData(CoveredPrefix, array_like=True, gc=False):
    header: Any = None  # the first kept value (a header when `valid`)
    valid: bool = False
    current: bool = False  # header version >= 3: lazily loadable
    name: str | None = None
    message_count: int = 0
    entry_count: int = 0
    first_message: str = ""
    last_activity_ms: float = 0.0
    header_seen: bool = False  # a first value was found (the header decision is made)


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(IndexData)


def clock_ns() -> int:
    """The wall clock a cache records as `checked_ns` (file timestamps are wall-clock times)."""
    return time.time_ns()


def enabled() -> bool:
    return os.environ.get("PICONTEXT_INDEX", "1") not in ("0", "off", "no")


def index_path(real_path: str) -> str:
    digest = _blake2b(real_path.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    return os.path.join(paths.cache_dir(), "index", digest + ".idx")


def read_index(real_path: str, st: os.stat_result) -> IndexData | None:
    """The index of the session file whose stat is `st`, if a sound one is cached."""
    payload = read_cache_file(index_path(real_path), cache_limit(st))
    if payload is None:
        return None
    try:
        data = _decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return data if data.version == INDEX_VERSION else None


def write_index(real_path: str, data: IndexData) -> None:
    """Atomically (tmp + rename); any failure only costs speed next time."""
    try:
        payload = _encoder.encode(data)
    except (UnicodeEncodeError, msgspec.EncodeError):
        return  # e.g. a lone surrogate in the first message: msgpack cannot hold it; no index then
    write_cache_file(index_path(real_path), payload)


def cache_limit(st: os.stat_result) -> int:
    """The most bytes a sound cache of a session file of this size can take: its facts and
    columns take about as much as the lines they come from or less (msgpack writes a float in 9
    bytes, JSON in as few as 3: hence the margin), plus the fixed fields. A larger file in the
    cache (a damaged one, or /dev/zero's worth) is not read."""
    return 4 * st.st_size + 65536


def _checksum(name: str, payload: bytes | memoryview) -> bytes:
    summer = _blake2b(name.encode("utf-8", "surrogateescape"), digest_size=_SUM)
    summer.update(payload)
    return summer.digest()


def read_cache_file(target: str, limit: int) -> memoryview | None:
    """The payload of a cache file written by `write_cache_file`, or None when there is none, it
    is not a regular file (opened without blocking: a FIFO never hangs a command), it is larger
    than `limit`, or its checksum does not match what it holds (a flipped bit, an edit by hand,
    half a file: a cache that is not there)."""
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    head = len(_MAGIC) + _SUM
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode) or st.st_size > limit + head:
            return None
        # One read of the size fstat gave (a cache file is replaced, never written in place); a
        # short read is a cache that is not there. (A file object would allocate `limit` bytes.)
        raw = os.read(fd, st.st_size)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(raw) != st.st_size or raw[: len(_MAGIC)] != _MAGIC:
        return None
    payload = memoryview(raw)[head:]
    if _checksum(os.path.basename(target), payload) != raw[len(_MAGIC) : head]:
        return None
    return payload


def write_cache_file(target: str, payload: bytes) -> None:
    """Atomically (a per-thread tmp, then rename): a reader sees the old cache or the new one.
    The payload goes in an envelope (magic, checksum of the file's name and the payload) that
    `read_cache_file` verifies. Directories are created 0700 and files 0600: caches hold first
    messages and names. Any OS error only costs speed next time, since every cache is checked
    against its file."""
    with contextlib.suppress(OSError):
        paths.ensure_dir(os.path.dirname(target))
        tmp = f"{target}.{os.getpid()}.{_thread.get_ident()}.tmp"  # per thread: two never share one
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with open(fd, "wb") as f:
                f.write(_MAGIC + _checksum(os.path.basename(target), payload))
                f.write(payload)
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


class PrefixHasher:
    """The covered bytes of a cache, fed in file order: their SHA-256 (`digest`, hardware-assisted
    here: 2.6x faster than BLAKE2b over a 61 MB file, which a cold call hashes whole) and the
    hash of their first and last ENDS bytes (`ends_digest`), which a warm call compares with the
    file's own ends without reading the rest."""

    def __init__(self) -> None:
        import hashlib  # here: a call that finds its caches valid hashes nothing (OpenSSL, ~10 ms)

        self._sha = hashlib.sha256()
        self._head = b""
        self._tail = b""

    def update(self, data: bytes | bytearray | memoryview) -> None:
        self._sha.update(data)
        if len(self._head) < ENDS:
            self._head += bytes(data[: ENDS - len(self._head)])
        n = len(data)
        self._tail = bytes(data[n - ENDS :]) if n >= ENDS else (self._tail + bytes(data))[-ENDS:]

    def digest(self) -> bytes:
        return self._sha.digest()

    def ends_digest(self) -> bytes:
        return ends_digest(self._head, self._tail)


def new_hasher() -> PrefixHasher:
    """The hasher of a cache's covered bytes, for the listing index and the entry columns alike."""
    return PrefixHasher()


def read_ends(fd: int, size: int) -> tuple[bytes, bytes]:
    """The first and last ENDS bytes of the file's first `size` bytes (two preads)."""
    head = os.pread(fd, min(ENDS, size), 0)
    if size <= ENDS:
        return head, head
    return head, os.pread(fd, ENDS, size - ENDS)


def ends_digest(head: bytes, tail: bytes) -> bytes:
    summer = _blake2b(head, digest_size=_SUM)
    summer.update(tail)
    return summer.digest()


def check_prefix(data: IndexData, st: os.stat_result, buffer: bytes) -> PrefixHasher | None:
    """A hasher fed with the covered bytes when `buffer` (the file's bytes now) still starts with
    what `data` covered; None when the index does not describe this file any more."""
    if not data.may_cover(st) or len(buffer) < data.size:
        return None
    hasher = new_hasher()
    hasher.update(memoryview(buffer)[: data.size])
    return hasher if hasher.digest() == data.prefix_hash else None


def new_index(st: os.stat_result) -> IndexData:
    return IndexData(INDEX_VERSION, st.st_dev, st.st_ino, 0, st.st_mtime_ns, st.st_ctime_ns, 0, b"", b"")


def extend(data: IndexData, buffer: bytes, st: os.stat_result, checked_ns: int = 0,
           hasher: PrefixHasher | None = None) -> None:
    """Account for the complete lines of `buffer` (the file's whole content now) after
    `data.size`; `hasher` has been fed the bytes before it (from `check_prefix`). `st` and
    `checked_ns` are the file's stat and the clock before it, taken before `buffer` was read."""
    if hasher is None:
        hasher = new_hasher()
        hasher.update(memoryview(buffer)[: data.size])
    end = buffer.rfind(b"\n") + 1
    if end > data.size:
        pieces = buffer[data.size : end].split(b"\n")
        pieces.pop()  # after the last "\n"
        for piece in pieces:
            add_line(data, piece)
        hasher.update(memoryview(buffer)[data.size : end])
        data.size = end
    data.record(st, checked_ns, hasher)


def add_line(data: IndexData, piece: bytes) -> None:
    """Account for one line (without its newline) in the header and the facts."""
    if not piece.strip(b" \t\r\n\x0b\x0c"):
        return
    head: _Head | None
    try:
        head = _decode_head(piece)
    except (msgspec.DecodeError, msgspec.ValidationError):
        head = None
    value: Any = msgspec.UNSET
    if head is None:
        try:
            value = _json.loads(piece)
        except _json.JsonLineError:
            return
        if _is_js_falsy(value):
            return
    if not data.header_seen:
        data.header_seen = True
        header = value if head is None else _json.loads(piece)
        data.header = header
        data.valid = isinstance(header, dict) and header.get("type") == "session"
        version = header.get("version") if isinstance(header, dict) else None
        data.current = isinstance(version, int | float) and not isinstance(version, bool) and version >= 3
        return
    if data.valid:
        _add_facts(data, head, value, piece)


def _add_facts(data: IndexData, head: _Head | None, value: Any, piece: bytes) -> None:
    """Pi's buildSessionInfo rules, one line at a time."""
    if head is None:
        if not isinstance(value, dict):
            return
        head = _Head(value.get("type", msgspec.UNSET), timestamp=value.get("timestamp"))
        message = value.get("message")
        if isinstance(message, dict):
            head.message = _MessageFacts(message.get("role"), message.get("timestamp"))
    data.entry_count += 1
    kind = head.type
    if kind == "session_info":
        name = (value if value is not msgspec.UNSET else _json.loads(piece)).get("name")
        data.name = name.strip() or None if isinstance(name, str) else None
    elif kind == "message":
        data.message_count += 1
        message = head.message
        role = message.role if type(message) is _MessageFacts else None
        if role in ("user", "assistant"):
            assert type(message) is _MessageFacts
            ts = message.timestamp
            activity = ts if isinstance(ts, int | float) and not isinstance(ts, bool) else js_date_ms(head.timestamp)
            if activity == activity and activity > data.last_activity_ms:
                data.last_activity_ms = float(activity)
            if role == "user" and not data.first_message:
                from picontext.ai.types import content_text

                full = value if value is not msgspec.UNSET else _json.loads(piece)
                data.first_message = content_text(full["message"].get("content"), " ")


def _is_js_falsy(value: Any) -> bool:
    if value is None or value is False or value == "":
        return True
    return type(value) in (int, float) and value == 0


def facts_of(data: IndexData, st: os.stat_result) -> ListingFacts | None:
    if not data.valid:
        return None
    return ListingFacts(data.header, name=data.name, message_count=data.message_count,
                        entry_count=data.entry_count, first_message=data.first_message,
                        last_activity_ms=data.last_activity_ms, size=st.st_size, modified_ms=st.st_mtime * 1000)

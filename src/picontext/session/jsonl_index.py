"""A cached index of one JSONL session file: never needed for correctness, always checked.

Where: `<cache dir>/index/<hash of the file's real path>.idx` (msgpack), the cache dir being
picontext's own (`paths.cache_dir()`: `$PICONTEXT_CACHE_DIR`, else `$XDG_CACHE_HOME/picontext`,
else `~/.cache/picontext`): never beside the session and never under `PICONTEXT_DIR`, which may
be Pi's own `~/.pi/agent`; read-only files are indexed too. `PICONTEXT_INDEX=0` turns the cache
off (everything is then read from the file alone, and nothing is written).

What: the header and the listing facts (name, message and entry counts, first user message,
last activity), so listing reads a few hundred bytes per session instead of the session. The
per-entry columns `context --json` uses live in a file of their own (`jsonl_columns.py`), so
listing never loads them.

Validity: the index records the file's device, inode, size and mtime, and a hash of all the
bytes it covers. The file always wins:
* same identity, size and mtime: used as is;
* same identity and larger, and the covered bytes unchanged (hash): extended from where it
  stopped (also when Pi appended);
* anything else (truncated, replaced by another file, rewritten): rebuilt from the file.
Only complete lines are indexed; an unterminated last line (a write in progress, or torn by a
crash) is read from the file on every load. The index is written to a temporary file and
renamed, so a reader never sees half of one; failing to write it changes nothing but speed.
"""

from __future__ import annotations

import contextlib
import os
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

INDEX_VERSION = 3  # 3: SHA-256 prefix hash


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
    it is known to still describe it: the same file (device, inode), at least as long, and the
    covered bytes hashing the same. Subclasses add their facts after these fields."""

    version: int
    dev: int
    ino: int
    size: int  # bytes covered: always just after a "\n" (or 0)
    mtime_ns: int
    prefix_hash: bytes  # SHA-256 of the covered bytes

    def may_cover(self, st: os.stat_result) -> bool:
        """Same file and not shorter: the covered bytes may still be its start (hash to confirm)."""
        return (self.dev, self.ino) == (st.st_dev, st.st_ino) and st.st_size >= self.size


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


def enabled() -> bool:
    return os.environ.get("PICONTEXT_INDEX", "1") not in ("0", "off", "no")


def index_path(real_path: str) -> str:
    digest = _blake2b(real_path.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
    return os.path.join(paths.cache_dir(), "index", digest + ".idx")


def read_index(real_path: str) -> IndexData | None:
    try:
        with open(index_path(real_path), "rb") as f:
            data = _decoder.decode(f.read())
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return data if data.version == INDEX_VERSION else None


def write_index(real_path: str, data: IndexData) -> None:
    """Atomically (tmp + rename); any failure only costs speed next time."""
    try:
        payload = _encoder.encode(data)
    except (UnicodeEncodeError, msgspec.EncodeError):
        return  # e.g. a lone surrogate in the first message: msgpack cannot hold it; no index then
    write_cache_file(index_path(real_path), payload)


def write_cache_file(target: str, payload: bytes) -> None:
    """Atomically (a per-process tmp, then rename): a reader sees the old cache or the new one.
    Directories are created 0700 and files 0600: caches hold first messages and names. Any OS
    error only costs speed next time, since every cache is checked against its file."""
    with contextlib.suppress(OSError):
        paths.ensure_dir(os.path.dirname(target))
        tmp = f"{target}.{os.getpid()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with open(fd, "wb") as f:
                f.write(payload)
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def new_hasher() -> Any:
    """The hash of a cache's covered bytes, for the listing index and the entry columns alike:
    SHA-256 (hardware-assisted here: 2.6x faster than blake2b over a 61 MB file, which a cold
    call hashes whole). Imported here: a call that finds its caches valid hashes nothing."""
    import hashlib

    return hashlib.sha256()


def check_prefix(data: IndexData, st: os.stat_result, buffer: bytes) -> Any:
    """A hasher fed with the covered bytes when `buffer` (the file's bytes now) still starts with
    what `data` covered; None when the index does not describe this file any more."""
    if not data.may_cover(st) or len(buffer) < data.size:
        return None
    hasher = new_hasher()
    hasher.update(memoryview(buffer)[: data.size])
    return hasher if hasher.digest() == data.prefix_hash else None


def new_index(st: os.stat_result) -> IndexData:
    return IndexData(INDEX_VERSION, st.st_dev, st.st_ino, 0, st.st_mtime_ns, new_hasher().digest())


def extend(data: IndexData, buffer: bytes, st: os.stat_result, hasher: Any = None) -> None:
    """Account for the complete lines of `buffer` (the file's whole content now) after
    `data.size`; `hasher` has been fed the bytes before it (from `check_prefix`)."""
    if hasher is None:
        hasher = new_hasher()
        hasher.update(memoryview(buffer)[: data.size])
    data.mtime_ns = st.st_mtime_ns
    end = buffer.rfind(b"\n") + 1
    if end <= data.size:
        return
    pieces = buffer[data.size : end].split(b"\n")
    pieces.pop()  # after the last "\n"
    for piece in pieces:
        add_line(data, piece)
    hasher.update(memoryview(buffer)[data.size : end])
    data.size = end
    data.prefix_hash = hasher.digest()


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

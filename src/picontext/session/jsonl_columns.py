"""Per-entry columns of one JSONL session file, cached: where each entry's line is, its parent,
type and id, so a projection reads and parses only the lines it needs.

Where: `<cache dir>/index/<hash of the file's real path>.cols` (msgpack in the checksummed
envelope of `jsonl_index.write_cache_file`), beside the listing index (`jsonl_index.py`), which
stays small for listing. `PICONTEXT_INDEX=0`: built in memory for the one call, never written.

What, per non-header entry in file order: byte offset and length of its line, position of its
parent (-1: none), a type code (into `kind_names`) and its id. (No message role: the two
questions a context asks of roles, the last assistant message and the system messages kept by a
compaction, are answered from lines it reads anyway; a column cost every entry's message a
decode.) Stored as packed arrays and one list of strings, so loading 100k entries builds no
per-entry Python objects except the id strings.

Only *regular* files get columns: a current-version header first, then entries that are JSON
objects with a string `type` (not a second header) and a string `id` seen once, whose
`parentId` is absent, falsy, or the id of an earlier entry. Blank lines and falsy values are
skipped as Pi skips them. Anything else (legacy versions, unparsable lines, duplicate ids,
forward parent references, ...) marks the columns irregular and the caller reads the file with
the full reader, which knows every rule; a regular file's columns describe exactly what the full
reader would build (`tests/session/test_context_stream.py`).

Trust is the listing index's (`jsonl_index` module docstring): a checksum over the cache file;
device, inode, size, mtime and ctime, recorded cleanly, and the two ends of the covered bytes
unchanged -> used as is; grown with the covered bytes unchanged (SHA-256) -> extended; anything
else -> rebuilt. Only complete lines are covered; an unterminated last line is not.
"""

from __future__ import annotations

import contextlib
import os
from array import array
from bisect import bisect_right
from collections.abc import Iterable
from itertools import accumulate, pairwise, repeat
from operator import add, attrgetter, gt, lt, ne, or_, sub
from typing import Any

import msgspec

from picontext import _json
from picontext.session import jsonl_index

COLUMNS_VERSION = 4  # 3: no role column; 4: ctime, time checked, ends hash; checksummed file
_MAX_KINDS = 255


class _Head(msgspec.Struct, gc=False):
    # an entry whose type or id is not a string (or absent) is not one the columns describe:
    # msgspec refuses it in C, and the line-by-line path then finds it irregular
    type: str
    id: str
    parentId: Any = None


_head_decoder = msgspec.json.Decoder(_Head)
_decode_head = _head_decoder.decode
_decode_heads = _head_decoder.decode_lines
_type_of, _id_of, _parent_of = attrgetter("type"), attrgetter("id"), attrgetter("parentId")


class EntryColumns(jsonl_index.CoveredPrefix, array_like=True, gc=False):
    regular: bool = True
    header_seen: bool = False
    offsets: bytes = b""  # array('q')
    lengths: bytes = b""  # array('q')
    parents: bytes = b""  # array('i'), -1 for a root
    kinds: bytes = b""  # one byte per entry: index into kind_names
    kind_names: list[str] = msgspec.field(default_factory=list)
    ids: list[str] = msgspec.field(default_factory=list)


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(EntryColumns)


def columns_path(real_path: str) -> str:
    return jsonl_index.index_path(real_path)[: -len(".idx")] + ".cols"


def read_columns(real_path: str, st: os.stat_result) -> EntryColumns | None:
    """The columns of the session file whose stat is `st`, if a sound cache holds them."""
    payload = jsonl_index.read_cache_file(columns_path(real_path), jsonl_index.cache_limit(st))
    if payload is None:
        return None
    try:
        data = _decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return data if data.version == COLUMNS_VERSION and _consistent(data) else None


def _consistent(data: EntryColumns) -> bool:
    """Every column has one item per id (a damaged cache is rebuilt, never trusted)."""
    n = len(data.ids)
    return (len(data.offsets) == len(data.lengths) == 8 * n and len(data.parents) == 4 * n
            and len(data.kinds) == n and (n == 0 or max(data.kinds) < len(data.kind_names)))


def drop_columns(real_path: str) -> None:
    """Forget the cached columns (they proved wrong): the next call rebuilds them."""
    with contextlib.suppress(OSError):
        os.unlink(columns_path(real_path))


def write_columns(real_path: str, data: EntryColumns) -> None:
    """Atomically (tmp + rename); any failure only costs speed next time."""
    try:
        payload = _encoder.encode(data)
    except (UnicodeEncodeError, msgspec.EncodeError):
        return  # an id with a lone surrogate: msgpack cannot hold it; no columns then
    jsonl_index.write_cache_file(columns_path(real_path), payload)


def new_columns(st: os.stat_result) -> EntryColumns:
    return EntryColumns(COLUMNS_VERSION, st.st_dev, st.st_ino, 0, st.st_mtime_ns, st.st_ctime_ns, 0, b"", b"")


def covers_prefix(data: EntryColumns, st: os.stat_result, f: Any) -> jsonl_index.PrefixHasher | None:
    """A hasher fed with the covered bytes when the file `f` (positioned at 0) still starts with
    them, leaving `f` just after them; None when the columns do not describe this file any more."""
    if not data.may_cover(st):
        return None
    hasher = jsonl_index.new_hasher()
    left = data.size
    with memoryview(bytearray(min(left, _CHUNK))) as buffer:  # one buffer, read into again and again
        while left > 0:
            got = f.readinto(buffer[: min(left, len(buffer))])
            if not got:
                return None
            hasher.update(buffer[:got])
            left -= got
    return hasher if hasher.digest() == data.prefix_hash else None


class _Irregular(Exception):
    pass


_NOTHING = object()  # the entry before the first one: no parentId equals it
_NEAR = (64, 4096)  # how far back a parent that is not the previous entry is searched first
_FAR_LOOKUPS = 8  # parents searched for among all ids before an id -> position map is built
_READ_GAP = 65536  # unwanted bytes between two wanted lines read rather than skipped
_READ_MAX = 8 * 1024 * 1024  # bytes per read of wanted lines
_CHUNK = 2 * 1024 * 1024  # measured: 8 MiB chunks cost ~25 MB more peak memory, no less time


def extend(data: EntryColumns, f: Any, st: os.stat_result, hasher: jsonl_index.PrefixHasher,
           checked_ns: int = 0) -> bytes:
    """Add the complete lines the file `f` holds after `data.size` (where `f` is positioned;
    `hasher` has been fed the bytes before it), a chunk at a time, so the file is never held
    whole. Returns what follows the last newline (an unterminated last line, or b"").
    Marks `data` irregular at the first line it cannot describe. `st` and `checked_ns` (the clock
    before it) were taken before the file was read: they are what the columns record."""
    builder = _Builder(data) if data.regular else None
    # One buffer read into again and again, the unfinished line moved to its front each time:
    # a new bytes object per chunk costs 4x more (allocation, page faults, joining).
    buffer = bytearray(_CHUNK)
    filled = 0  # bytes of `buffer` holding the file (from data.size on)
    while True:
        if filled == len(buffer):
            buffer += bytes(len(buffer))  # a line longer than the buffer: make room
        with memoryview(buffer) as free:
            got = f.readinto(free[filled:])
        if not got:
            break
        end = filled + got
        cut = buffer.rfind(b"\n", 0, end) + 1
        if not cut:
            filled = end
            continue
        if builder is not None:
            try:
                builder.add_block(buffer, cut)
            except _Irregular:
                builder = None
                _mark_irregular(data)
        with memoryview(buffer) as covered:
            hasher.update(covered[:cut])
        data.size += cut
        buffer[: end - cut] = buffer[cut:end]
        filled = end - cut
    if builder is not None:
        builder.finish()
    data.record(st, checked_ns, hasher)
    return bytes(buffer[:filled])


def _mark_irregular(data: EntryColumns) -> None:
    data.regular = False
    data.offsets = data.lengths = data.parents = data.kinds = b""
    data.kind_names = []
    data.ids = []


class _Builder:
    """The columns being extended: packed arrays and an id -> position map for parents."""

    def __init__(self, data: EntryColumns) -> None:
        self.data = data
        self.offsets = array("q", data.offsets)
        self.lengths = array("q", data.lengths)
        self.parents = array("i", data.parents)
        self.kinds = bytearray(data.kinds)
        self.kind_code = {name: code for code, name in enumerate(data.kind_names)}
        self.seen = set(data.ids)
        # id -> position, built only when many parents are not the entry just before (a set, and
        # comparing each parentId with the previous id, cost half as much as a dict of every id)
        self.by_id: dict[str, int] | None = None
        self.far_lookups = 0

    def add_block(self, block: bytearray, cut: int) -> None:
        """The complete lines of `block[:cut]` (`cut` is just after a newline; what follows is
        not looked at); `block` starts at `data.size` in the file."""
        data = self.data
        start = 0
        while not data.header_seen and start < cut:
            end = block.index(b"\n", start)
            piece = block[start:end]
            start = end + 1
            _take_header(data, piece)
        if start < cut and not self._add_dense(block, start, cut):
            self._add_lines(block[start : cut - 1].split(b"\n"), data.size + start)

    def _add_dense(self, block: bytearray, start: int, cut: int) -> bool:
        """The lines of `block[start:cut]` when they have the shape JSON.stringify gives them,
        one object per line and nothing between ("}\\n{" at every line break, checked): then one
        C call decodes the heads of all of them and the columns are taken from the heads with
        C-level maps, building no Python object per line but its head and id. False, adding
        nothing, for any other shape (`_add_lines` then takes the lines one by one).

        Why the check suffices for `decode_lines` (which reads a stream of values separated by
        any whitespace) to give exactly one value per line: a line begins with "{", so it begins
        a value unless a value from the line before goes on; that line ends with "}", after which
        a value can only go on with ",", "}" or "]" (a raw newline cannot be inside a string).
        So no value spans a line break, every line holds at least one value, and as many values
        as lines means one each."""
        if block[start] != 0x7B or block[cut - 2] != 0x7D:  # "{" ... "}\n": else not worth looking
            return False
        ends: list[int] = []  # where each line's newline is
        append, find = ends.append, block.find
        at = find(b"\n", start, cut)
        while at >= 0:
            append(at)
            at = find(b"\n", at + 1, cut)
        n = len(ends)
        starts = [start]
        starts.extend(map((1).__add__, ends))
        starts.pop()
        if (bytes(map(block.__getitem__, starts)) != b"{" * n
                or bytes(map(block.__getitem__, map((-1).__add__, ends))) != b"}" * n):
            return False
        try:
            heads = _decode_heads(memoryview(block)[start:cut])
        except (msgspec.DecodeError, msgspec.ValidationError):
            return False
        if len(heads) != n:
            return False  # two values on one line
        self._commit(heads, map(self.data.size.__add__, starts), map(sub, ends, starts))
        return True

    def _add_lines(self, pieces: list[bytearray], offset: int) -> None:
        """Complete lines (without their newlines), the first starting at `offset`, one at a time:
        blank and falsy lines are skipped, anything else that is not an entry's object is
        irregular."""
        # Comprehensions over the whole chunk rather than statements per line: several times faster.
        sizes = list(map(len, pieces))
        starts = list(accumulate(sizes, initial=offset))
        starts = [start + i for i, start in enumerate(starts)]  # + one newline per line before
        starts.pop()
        heads: list[Any] = [_head_of(piece) for piece in pieces]  # no None left past the filter below
        if None in heads:  # blank or falsy lines: Pi skips them
            kept = [i for i, head in enumerate(heads) if head is not None]
            heads = [heads[i] for i in kept]
            starts = [starts[i] for i in kept]
            sizes = [sizes[i] for i in kept]
        if heads:
            self._commit(heads, starts, sizes)

    def _commit(self, heads: list[Any], starts: Iterable[int], sizes: Iterable[int]) -> None:
        """Entries with these heads, lines at these offsets and of these sizes, in file order."""
        data = self.data
        n = len(heads)
        kinds_here = list(map(_type_of, heads))
        ids_here = list(map(_id_of, heads))  # strings (the decoder's type)
        ids = data.ids
        base = len(ids)
        seen = self.seen
        before = len(seen)
        seen.update(ids_here)
        if len(seen) != before + n or "" in seen:
            raise _Irregular  # an id seen twice; the empty id (names no parent: not truthy)
        ids.extend(ids_here)
        if self.by_id is not None:
            self.by_id.update(zip(ids_here, range(base, base + n), strict=True))
        parent_ids = list(map(_parent_of, heads))
        # Pi appends each entry as a child of the one before it, except after a move in the tree:
        # take the previous entry as the parent, then look up the few that name another
        previous = ids[base - 1 : base + n - 1] if base else [_NOTHING, *ids_here[:-1]]
        parent_pos = array("i", range(base - 1, base + n - 1))
        differs = bytes(map(ne, parent_ids, previous))
        at = differs.find(1)
        while at >= 0:
            parent_pos[at] = self._parent_position(parent_ids[at], base + at)
            at = differs.find(1, at + 1)
        kind_code = self.kind_code
        try:
            codes = bytes(map(kind_code.__getitem__, kinds_here))
        except KeyError:
            self._add_kinds(kinds_here)
            codes = bytes(map(kind_code.__getitem__, kinds_here))
        except TypeError:
            raise _Irregular from None  # an unhashable type
        self.kinds += codes
        self.offsets.extend(starts)
        self.lengths.extend(sizes)
        self.parents.extend(parent_pos)

    def _parent_position(self, parent: Any, own: int) -> int:
        """The position of the entry `parent` names, which must come before position `own`."""
        if not parent:
            return -1  # Pi follows only a truthy parentId
        if type(parent) is not str:
            raise _Irregular  # ids are strings: it names no entry
        by_id = self.by_id
        if by_id is None:
            ids = self.data.ids
            for near in _NEAR:  # a branch from a recent entry, usually
                with contextlib.suppress(ValueError):
                    return ids.index(parent, max(0, own - near), own)
            self.far_lookups += 1
            if self.far_lookups <= _FAR_LOOKUPS:
                try:
                    return ids.index(parent, 0, own)
                except ValueError:
                    raise _Irregular from None  # dangling, forward or self reference
            by_id = self.by_id = dict(zip(ids, range(len(ids)), strict=True))
        position = by_id.get(parent, own)
        if position >= own:
            raise _Irregular
        return position

    def _add_kinds(self, kinds: list[Any]) -> None:
        kind_code, kind_names = self.kind_code, self.data.kind_names
        try:
            new = set(kinds) - kind_code.keys()
        except TypeError:
            raise _Irregular from None  # an unhashable type
        for kind in new:
            if type(kind) is not str or kind == "session" or len(kind_names) >= _MAX_KINDS:
                raise _Irregular  # not an entry's type, a second header, or too many kinds
            kind_code[kind] = len(kind_names)
            kind_names.append(kind)

    def finish(self) -> None:
        data = self.data
        data.offsets = self.offsets.tobytes()
        data.lengths = self.lengths.tobytes()
        data.parents = self.parents.tobytes()
        data.kinds = bytes(self.kinds)


def _head_of(piece: bytes | bytearray) -> _Head | None:
    """The head of an entry line; None for a line Pi skips (blank or falsy); _Irregular for a
    line the columns cannot describe (unparsable, not an object, a type or id not a string)."""
    try:
        return _decode_head(piece)
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    if not piece.strip(b" \t\r\n\x0b\x0c"):
        return None
    try:
        value = _json.loads(piece)
    except _json.JsonLineError:
        raise _Irregular from None  # Pi skips it with a warning: the full reader prints it
    if value is None or value is False or value == "" or (type(value) in (int, float) and value == 0):
        return None
    raise _Irregular


def _take_header(data: EntryColumns, piece: bytes | bytearray) -> bool:
    """Whether `piece` is the first value of the file (then it must be a current-version header)."""
    if not piece.strip(b" \t\r\n\x0b\x0c"):
        return False
    try:
        value = _json.loads(piece)
    except _json.JsonLineError:
        raise _Irregular from None
    if value is None or value is False or value == "" or (type(value) in (int, float) and value == 0):
        return False
    version = value.get("version") if isinstance(value, dict) else None
    if not (isinstance(value, dict) and value.get("type") == "session" and isinstance(value.get("id"), str)
            and isinstance(version, int | float) and not isinstance(version, bool) and version >= 3):
        raise _Irregular  # not a session, or a legacy one (migrated by the full reader)
    data.header_seen = True
    return True


class ColumnsOutdated(Exception):
    """The file changed under the columns while they were used: read it again."""


class ColumnView:
    """Columns decoded for use: arrays indexed by entry position, and the open session file the
    lines are read from by offset (`close()` when done)."""

    def __init__(self, data: EntryColumns, fd: int) -> None:
        self.offsets = array("q", data.offsets)
        self.lengths = array("q", data.lengths)
        self.parents = array("i", data.parents)
        self.kinds = data.kinds
        self.kind_names = data.kind_names
        self.ids = data.ids
        self._fd = fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ColumnView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self.ids)

    def breaks(self) -> list[int]:
        """The positions whose parent is not the entry just before them (0 always): the path
        between two of them is a range of positions."""
        differs = bytes(map(ne, self.parents, range(-1, len(self.parents) - 1)))
        found = [0]
        at = differs.find(1, 1)
        while at >= 0:
            found.append(at)
            at = differs.find(1, at + 1)
        return found

    def kind_code(self, name: str) -> int:
        try:
            return self.kind_names.index(name)
        except ValueError:
            return -1

    def lines(self, positions: list[int]) -> list[memoryview]:
        """The lines at `positions` (ascending file order expected): one read per run of nearby
        lines, so a context of thousands of entries costs a few system calls, and the lines are
        cut from each read with C-level maps."""
        if not positions:
            return []
        starts = list(map(self.offsets.__getitem__, positions))
        stops = list(map(add, starts, map(self.lengths.__getitem__, positions)))
        # a new read where the gap to the next wanted line is large (or negative: out of order)
        gaps = list(map(sub, starts[1:], stops))
        far = bytes(map(or_, map(gt, gaps, repeat(_READ_GAP)), map(lt, gaps, repeat(0))))
        cuts = [0]
        at = far.find(1)
        while at >= 0:
            cuts.append(at + 1)
            at = far.find(1, at + 1)
        cuts.append(len(positions))
        out: list[memoryview] = []
        for i, j in pairwise(cuts):
            while i < j:  # reads of at most _READ_MAX bytes (unless one line is longer)
                k = bisect_right(stops, starts[i] + _READ_MAX, i + 1, j)
                out.extend(self._read(starts[i:k], stops[i:k]))
                i = k
        return out

    def _read(self, starts: list[int], stops: list[int]) -> list[memoryview]:
        base = starts[0]
        block = os.pread(self._fd, stops[-1] + 1 - base, base)  # + the last line's newline
        rel_stops = list(map(base.__rsub__, stops))
        try:
            ends = bytes(map(block.__getitem__, rel_stops))
        except IndexError:
            ends = b""  # the file is shorter than the columns say
        if ends != b"\n" * len(stops):  # every line must end where the columns say
            raise ColumnsOutdated("the session file changed while it was read")
        # views, not copies: the lines of one read share its buffer (freed with the last of them)
        return list(map(memoryview(block).__getitem__, map(slice, map(base.__rsub__, starts), rel_stops)))

    def entry(self, position: int) -> Any:
        return _json.loads(self.lines([position])[0])

    def position_of(self, entry_id: Any) -> int | None:
        if type(entry_id) is not str:
            return None
        try:
            return self.ids.index(entry_id)  # ids are unique in regular columns
        except ValueError:
            return None

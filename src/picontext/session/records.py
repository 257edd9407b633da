"""What a session's records are, and how a line of JSONL becomes one: shared by every store.

A session is a sequence of JSON lines read the way Pi reads them: split on "\\n" only, blank,
unparsable and JavaScript-falsy lines skipped, the first value the header. `RawLine` is an entry
kept unparsed (the few fields the tree needs, and its bytes), which a lazy load returns for the
bulky entry types. The JSONL, PostgreSQL and memory stores all parse through this module, so what
a session holds does not depend on where it is stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import accumulate
from typing import Any

import msgspec
import orjson

from picontext import _json
from picontext.session.long_lines import LongLine
from picontext.session.protocol import ListingFacts, LoadResult, SkippedLine, Tail, account_listing_fact

__all__ = [
    "HEADER_SCAN_LIMIT",
    "LAZY_TYPES",
    "MessageHead",
    "RawLine",
    "decode_head",
    "facts_of_bytes",
    "first_value",
    "header_in",
    "is_current",
    "is_header",
    "is_js_falsy",
    "parse_appended",
    "parse_full",
    "parse_line",
    "parse_rest_lazily",
    "parse_session_bytes",
    "parsed_values",
    "records_since",
]

# How far a reader looks for the header before it decides that a file is not a session (Pi's
# bounded header discovery): a header is a small line.
HEADER_SCAN_LIMIT = 1024 * 1024


def is_js_falsy(value: Any) -> bool:
    """Falsy for JavaScript: null, false, 0, "" (but {} and [] are truthy); such lines are skipped."""
    if value is None or value is False or value == "":
        return True
    return type(value) in (int, float) and value == 0


def parse_line(raw: bytes | LongLine, number: int, result: LoadResult, *, last: bool) -> None:
    if isinstance(raw, bytes) and not raw.strip(b" \t\r\n\x0b\x0c"):
        return
    try:
        value = _json.loads(raw) if isinstance(raw, bytes) else raw.load()
    except _json.JsonLineError as exc:
        reason = str(exc).splitlines()[0][:120]
        result.skipped.append(SkippedLine(number, reason, torn=last))
        return
    if not is_js_falsy(value):
        result.entries.append(value)


def is_header(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "session" and isinstance(value.get("id"), str)


class MessageHead(msgspec.Struct, gc=False):
    role: Any = msgspec.UNSET


class RawLine(msgspec.Struct, gc=False):
    """An entry not parsed yet: the few fields the tree index needs, and its line.

    Decoded straight from the line by msgspec, which skips every other field without building
    Python objects for it. The line is filled in afterwards (the JSON names of the fields after
    `message` cannot occur in a file). Written back to a file as the original bytes, so an entry
    never parsed is copied byte for byte.

    A store that has the head without the line (the PostgreSQL store keeps heads in a column)
    leaves `raw` empty and sets `source`, an object whose `line_of(seq)` returns the line of
    record `seq` on first use (`LineSource`).
    """

    type: Any = msgspec.UNSET
    id: Any = msgspec.UNSET
    parentId: Any = msgspec.UNSET
    message: MessageHead | msgspec.UnsetType | None = msgspec.UNSET
    raw: bytes = msgspec.field(default=b"", name="@@picontext raw line@@")
    seq: int = msgspec.field(default=-1, name="@@picontext seq@@")
    source: Any = msgspec.field(default=None, name="@@picontext line source@@")

    @property
    def line(self) -> bytes:
        if not self.raw and self.source is not None:
            if getattr(self.source, "rereads", False):
                return bytes(self.source.line_of(self.seq, self.id))  # the file keeps it: not held here again
            self.raw = self.source.line_of(self.seq)
            self.source = None
        return self.raw

    @line.setter
    def line(self, value: bytes) -> None:
        self.raw = value
        self.source = None

    def has_id(self) -> bool:
        return self.id is not msgspec.UNSET

    @property
    def parent_id(self) -> Any:
        return None if self.parentId is msgspec.UNSET else self.parentId

    @property
    def role(self) -> Any:
        message = self.message
        return message.role if type(message) is MessageHead and message.role is not msgspec.UNSET else None

    def parse(self) -> Any:
        """The entry's value. A line its file can give again (`source.rereads`: the JSONL store's
        `FileLines`, `seq` its offset) is dropped once parsed, so an opened session does not hold
        its entries twice, as bytes and as values; a long line is parsed from the file in pieces."""
        source = self.source
        if source is None or not getattr(source, "rereads", False):
            return _json.loads(self.line)
        raw = self.raw
        if raw:
            self.raw = b""
            return _json.loads(raw)
        return source.load_entry(self.seq, self.id)


_decode_raw_line = msgspec.json.Decoder(RawLine).decode

# Entry types whose bodies can be large; their lines are kept as bytes until first needed.
LAZY_TYPES = frozenset({"message", "custom_message", "custom", "usage", "branch_summary"})


def decode_head(raw: bytes) -> RawLine | None:
    try:
        return _decode_raw_line(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def parse_session_bytes(data: bytes | list[Any], *, lazy: bool = False, source: Any = None) -> LoadResult:
    """Parse JSONL text split on "\\n" only, skipping blank, unparseable and falsy lines.

    `data` is the file's bytes, or already split on "\\n" (where a line may be a `LongLine`, left
    in the file). With `lazy`, lines of the bulky entry types of a current-version file are kept as
    `RawLine`s; with a `source` (`store.FileLines`), each knows its offset in the file and drops
    its bytes once parsed.
    """
    result = LoadResult()
    lines = data.split(b"\n") if isinstance(data, bytes) else data
    start = 0
    if lazy:
        start = parse_full(lines, 0, result, first_only=True)  # the header decides
        if result.entries and is_header(result.entries[0]) and is_current(result.entries[0]):
            parse_rest_lazily(lines, start, result, source)
            start = len(lines)
    parse_full(lines, start, result)
    result.missing_newline = lines[-1] != b""
    result.valid = bool(result.entries) and is_header(result.entries[0])
    return result


def parse_full(lines: list[Any], start: int, result: LoadResult, *, first_only: bool = False) -> int:
    """Parse lines[start:] completely; with `first_only`, stop after the first kept value."""
    loads = orjson.loads
    entries = result.entries
    last = len(lines) - 1
    for n in range(start, len(lines)):
        raw = lines[n]
        try:
            value = loads(raw)  # fast path: a well-formed line
        except (orjson.JSONDecodeError, TypeError):  # or a LongLine
            parse_line(raw, n + 1, result, last=n == last)
            continue
        if not is_js_falsy(value):
            entries.append(value)
            if first_only:
                return n + 1
    return len(lines)


def is_current(header: dict[str, Any]) -> bool:
    version = header.get("version")
    return isinstance(version, int | float) and not isinstance(version, bool) and version >= 3


def _long_head(line: LongLine) -> RawLine | None:
    """The head of a long line, from its skeleton (its long strings never read into memory)."""
    try:
        return _decode_raw_line(_json.dumps(line.load(texts=False)))
    except (_json.JsonLineError, msgspec.DecodeError, msgspec.ValidationError, TypeError):
        return None


def parse_rest_lazily(lines: list[Any], start: int, result: LoadResult, source: Any = None) -> None:
    entries = result.entries
    append = entries.append
    lazy_types = LAZY_TYPES
    last = len(lines) - 1
    heads = [decode_head(raw) if type(raw) is not LongLine else _long_head(raw) for raw in lines[start:]]
    # where line n starts in the file: the lengths before it, and a newline after each
    ends = list(accumulate(map(len, lines))) if source is not None else None
    for offset, head in enumerate(heads):
        n = start + offset
        raw = lines[n]
        if head is not None and type(head.type) is str and head.type in lazy_types:
            if type(raw) is LongLine:
                head.source, head.seq = raw.source, raw.offset
            else:
                head.raw = raw
                if ends is not None:
                    head.source, head.seq = source, (ends[n - 1] + n if n else 0)
            append(head)
            continue
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            parse_line(raw, n + 1, result, last=n == last)
            continue
        if not is_js_falsy(value):
            append(value)


def parsed_values(lines: Iterable[bytes]) -> Iterator[Any]:
    """The JSON values of `lines`, skipping blank and unparsable ones (how Pi reads a session)."""
    for raw in lines:
        if not raw.strip():
            continue
        try:
            value = _json.loads(raw)
        except _json.JsonLineError:
            continue
        yield value


def first_value(lines: Iterable[bytes]) -> Any:
    """The first value of `lines` that Pi does not skip (None when there is none)."""
    for value in parsed_values(lines):
        if not is_js_falsy(value):
            return value
    return None


def parse_appended(data: bytes, *, lazy: bool = False) -> LoadResult:
    """The records of `data`, whole lines appended to a current-version session (each ending
    with "\\n"): lazily, the bulky ones stay `RawLine`s."""
    result = LoadResult()
    lines = data.split(b"\n")
    lines.pop()  # the empty piece after the last "\n"
    if lazy:
        parse_rest_lazily(lines, 0, result)
    else:
        parse_full(lines, 0, result)
    result.size = len(data)
    return result


def records_since(before: bytes, rest: bytes, tail: Tail, *, lazy: bool = False) -> LoadResult:
    """`read_since` for a store that keeps a session as the bytes of its file: `rest` is what
    follows `tail.offset`, `before` the byte just before it (b"" at offset 0). When `tail` ended
    inside a torn line, that line's remainder is no record; an unterminated last line is left for
    a later read. The result's tail is where the complete lines end."""
    offset = tail.offset
    if offset > 0 and rest and before != b"\n":
        cut = rest.find(b"\n")
        if cut < 0:
            return LoadResult(tail=tail)
        offset += cut + 1
        rest = rest[cut + 1:]
    rest = rest[: rest.rfind(b"\n") + 1]
    result = parse_appended(rest, lazy=lazy)
    result.tail = Tail(tail.generation, offset + len(rest))
    return result


def facts_of_bytes(data: bytes, *, modified_ms: float = 0.0) -> ListingFacts | None:
    """The listing facts of a session file's bytes (None when its first value is no header)."""
    facts: ListingFacts | None = None
    for value in parsed_values(data.split(b"\n")):
        if facts is None:
            if not is_header(value):
                return None
            facts = ListingFacts(value, size=len(data), modified_ms=modified_ms)
        else:
            account_listing_fact(facts, value)
    return facts


def header_in(data: bytes) -> dict[str, Any] | None:
    """The header of a session file's bytes when its first value is one, else None."""
    value = first_value(data.split(b"\n"))
    return value if is_header(value) else None

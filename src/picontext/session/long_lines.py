"""Lines too large to hold twice: read from the file in pieces, never as one `bytes` object.

A session can hold one tool output of tens of megabytes on a single line (Pi #8196). Reading such
a line whole and parsing it keeps three copies at once (the line, the parser's working copy, the
string it builds); a session far over the window then needs more than twice its file's size in
memory to be opened. Here the line is read in pieces (`PIECE` bytes) and its long strings
(`LONG_STRING` bytes and more) are decoded piece by piece onto one growing string, so the peak is
that string plus a piece. Everything else on the line (the few keys around the output) is
gathered into a small *skeleton* in which each long string is a marker, parsed as usual, and the
markers are then replaced by the strings.

    load_long(read, length)            the line's value (read(pos, n): n bytes at pos of the line)
    load_long(read, length, texts=False)   the skeleton's value only: the markers stay (the head)
    hollow_content(head)               that head with its message content's markers as "" (or None)

The result is the value `_json.loads` would give for the whole line; a line that is not JSON
raises `JsonLineError`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import orjson

from picontext import _json

__all__ = ["LONG_LINE", "LONG_STRING", "PIECE", "LongLine", "hollow_content", "load_long"]

LONG_LINE = 1 << 20
"""Lines from this size on are not kept as bytes when a session is opened lazily."""
LONG_STRING = 1 << 16
"""Strings from this size on (in the file) are decoded piecewise, not through the skeleton."""
PIECE = 1 << 15
"""Read and decoded at a time: small pieces stay below the allocator's mmap threshold, so the
growing string is extended in place (measured on an 11 MB string: 32 KiB pieces peak at the
string's size, 1 MiB pieces at 1.8 times it)."""

_CONTENT = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.S)  # string content up to a closing quote
_QUOTE, _BACKSLASH, _U = 0x22, 0x5C, 0x75
_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")


def _decode(content: bytes) -> str:
    """The text of a piece of string content (complete escapes and characters)."""
    quoted = b'"' + content + b'"'
    try:
        return str(orjson.loads(quoted))
    except orjson.JSONDecodeError:
        return str(_json.loads(quoted))  # lone surrogates, invalid UTF-8: as JSON.parse reads them


def _odd_backslashes(buf: bytes, start: int, end: int) -> bool:
    """Whether the run of backslashes just before `end` (not before `start`) is odd."""
    run = 0
    while end - run - 1 >= start and buf[end - run - 1] == _BACKSLASH:
        run += 1
    return run % 2 == 1


def _safe_cut(buf: bytes, start: int, end: int) -> int:
    """A position in [start, end] where string content can be cut: not inside an escape (a
    `\\uXXXX`, a surrogate pair) or a UTF-8 character. `start` is such a position."""
    cut = max(start, end - 16)
    while cut > start and 0x80 <= buf[cut] <= 0xBF:  # a UTF-8 continuation byte
        cut -= 1
    if _odd_backslashes(buf, start, cut):
        cut -= 1  # between a backslash and the character it escapes
    for back in range(2, 6):  # inside the four digits of a \uXXXX
        at = cut - back
        if at >= start and buf[at] == _BACKSLASH and buf[at + 1] == _U and not _odd_backslashes(buf, start, at):
            cut = at
            break
    at = cut - 6
    if at >= start and _HIGH_SURROGATE.fullmatch(buf, at, cut) and not _odd_backslashes(buf, start, at):
        cut = at  # the first half of a surrogate pair: keep it with its second half
    return cut


def load_long(read: Callable[[int, int], bytes], length: int, *, texts: bool = True) -> Any:
    """The JSON value of a line of `length` bytes, read through `read(position, size)`."""
    marker = f"\x00picontext-long-{os.urandom(6).hex()}:"
    skeleton = bytearray()
    found: list[str] = []
    buf = b""
    at = 0  # position in buf
    read_to = 0  # line bytes read so far
    inside = False
    long = False
    start = 0  # where the current string's content begins in the skeleton
    text = ""  # the current long string, grown in place (only this frame holds it)
    while True:
        if read_to < length and (at >= len(buf) or (inside and len(buf) - at < 64)):
            piece = read(read_to, min(PIECE, length - read_to))
            if not piece:
                length = read_to  # the file got shorter: parse what there is (and fail)
                continue
            read_to += len(piece)
            buf = buf[at:] + piece
            at = 0
        elif at >= len(buf):
            break
        if not inside:
            quote = buf.find(b'"', at)
            if quote < 0:
                skeleton += buf[at:]
                at = len(buf)
                continue
            skeleton += buf[at : quote + 1]
            at = quote + 1
            inside, long, start, text = True, False, len(skeleton), ""
            continue
        end = _CONTENT.match(buf, at).end()  # type: ignore[union-attr]  # the pattern matches ""
        if end < len(buf) and buf[end] == _QUOTE:
            content = buf[at:end]
            at = end + 1
            inside = False
            if not long:
                skeleton += content
                skeleton.append(_QUOTE)
                continue
            if texts:
                text += _decode(content)
            found.append(text)
            text = ""
            skeleton += (marker + str(len(found) - 1)).encode("unicode_escape").replace(b"\\x00", b"\\u0000")
            skeleton.append(_QUOTE)
            continue
        if read_to >= length:  # the line ends inside a string: not JSON
            skeleton += buf[at:]
            at = len(buf)
            continue
        cut = _safe_cut(buf, at, end)  # the content reached the end of what was read
        content = buf[at:cut]
        at = cut
        if long:
            if texts:
                text += _decode(content)
        elif len(skeleton) - start + len(content) >= LONG_STRING:
            long = True
            if texts:
                text = _decode(bytes(skeleton[start:]) + content)
            del skeleton[start:]
        else:
            skeleton += content
    value = _json.loads(bytes(skeleton))
    if not found:
        return value
    return _restore(value, marker, found if texts else None)


_MARKER = "\x00picontext-long-"


def _hollow(value: Any, inside: bool) -> tuple[Any, bool]:
    """`value` with its markers as "" (allowed only `inside` the content); False if one is not."""
    if type(value) is str:
        if value.startswith(_MARKER):
            return "", inside
        return value, True
    if type(value) is list:
        items = []
        for v in value:
            item, ok = _hollow(v, inside)
            if not ok:
                return None, False
            items.append(item)
        return items, True
    if type(value) is dict:
        out = {}
        for k, v in value.items():
            if type(k) is str and k.startswith(_MARKER):
                return None, False
            item, ok = _hollow(v, inside)
            if not ok:
                return None, False
            out[k] = item
        return out, True
    return value, True


def hollow_content(head: Any) -> Any:
    """A message entry's head (`load_long(..., texts=False)`) with the long strings of its
    message's content as "", or None when a long string is anywhere else (then only the whole
    value will do). For a context whose edit replaces that content: it never reads it."""
    message = head.get("message") if type(head) is dict else None
    if type(message) is not dict:
        return None
    rest = {k: v for k, v in head.items() if k != "message"}
    fields = {k: v for k, v in message.items() if k != "content"}
    if not _hollow(rest, False)[1] or not _hollow(fields, False)[1]:
        return None
    content, ok = _hollow(message.get("content"), True)
    if not ok:
        return None
    if "content" in message:
        message["content"] = content
    return head


def _restore(value: Any, marker: str, found: list[str] | None) -> Any:
    """`value` with each marker string replaced by its long string (kept when `found` is None)."""
    if type(value) is str:
        if found is not None and value.startswith(marker):
            return found[int(value[len(marker):])]
        return value
    if type(value) is list:
        return [_restore(v, marker, found) for v in value]
    if type(value) is dict:
        return {_restore(k, marker, found): _restore(v, marker, found) for k, v in value.items()}
    return value


class LongLine:
    """A line left in the file (`LONG_LINE` bytes or more): where it is, and who reads it."""

    __slots__ = ("length", "offset", "source")

    def __init__(self, source: Any, offset: int, length: int) -> None:
        self.source = source
        self.offset = offset
        self.length = length

    def __len__(self) -> int:
        return self.length

    def load(self, *, texts: bool = True) -> Any:
        """The line's value (`load_long`); with `texts=False` its long strings stay markers."""
        return self.source.load_long(self.offset, self.length, texts=texts)

"""JSON helpers that read and write exactly what Pi's `JSON.parse`/`JSON.stringify` do.

Why not plain `json`: session files are large and parsed on every open, so the fast path is
orjson. The slow paths exist for what orjson does differently from JavaScript:

* reading: integers beyond 64 bits, lone surrogates and invalid UTF-8 (which Node's decoder
  replaces with U+FFFD) are accepted by JSON.parse but refused by orjson;
* writing: numbers are formatted as `Number.prototype.toString` formats them (`1.0` -> `1`,
  `-0.0` -> `0`, `1e16` -> `10000000000000000`, `1e-6` -> `0.000001`), integers beyond 2^53 are
  written as the double JavaScript would have parsed them into, object keys that are array
  indices ("0", "7", ...) come first in ascending order as in JavaScript property order, and
  lone surrogates are escaped (`\\ud83d`) as the well-formed JSON.stringify does.

`dumps` writes with orjson and looks at the bytes for any of those cases (a C-speed regex); only
then is the value written again by the JavaScript-exact encoder (`js_stringify`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any, TypeAlias

import msgspec
import orjson

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
JsonObject: TypeAlias = dict[str, Any]

_MAX_SAFE = 2**53
_MAX_INDEX = 2**32 - 2  # the largest array index: such keys are ordered first by JavaScript
_INDEX_KEY = re.compile(r"0|[1-9][0-9]*")
# Bytes of orjson's output that JSON.stringify would write differently: a key that may be an array
# index (`,"` and `{"` cannot occur inside a JSON string, where quotes are escaped), a float that
# orjson writes with ".0" or an exponent, an integer of 16 or more digits. Inside strings the number
# patterns can give false alarms, which only cost the exact encoder's time.
_SUSPECT = re.compile(
    rb"[{,:\[]"  # one leading character class keeps the scan fast (measured 4x faster than alternatives)
    rb'(?:"[0-9]+":'  # a key that may be an array index
    rb"|-?[0-9]+(?:\.[0-9]+)?(?:e|\.0[,}\]])"  # 1e16, 1e-6, 2.0
    rb"|-?[0-9]{16})"  # beyond 2^53 (9007199254740992 has 16 digits)
)


_NUMBER_START = frozenset(b"-0123456789")  # a bare number: checked by the exact encoder
_DIGITS = tuple(bytes([d]) for d in b"0123456789")
_BARE_STARTS = (b"-", *_DIGITS)
_LINES = msgspec.json.Encoder().encode_lines


class JsonLineError(ValueError):
    """A line that JavaScript's JSON.parse would reject."""


def _reject_constant(name: str) -> Any:
    raise JsonLineError(f"invalid JSON constant {name}")


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse one JSON text the way JSON.parse does; raise JsonLineError when it would throw."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    if isinstance(data, memoryview):
        data = bytes(data)
    if isinstance(data, memoryview):
        data = bytes(data)
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes | bytearray) else data
    try:
        # JSON.parse accepts what orjson refuses: huge integers (as floats) and lone surrogates.
        return json.loads(text, parse_constant=_reject_constant, parse_int=_js_int)
    except (ValueError, RecursionError) as exc:
        raise JsonLineError(str(exc)) from None


def _js_int(text: str) -> int | float:
    value = int(text)
    return value if -(2**63) <= value < 2**64 else float(value)


def js_number(value: float | int) -> str:
    """`Number.prototype.toString()` of a finite number (ECMA-262 Number::toString, radix 10)."""
    if isinstance(value, int):
        if -_MAX_SAFE <= value <= _MAX_SAFE:
            return str(value)
        value = float(value)  # what JSON.parse would have made of it
    if value == 0:
        return "0"  # also -0
    if not math.isfinite(value):
        return "null"
    sign = "-" if value < 0 else ""
    mantissa, _, exp = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac.rstrip("0")) if frac != "0" else whole
    point = len(whole) + (int(exp) if exp else 0)  # value = 0.<digits> * 10**point
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    k, n = len(digits), point
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    exponent = f"e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + (digits if k == 1 else digits[0] + "." + digits[1:]) + exponent


def js_joined(values: list[Any]) -> str:
    """`Array.prototype.join(",")`, as `String(array)` makes it (null is "")."""
    parts = []
    for v in values:
        if v is None:
            parts.append("")
        elif isinstance(v, bool):
            parts.append("true" if v else "false")
        elif isinstance(v, int | float):
            parts.append(js_number(v) if math.isfinite(v) else ("NaN" if v != v else
                                                                       "Infinity" if v > 0 else "-Infinity"))
        elif isinstance(v, list):
            parts.append(js_joined(v))
        elif isinstance(v, dict):
            parts.append("[object Object]")
        else:
            parts.append(str(v))
    return ",".join(parts)


def _is_index(key: str) -> bool:
    return _INDEX_KEY.fullmatch(key) is not None and int(key) <= _MAX_INDEX


def _js_key_order(value: dict[Any, Any]) -> list[Any]:
    keys = list(value)
    indices = [k for k in keys if isinstance(k, str) and _is_index(k)]
    if not indices:
        return keys
    index_set = set(indices)
    return sorted(indices, key=int) + [k for k in keys if k not in index_set]


def _string(text: str) -> str:
    try:
        return orjson.dumps(text).decode()
    except TypeError:  # lone surrogates: escaped, as the well-formed JSON.stringify does
        return '"' + "".join(_string_char(c) for c in text) + '"'


def _string_char(c: str) -> str:
    if "\ud800" <= c <= "\udfff":
        return f"\\u{ord(c):04x}"
    return orjson.dumps(c).decode()[1:-1]


def _is_view(value: Any) -> bool:
    """A read-only sequence handed out instead of a list (the projection's `PrefixView`)."""
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray | memoryview)


def _view_items(value: Any) -> list[Any]:
    """orjson's `default`: a read-only sequence is written as the list it reads as."""
    if _is_view(value):
        return list(value)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def js_stringify(value: Any) -> str:
    """JSON.stringify(value) exactly, for JSON-shaped values (dict keys must be strings)."""
    parts: list[str] = []
    _write(value, parts.append)
    return "".join(parts)


def _write(value: Any, out: Any) -> None:
    if value is None or value is True or value is False:
        out("null" if value is None else "true" if value else "false")
    elif isinstance(value, str):
        out(_string(value))
    elif isinstance(value, bool):
        out("true" if value else "false")
    elif isinstance(value, int | float):
        out(js_number(value))
    elif isinstance(value, dict):
        out("{")
        first = True
        for key in _js_key_order(value):
            if not first:
                out(",")
            first = False
            out(_string(str(key)))
            out(":")
            _write(value[key], out)
        out("}")
    elif isinstance(value, list | tuple) or _is_view(value):
        out("[")
        for i, item in enumerate(value):
            if i:
                out(",")
            _write(item, out)
        out("]")
    else:
        out(orjson.dumps(value).decode())


# Every digit made a 0 and `{[}]` a `,`: each match of `_SUSPECT` then leaves a mark that a
# substring search finds (a match starts on `,` or `:`; a `,` before or after a number may be any
# of `{[,}]`, which only adds false alarms). A newline (which JSON text holds only between values:
# `dumps_joined_lines`) reads as a comma.
_SHAPES = bytes.maketrans(b"123456789{[}]\n", b"000000000,,,,,")
_ZERO, _DOT, _MINUS, _QUOTE = b"0"[0], b"."[0], b"-"[0], b'"'[0]
_STARTS = frozenset(b",:")
_IN_NUMBER = frozenset(b"0.-,:")  # what may come before the last digit of a number's mantissa


def _after_digits(shapes: bytes, at: int) -> int:
    """Index of the first character before the run of 0s ending just before `at` (-1: none)."""
    while at > 0 and shapes[at - 1] == _ZERO:
        at -= 1
    return at - 1


def _run_end(shapes: bytes, at: int) -> int:
    """Index just past the run of 0s that includes `at`."""
    while at < len(shapes) and shapes[at] == _ZERO:
        at += 1
    return at


def _number_before(shapes: bytes, at: int) -> bool:
    """Whether `shapes[:at]` ends with `[,:]-?0+(.0+)?`: a number that `_SUSPECT` would start on."""
    i = _after_digits(shapes, at)
    if i + 1 == at:
        return False  # no digit
    if i >= 0 and shapes[i] == _DOT:
        j = _after_digits(shapes, i)
        if j + 1 == i:
            return False
        i = j
    if i >= 0 and shapes[i] == _MINUS:
        i -= 1
    return i >= 0 and shapes[i] in _STARTS


def _key_before(shapes: bytes, at: int) -> bool:
    """Whether `shapes[:at]` ends with `,"0+` or `:"0+`: a key made of digits that `_SUSPECT` would
    start on."""
    i = _after_digits(shapes, at)
    return i + 1 < at and i >= 1 and shapes[i] == _QUOTE and shapes[i - 1] in _STARTS


def _found(shapes: bytes, mark: bytes, test: Any) -> bool:
    at = shapes.find(mark)
    while at >= 0:
        if test(at):
            return True
        at = shapes.find(mark, at + 1)
    return False


def _may_be_suspect(out: bytes) -> bool:
    """False only when `_SUSPECT` cannot match `out`. On one translated copy (`_SHAPES`), every
    match leaves: sixteen 0s after a start (an integer beyond 2^53); `0e` after a number (an exponent); `0":`
    after `,"0+` (an index key); `.0,` where the text has `.0` (a float written with `.0`).
    Substring searches find the candidates at memory speed, where the regex takes seconds over a
    large text; text that only looks alike (hex ids like `3e1`) is ruled out cheaply."""
    shapes = out.translate(_SHAPES)
    find = shapes.find
    at = find(b"0000000000000000")
    while at >= 0:  # sixteen digits right after a start (a fraction's digits are after a ".")
        start = _after_digits(shapes, at)
        if start >= 0 and shapes[start] == _MINUS:
            start -= 1
        if start >= 0 and shapes[start] in _STARTS:
            return True
        at = find(b"0000000000000000", _run_end(shapes, at))
    at = find(b"0e")
    while at >= 0:  # most candidates are inside hex strings (`3e1`): ruled out by the character before
        if (at == 0 or shapes[at - 1] in _IN_NUMBER) and _number_before(shapes, at + 1):
            return True
        at = find(b"0e", at + 1)
    if _found(shapes, b'0":', lambda at: _key_before(shapes, at + 1)):
        return True
    return _found(shapes, b".0,", lambda at: out[at + 1] == _ZERO)


def _clean(out: bytes) -> bool:
    return not _may_be_suspect(out) or _SUSPECT.search(out) is None


def dumps(value: Any) -> bytes:
    """Serialize like JSON.stringify: compact, non-ASCII raw, keys in JavaScript's order."""
    try:
        out = orjson.dumps(value, default=_view_items)
    except TypeError:  # lone surrogates, integers beyond 64 bits
        return js_stringify(value).encode("utf-8")
    if out[0] not in _NUMBER_START and _clean(out):
        return out
    if len(out) > _WHOLE_EXACT_LIMIT and (isinstance(value, dict | list | tuple) or _is_view(value)):
        return _dumps_members(value)
    return js_stringify(value).encode("utf-8")


_WHOLE_EXACT_LIMIT = 1 << 16  # above this, a suspect value is written again member by member


def _dumps_members(value: Any) -> bytes:
    """`dumps` of a large container one member at a time, so that only the members that need the
    exact encoder go through it (one float written `1.0` must not send 30 MB through Python)."""
    if isinstance(value, dict):
        return b"{" + b",".join(_string(str(key)).encode("utf-8") + b":" + dumps(value[key])
                                for key in _js_key_order(value)) + b"}"
    return b"[" + b",".join(map(dumps, value)) + b"]"


def dumps_joined(values: list[Any]) -> bytes:
    """`b",".join(dumps(v) for v in values)`: the list written by orjson in one call, and checked
    for JavaScript-only formats once over the whole text (a match in one value's text is a match
    in the whole; each value follows a "[" or "," there, so bare numbers are checked too)."""
    try:
        out = orjson.dumps(values, default=_view_items)
    except TypeError:  # lone surrogates, integers beyond 64 bits, nesting too deep for orjson
        return b",".join(map(dumps, values))
    if _clean(out):
        return out[1:-1]
    return b",".join(map(dumps, values))


def dumps_lines(values: list[Any]) -> list[bytes]:
    """`[dumps(v) for v in values]` (see `dumps_joined_lines`)."""
    return dumps_joined_lines(values).split(b"\n") if values else []


def dumps_joined_lines(values: list[Any]) -> bytes:
    """`b"\n".join(dumps(v) for v in values)`, written in one call and checked once.

    msgspec writes newline-delimited JSON in one C call (no per-value work in Python); it escapes
    strings exactly as orjson and JSON.stringify do (every code point checked:
    `tests/unit/test_json_lines.py`) and differs from JSON.stringify only where `_SUSPECT` looks
    (number formats: an exponent, `.0`, sixteen digits), so one format check over the whole text
    decides; only when it finds something is each value written on its own."""
    try:
        out = _LINES(values)
    except (TypeError, ValueError, OverflowError, RecursionError):  # lone surrogates, odd types, deep nesting
        return b"\n".join(map(dumps, values))
    # A line starts like a value after a comma (`_SHAPES` reads "\n" as ","), so a bare number is
    # checked too; the first line has nothing before it: a bare number there is written exactly.
    if out[:1] in _BARE_STARTS or _may_be_suspect(out):
        return b"\n".join(map(dumps, values))
    return out[:-1]


def dumps_line(value: Any) -> bytes:
    """One JSONL line (with the trailing newline) in JSON.stringify's format."""
    return dumps(value) + b"\n"

"""JSON helpers that read and write exactly what Pi's `JSON.parse`/`JSON.stringify` do.

Why not plain `json`: session files are large and parsed on every open, so the fast path is
orjson. The slow path exists for the inputs orjson refuses but JavaScript accepts (integers
beyond 64 bits, lone surrogates, invalid UTF-8 that Node's decoder replaces with U+FFFD).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, TypeAlias

import orjson

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
JsonObject: TypeAlias = dict[str, Any]

_JS_MAX_EXACT = 1e21
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # JSON.stringify switches to exponent notation from here on


class JsonLineError(ValueError):
    """A line that JavaScript's JSON.parse would reject."""


def _reject_constant(name: str) -> Any:
    raise JsonLineError(f"invalid JSON constant {name}")


def loads(data: bytes | str) -> Any:
    """Parse one JSON text the way JSON.parse does; raise JsonLineError when it would throw."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes | bytearray) else data
    try:
        # JSON.parse accepts what orjson refuses: huge integers (as floats) and lone surrogates.
        return json.loads(text, parse_constant=_reject_constant, parse_int=_js_int)
    except (ValueError, RecursionError) as exc:
        raise JsonLineError(str(exc)) from None


def _js_int(text: str) -> int | float:
    value = int(text)
    return value if -(2**63) <= value < 2**64 else float(value)


def _normalize(value: Any) -> Any:
    """Make floats print as JavaScript prints them (1.0 -> 1, -0.0 -> 0)."""
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < _JS_MAX_EXACT:
            return int(value)
        if not math.isfinite(value):
            return None  # JSON.stringify writes NaN and Infinity as null
        return value
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalize(v) for v in value]
    return value


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_float(v) for v in value)
    return False


def dumps(value: Any) -> bytes:
    """Serialize like JSON.stringify: compact, non-ASCII raw, keys in insertion order."""
    try:
        return orjson.dumps(value)
    except TypeError:
        # Strings with lone surrogates or ints beyond 64 bits: fall back to the stdlib, and escape
        # lone surrogates as JSON.stringify does (well-formed JSON.stringify, ES2019).
        text = json.dumps(_normalize(value), ensure_ascii=False, separators=(",", ":"))
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def dumps_line(value: Any) -> bytes:
    """One JSONL line (with the trailing newline) in JSON.stringify's format."""
    if _has_float(value):
        value = _normalize(value)
    return dumps(value) + b"\n"

"""A small JSON-schema check for tool arguments (Pi validates with TypeBox before running a tool).

Covers what tool schemas use: object properties, `required`, and the primitive `type`s, arrays
and nested objects. Unknown keywords are ignored. Returns the first problem as one line, or None.
"""

from __future__ import annotations

from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _type_ok(value: Any, kind: str) -> bool:
    expected = _TYPES.get(kind)
    if expected is None:
        return True
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, expected)


def validate_arguments(schema: dict[str, Any], value: Any, where: str = "") -> str | None:
    """The first mismatch between `value` and `schema` (e.g. "path: expected string"), or None."""
    kind = schema.get("type")
    label = where or "arguments"
    if isinstance(kind, list):
        if not any(_type_ok(value, k) for k in kind):
            return f"{label}: expected {' or '.join(kind)}"
    elif isinstance(kind, str) and not _type_ok(value, kind):
        return f"{label}: expected {kind}, got {type(value).__name__}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{label}: must be one of {', '.join(map(repr, schema['enum']))}"
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in value:
                return f"missing required argument {name!r}" if not where else f"{where}: missing {name!r}"
        for name, sub in props.items():
            if name in value and isinstance(sub, dict):
                problem = validate_arguments(sub, value[name], f"{where}.{name}" if where else name)
                if problem:
                    return problem
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            problem = validate_arguments(schema["items"], item, f"{label}[{i}]")
            if problem:
                return problem
    return None

"""Format migrations v1 -> v2 -> v3, in place on the parsed file entries (header included).

Mirrors Pi `migrateV1ToV2`, `migrateV2ToV3`, `migrateToCurrentVersion`. Two deliberate
differences (docs/divergences.md): ids minted for v1 entries are derived from the session id and
the line position, so reading a v1 file twice gives the same ids (Pi mints random ones and then
rewrites the file); and values that are not objects are passed over instead of crashing.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from typing import Any

from picontext import _json

CURRENT_SESSION_VERSION = 3

IdMinter = Callable[[int], str]


_JS_SPACE = ("\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029"
             "\u202f\u205f\u3000\ufeff")
_JS_DECIMAL = re.compile(r"[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)", re.ASCII)
_JS_RADIX = re.compile(r"0(?:[xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)", re.ASCII)


def js_number(value: Any) -> float:
    """JavaScript's Number(value) for JSON values, as used by `version >= 3` comparisons: an
    array is its joined text (`[null]` is "" so 0, `["3"]` is 3), an object NaN."""
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip(_JS_SPACE)
        if not text:
            return 0.0
        if _JS_RADIX.fullmatch(text):
            return float(int(text, 0))
        return float(text) if _JS_DECIMAL.fullmatch(text) else math.nan
    if isinstance(value, list):
        return js_number(_json.js_joined(value))
    return math.nan


def file_version(file_entries: list[Any]) -> float:
    """Version of the first `session` record, 1 when absent or null."""
    for entry in file_entries:
        if isinstance(entry, dict) and entry.get("type") == "session":
            version = entry.get("version")
            return 1.0 if version is None else js_number(version)
    return 1.0


def deterministic_minter(seed: str) -> IdMinter:
    """8-hex ids that depend only on `seed` and the entry's position, never colliding."""
    used: set[str] = set()

    def mint(position: int) -> str:
        for attempt in range(100):
            digest = hashlib.sha256(f"{seed}:{position}:{attempt}".encode("utf-8", "surrogatepass")).hexdigest()
            if digest[:8] not in used:
                used.add(digest[:8])
                return digest[:8]
        full = hashlib.sha256(f"{seed}:{position}:full".encode("utf-8", "surrogatepass")).hexdigest()
        return f"{full[:8]}-{full[8:12]}-{full[12:16]}-{full[16:20]}-{full[20:32]}"

    return mint


def migrate_v1_to_v2(file_entries: list[Any], mint: IdMinter) -> None:
    """Give every entry an id and chain them linearly; resolve `firstKeptEntryIndex`."""
    prev: str | None = None
    for position, entry in enumerate(file_entries):
        if not isinstance(entry, dict):
            continue
        if entry.get("type") == "session":
            entry["version"] = 2
            continue
        entry["id"] = mint(position)
        entry["parentId"] = prev
        prev = entry["id"]
        if entry.get("type") == "compaction":
            index = entry.get("firstKeptEntryIndex")
            if isinstance(index, int | float) and not isinstance(index, bool):
                target = _at(file_entries, index)
                if isinstance(target, dict) and target.get("type") != "session" and "id" in target:
                    entry["firstKeptEntryId"] = target["id"]
                del entry["firstKeptEntryIndex"]


def _at(items: list[Any], index: float) -> Any:
    if isinstance(index, float) and not index.is_integer():
        return None
    i = int(index)
    return items[i] if 0 <= i < len(items) else None


def migrate_v2_to_v3(file_entries: list[Any]) -> None:
    """Rename the legacy `hookMessage` role to `custom`."""
    for entry in file_entries:
        if not isinstance(entry, dict):
            continue
        if entry.get("type") == "session":
            entry["version"] = 3
        elif entry.get("type") == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") == "hookMessage":
                message["role"] = "custom"


def migrate_to_current(file_entries: list[Any], mint: IdMinter | None = None) -> bool:
    """Bring entries to version 3 in place; True when anything was migrated."""
    version = file_version(file_entries)
    if version >= CURRENT_SESSION_VERSION:
        return False
    if version < 2:
        if mint is None:
            header = next((e for e in file_entries if isinstance(e, dict) and e.get("type") == "session"), {})
            mint = deterministic_minter(str(header.get("id", "")) + str(header.get("timestamp", "")))
        migrate_v1_to_v2(file_entries, mint)
    if version < 3:
        migrate_v2_to_v3(file_entries)
    return True

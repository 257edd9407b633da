"""Failed summary attempts on record: `picontext.compaction-failed` custom entries.

Every failed summary attempt of a compaction (compaction/fallback.py) appends one `custom` entry
(Pi projects custom entries to nothing, so both read the file the same way):

    {"type": "custom", "customType": "picontext.compaction-failed", "data": {
        "version": 1, "reason": "threshold" | "overflow" | "manual" | "background", "attempt": 1,
        "kind": "length" | "empty" | "toolCall" | "error" | "timeout" | "overflow" | "oversize"
                | "refusal" | "garbage",
        "error": "...", "next": "retry" | "fallback" | "none" | "blocking",
        "firstKeptEntryId": "...", "tokensBefore": N, "model": "provider/id" | null, "usage": {...}?}}

This module only reads them (for `picontext stats` and the viewer) and imports no model client.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from picontext.session.projection import field_of

__all__ = ["FAILURE_TYPE", "failure_line", "failure_records"]

FAILURE_TYPE: Final = "picontext.compaction-failed"


def failure_records(entries: Iterable[Any]) -> list[dict[str, Any]]:
    """`{id, timestamp, **data}` of every failure record among `entries`, in file order."""
    out = []
    for entry in entries:
        if field_of(entry, "type") != "custom" or field_of(entry, "customType") != FAILURE_TYPE:
            continue
        data = field_of(entry, "data")
        out.append({"id": field_of(entry, "id"), "timestamp": field_of(entry, "timestamp"),
                    **(data if isinstance(data, dict) else {})})
    return out


def failure_line(record: dict[str, Any]) -> str:
    """One line for a failure record: `threshold attempt 1: length -> retry: <error>`."""
    error = " ".join(str(record.get("error") or "").split())
    return (f"{record.get('reason', '?')} attempt {record.get('attempt', '?')}: {record.get('kind', '?')} -> "
            f"{record.get('next', '?')}: {error}")

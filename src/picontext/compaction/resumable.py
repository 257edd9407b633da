"""Crash-resumable compaction: the chosen span is written down before the summary is requested.

With `compaction.resumable` on, a compaction appends one `custom` entry before its first summary
request (custom entries are metadata: Pi and picontext project the file exactly as without it):

    {"type": "custom", "customType": "picontext.compaction-span", "data": {
        "version": 1, "firstKeptEntryId": "...", "previousCompactionId": "..." | null,
        "tokensBefore": N, "settings": {...CompactionSettings.to_json()}, "instructions": "..." | null,
        "model": "provider/id" | null, "reason": "threshold" | "manual" | ...}}

and the compaction entry it produces carries `details.spanId` (the span entry's id). Whatever
ends a span without a compaction (a failed or aborted summary, a background summary that the
conversation invalidated) appends `picontext.compaction-span-end` `{spanId, outcome}`.

After a crash (kill -9 in any phase) the newest span on the branch that is newer than the newest
compaction and has no end marker is *pending*: `resume_preparation` re-plans it on the branch as
it was when the span was chosen (the entries before the span entry, with the stored settings),
checks that it lands on the same cut, and the caller summarizes and appends it. One summary
request may be repeated (the one that was in flight); a compaction is never appended twice for
one span, because a compaction entry after the span closes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from picontext.compaction.prepare import CompactionPreparation, prepare_compaction
from picontext.compaction.settings import CompactionSettings
from picontext.session.projection import field_of

__all__ = [
    "SPAN_END_TYPE",
    "SPAN_TYPE",
    "PendingSpan",
    "end_span",
    "find_pending_span",
    "record_span",
    "resume_preparation",
    "span_details",
]

SPAN_TYPE: Final = "picontext.compaction-span"
SPAN_END_TYPE: Final = "picontext.compaction-span-end"
VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class PendingSpan:
    """A recorded span that no compaction and no end marker closed yet."""

    entry_id: str
    position: int
    """Index of the span entry in the branch it was found on."""
    data: dict[str, Any]

    @property
    def settings(self) -> CompactionSettings:
        return CompactionSettings.from_json(self.data.get("settings") or {}, source=f"span {self.entry_id}")

    @property
    def instructions(self) -> str | None:
        value = self.data.get("instructions")
        return value if isinstance(value, str) else None

    @property
    def model(self) -> str | None:
        value = self.data.get("model")
        return value if isinstance(value, str) else None

    @property
    def reason(self) -> str:
        return str(self.data.get("reason") or "threshold")


def record_span(manager: Any, prep: CompactionPreparation, settings: CompactionSettings, *, reason: str,
                instructions: str | None = None, model: str | None = None) -> str:
    """Append the span entry for `prep` (before any summary request); returns its id."""
    previous = prep.previous_compaction
    data = {
        "version": VERSION,
        "firstKeptEntryId": prep.first_kept_entry_id,
        "previousCompactionId": field_of(previous, "id") if previous is not None else None,
        "tokensBefore": prep.tokens_before,
        "settings": settings.to_json(),
        "instructions": instructions,
        "model": model,
        "reason": reason,
    }
    return str(manager.append_custom_entry(SPAN_TYPE, data))


def end_span(manager: Any, span_id: str, outcome: str) -> str:
    """Close a span that produced no compaction (`failed`, `aborted`, `discarded`, `invalid`)."""
    return str(manager.append_custom_entry(SPAN_END_TYPE, {"spanId": span_id, "outcome": outcome}))


def span_details(details: dict[str, Any] | None, span_id: str | None) -> dict[str, Any] | None:
    """The compaction entry's details with `spanId` added (unchanged when there is no span)."""
    if span_id is None:
        return details
    return {**(details or {}), "spanId": span_id}


def _is_custom(entry: Any, custom_type: str) -> bool:
    return field_of(entry, "type") == "custom" and field_of(entry, "customType") == custom_type


def find_pending_span(branch: Sequence[Any]) -> PendingSpan | None:
    """The newest span on `branch` (root first) that is after the newest compaction and not ended."""
    ended: set[str] = set()
    for position in range(len(branch) - 1, -1, -1):
        entry = branch[position]
        kind = field_of(entry, "type")
        if kind == "compaction":
            return None
        if _is_custom(entry, SPAN_END_TYPE):
            data = field_of(entry, "data")
            if isinstance(data, dict) and isinstance(data.get("spanId"), str):
                ended.add(data["spanId"])
            continue
        if _is_custom(entry, SPAN_TYPE):
            entry_id = field_of(entry, "id")
            data = field_of(entry, "data")
            if entry_id in ended or not isinstance(data, dict) or data.get("version") != VERSION:
                return None
            return PendingSpan(str(entry_id), position, data)
    return None


def resume_preparation(branch: Sequence[Any], span: PendingSpan) -> CompactionPreparation | None:
    """The preparation of `span`, re-planned on the branch as it was when the span was chosen.

    None when the span can no longer be applied: re-planning lands on another cut (the planner
    changed, or the file was edited by hand), or an entry it summarizes was edited since.
    """
    before = branch[: span.position]
    try:
        settings = span.settings
    except Exception:
        return None
    prep = prepare_compaction(before, settings)
    if prep is None or prep.first_kept_entry_id != span.data.get("firstKeptEntryId"):
        return None
    previous = prep.previous_compaction
    if (field_of(previous, "id") if previous is not None else None) != span.data.get("previousCompactionId"):
        return None
    summarized = {field_of(item.source_entry, "id") for item in prep.projection.entries[: prep.first_kept_entry_index]}
    for entry in branch[span.position + 1 :]:
        if field_of(entry, "type") == "context_edit" and field_of(entry, "targetId") in summarized:
            return None
    return prep

"""Where to cut a branch for compaction: the oldest entry kept verbatim (spec 02 §5).

    find_cut_point            raw entries, edits ignored              (Pi findCutPoint)
    find_projected_cut_point  projected entries, edits applied        (Pi findProjectedCutPoint)
    find_turn_start_index     the turn-starting entry at or before i  (Pi findTurnStartIndex)

Walk back from the newest entry summing per-entry estimates; at the first entry where the sum
reaches `keep_recent_tokens`, cut at the next valid cut point (never a tool result, which must
stay after its call), let metadata just before the cut travel with the kept part, and report a
split turn when the kept part starts inside a turn. Decisions equal the reference's unless
`exact_split_turns` is asked for (spec 02 §11.7; docs/divergences.md "Compaction planning").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from picontext.compaction.tokens import estimate_tokens
from picontext.session.projection import ProjectedEntry, entry_to_messages, field_of

CUT_POINT_ROLES: Final = frozenset({"user", "assistant", "bashExecution", "custom", "branchSummary",
                                    "compactionSummary"})
TURN_START_ROLES: Final = frozenset({"user", "bashExecution", "custom", "branchSummary", "compactionSummary"})


@dataclass(frozen=True, slots=True)
class CutPointResult:
    """Pi CutPointResult; `exceeded_budget` is set by the projected variant when the budget was reached."""

    first_kept_entry_index: int
    turn_start_index: int
    is_split_turn: bool
    exceeded_budget: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"firstKeptEntryIndex": self.first_kept_entry_index, "turnStartIndex": self.turn_start_index,
                "isSplitTurn": self.is_split_turn}


def _has_role(messages: Sequence[Any], roles: frozenset[str]) -> bool:
    # A role that is a list or an object (hostile files) is simply not one of `roles`.
    return any(isinstance(role := field_of(m, "role"), str) and role in roles for m in messages)


def _is_compaction(entry: Any) -> bool:
    return field_of(entry, "type") == "compaction"


class _View:
    """Messages, cut-point and turn-start tests for one entry list (raw or projected)."""

    def __init__(self, source_of: Callable[[int], Any], messages_of: Callable[[int], list[Any]]) -> None:
        self.source_of = source_of
        self.messages_of = messages_of

    def is_cut_point(self, i: int) -> bool:
        return not _is_compaction(self.source_of(i)) and _has_role(self.messages_of(i), CUT_POINT_ROLES)

    def is_turn_start(self, i: int) -> bool:
        return not _is_compaction(self.source_of(i)) and _has_role(self.messages_of(i), TURN_START_ROLES)

    def tokens(self, i: int) -> int:
        return sum(estimate_tokens(m) for m in self.messages_of(i))

    def turn_start(self, index: int, start: int) -> int:
        for i in range(index, start - 1, -1):
            if self.is_turn_start(i):
                return i
        return -1

    def crossing_cut(self, start: int, end: int, keep: int) -> tuple[int, bool] | None:
        """(cut, exceeded) before absorption, or None when the range has no cut point.

        Only the cut points next to the crossing are looked for, not the whole list.
        """
        acc = 0
        for i in range(end - 1, start - 1, -1):
            t = self.tokens(i)
            if t == 0:
                continue
            acc += t
            if acc >= keep:
                after = next((j for j in range(i, end) if self.is_cut_point(j)), None)
                if after is None:  # the crossing fell among trailing tool results: the last cut point
                    after = next((j for j in range(i - 1, start - 1, -1) if self.is_cut_point(j)), None)
                return None if after is None else (after, True)
        first = next((j for j in range(start, end) if self.is_cut_point(j)), None)
        return None if first is None else (first, False)

    def absorb(self, cut: int, start: int) -> int:
        while cut > start:
            before = cut - 1
            if _is_compaction(self.source_of(before)) or self.messages_of(before):
                break
            cut = before
        return cut


def _raw_view(entries: Sequence[Any]) -> _View:
    cache: dict[int, list[Any]] = {}

    def messages_of(i: int) -> list[Any]:
        found = cache.get(i)
        if found is None:
            found = cache[i] = entry_to_messages(entries[i])
        return found

    return _View(entries.__getitem__, messages_of)


def _projected_view(entries: Sequence[ProjectedEntry]) -> _View:
    return _View(lambda i: entries[i].source_entry, lambda i: entries[i].messages)


def find_turn_start_index(entries: Sequence[Any], entry_index: int, start_index: int) -> int:
    """Mirrors Pi `findTurnStartIndex` (compaction.ts): the nearest turn start in [start, index], or -1."""
    return _raw_view(entries).turn_start(entry_index, start_index)


def find_cut_point(entries: Sequence[Any], start_index: int, end_index: int, keep_recent_tokens: int) -> CutPointResult:
    """Mirrors Pi `findCutPoint` (compaction.ts): raw entries in [start, end), context edits ignored."""
    view = _raw_view(entries)
    found = view.crossing_cut(start_index, end_index, keep_recent_tokens)
    if found is None:
        return CutPointResult(start_index, -1, False)
    cut = view.absorb(found[0], start_index)
    if view.is_turn_start(cut):
        return CutPointResult(cut, -1, False)
    turn_start = view.turn_start(cut, start_index)
    return CutPointResult(cut, turn_start, turn_start != -1)


def _intrinsically_visible(entry: Any) -> bool:
    return field_of(entry, "type") != "context_edit" and bool(entry_to_messages(entry))


def _advance_past_omission(entries: Sequence[ProjectedEntry], cut: int, end: int) -> bool:
    """Whether the cut moves one entry forward because recovery omitted a failed attempt after it.

    The suffix after the cut must be only omitted entries and invisible ones (metadata, edits),
    hold an omitted assistant message, and replace nothing outside itself (spec 02 §5.3).
    """
    suffix = entries[cut + 1 : end]
    omitted_ids = set()
    omitted_assistant = False
    for item in suffix:
        source = item.source_entry
        if _is_compaction(source):
            return False
        if _intrinsically_visible(source):
            if item.messages:
                return False
            omitted_ids.add(field_of(source, "id"))
            if field_of(source, "type") == "message" and field_of(source.get("message"), "role") == "assistant":
                omitted_assistant = True
    if not omitted_assistant:
        return False
    for item in suffix:
        source = item.source_entry
        if field_of(source, "type") == "context_edit" and source.get("replacement") is not None:
            target = source.get("targetId")
            if not isinstance(target, str | int | float | type(None)) or target not in omitted_ids:
                return False
    return True


def find_projected_cut_point(entries: Sequence[ProjectedEntry], start_index: int, end_index: int,
                             keep_recent_tokens: int, *, exact_split_turns: bool = False) -> CutPointResult:
    """Mirrors Pi `findProjectedCutPoint` (compaction.ts): the cut over projected entries.

    Edits apply (omitted entries weigh nothing and are no cut points); a cut just before an
    omitted failed assistant attempt advances onto it so the over-budget input is summarized.
    With `exact_split_turns`, a cut whose first context-visible kept entry starts a turn is not
    split (the reference reports a split when metadata precedes it).
    """
    view = _projected_view(entries)
    found = view.crossing_cut(start_index, end_index, keep_recent_tokens)
    if found is None:
        return CutPointResult(start_index, -1, False)
    cut, exceeded = found
    if exceeded and _advance_past_omission(entries, cut, end_index):
        cut += 1
    visible_cut = cut
    cut = view.absorb(cut, start_index)
    if exact_split_turns:
        first_visible = next((i for i in range(visible_cut, end_index) if entries[i].messages), None)
        if first_visible is not None and view.is_turn_start(first_visible):
            return CutPointResult(cut, -1, False, exceeded)
    if view.is_turn_start(cut):
        return CutPointResult(cut, -1, False, exceeded)
    turn_start = view.turn_start(cut, start_index)
    return CutPointResult(cut, turn_start, turn_start != -1, exceeded)

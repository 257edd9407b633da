"""What a compaction of a branch would summarize and keep (spec 02 §6).

    prepare_compaction   path + settings -> CompactionPreparation | None   (Pi prepareCompaction)
    preparation_report   the JSON report of `picontext compact --dry-run --json`

Pure: no model is called and nothing is written. `None` means there is nothing to compact: the
branch ends with a compaction ("Already compacted"), is empty, or everything still fits in the
kept window ("Nothing to compact").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from picontext.compaction.cut_point import find_projected_cut_point
from picontext.compaction.file_ops import FileOperations, compute_file_lists, extract_file_ops, seed_from_details
from picontext.compaction.settings import CompactionSettings
from picontext.compaction.tokens import estimate_projected_context_tokens
from picontext.session.projection import ProjectedEntry, SessionProjection, field_of, project_path


@dataclass(frozen=True, slots=True)
class CompactionPreparation:
    """Mirrors Pi CompactionPreparation; the message lists are read-only views of session data.

    `first_kept_entry_index` indexes `projection.entries`; `previous_compaction` is the entry whose
    summary is `previous_summary` (None when the branch had no compaction before).
    """

    first_kept_entry_id: str
    messages_to_summarize: list[Any]
    turn_prefix_messages: list[Any]
    is_split_turn: bool
    tokens_before: int | float  # Pi's estimate: a float when the usage numbers are
    previous_summary: str | None
    file_ops: FileOperations
    settings: CompactionSettings
    first_kept_entry_index: int
    previous_compaction: Any
    projection: SessionProjection


def _conversation(entries: Sequence[ProjectedEntry]) -> list[Any]:
    """Messages to summarize: compaction entries skipped, system messages (prompt state) dropped."""
    return [
        m
        for item in entries
        if item.messages and not (type(src := item.source_entry) is dict and src.get("type") == "compaction")
        for m in item.messages
        if type(m) is not dict or m.get("role") != "system"
    ]


def prepare_compaction(path: Sequence[Any], settings: CompactionSettings, *,
                       projection: SessionProjection | None = None) -> CompactionPreparation | None:
    """Mirrors Pi `prepareCompaction` (compaction.ts): the cut, the spans and the file lists, or None.

    `path` is the branch, root first (SessionManager.get_branch()); `settings` the effective
    per-model settings. The previous compaction's summary is handed on as `previous_summary`, and
    messages it kept are summarized again once the kept window has moved past them. A caller
    that already holds the projection of exactly this path (SessionManager keeps one up to date)
    passes it as `projection` and saves rebuilding it.
    """
    if path and _is_compaction(path[-1]):
        return None
    if projection is None:
        projection = project_path(path, with_settings=False)  # planning needs no model or thinking level
    entries = projection.entries
    # Only the newest compaction (index 0) projects messages; one omitted by an edit does not count.
    has_previous = bool(entries) and bool(entries[0].messages) and _is_compaction(entries[0].source_entry)
    previous = entries[0].source_entry if has_previous else None
    boundary_start = 1 if has_previous else 0
    tokens_before = estimate_projected_context_tokens(projection, path)["tokens"]
    cut = find_projected_cut_point(entries, boundary_start, len(entries), settings.keep_recent_tokens,
                                   exact_split_turns=settings.exact_split_turns)
    if not 0 <= cut.first_kept_entry_index < len(entries):
        return None
    first_kept = entries[cut.first_kept_entry_index].source_entry
    first_kept_id = field_of(first_kept, "id")
    if not first_kept_id:
        return None
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_entry_index
    to_summarize = _conversation(entries[boundary_start:history_end])
    prefix = _conversation(entries[cut.turn_start_index : cut.first_kept_entry_index]) if cut.is_split_turn else []
    if not to_summarize and not prefix:
        return None
    ops = FileOperations()
    if previous is not None:
        seed_from_details(previous, ops)
    extract_file_ops(to_summarize, ops)
    if cut.is_split_turn:
        extract_file_ops(prefix, ops)
    return CompactionPreparation(
        first_kept_entry_id=first_kept_id,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=prefix,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous.get("summary") if previous is not None else None,
        file_ops=ops,
        settings=settings,
        first_kept_entry_index=cut.first_kept_entry_index,
        previous_compaction=previous,
        projection=projection,
    )


def _is_compaction(entry: Any) -> bool:
    return field_of(entry, "type") == "compaction"


def preparation_report(prep: CompactionPreparation | None) -> dict[str, Any] | None:
    """The dry-run report; this exact shape is the CLI contract of `picontext compact --dry-run --json`.

    `{"firstKeptEntryId", "tokensBefore", "isSplitTurn", "messagesToSummarize": <count>,
    "turnPrefixMessages": <count>, "previousSummary": <string|null>, "readFiles": [sorted],
    "modifiedFiles": [sorted]}`, or None (printed as `null`) when there is nothing to compact.
    """
    if prep is None:
        return None
    read_files, modified_files = compute_file_lists(prep.file_ops)
    return {
        "firstKeptEntryId": prep.first_kept_entry_id,
        "tokensBefore": prep.tokens_before,
        "isSplitTurn": prep.is_split_turn,
        "messagesToSummarize": len(prep.messages_to_summarize),
        "turnPrefixMessages": len(prep.turn_prefix_messages),
        "previousSummary": prep.previous_summary,
        "readFiles": read_files,
        "modifiedFiles": modified_files,
    }

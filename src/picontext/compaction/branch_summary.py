"""Branch summaries: what the user leaves behind when navigating to another point of the tree.

Mirrors Pi branch-summarization.ts (spec 02 §8) with one deliberate difference: the abandoned
entries are read through the **edited projection** of the old branch, so content that a
`context_edit` omitted or replaced (a redaction, a mask, a failed attempt) never reaches the
summarizer. Pi reads the raw entries and leaks it (docs/divergences.md). System messages are
not counted against the budget either, since serialization drops them.

    collect_entries_for_branch_summary(manager, old_leaf_id, target_id) -> (entries, ancestor)
    prepare_branch_entries(entries, edits, budget)    -> BranchPreparation (messages, file ops, tokens)
    generate_branch_summary(entries, completion, ...) -> BranchSummaryResult   (raises on failure)
    navigate_with_summary(manager, target_id, completion, ...) -> new leaf entry id
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from picontext.compaction import prompts
from picontext.compaction.completion import Completion, CompletionOptions
from picontext.compaction.file_ops import (
    FileOperations,
    compute_file_lists,
    extract_file_ops_from_message,
    format_file_operations,
    seed_from_details,
)
from picontext.compaction.serialize import serialize_messages
from picontext.compaction.summarize import reply_text
from picontext.compaction.tokens import estimate_tokens
from picontext.errors import CompactionError
from picontext.session.projection import collect_edits, field_of, project_entry

__all__ = [
    "BRANCH_MAX_TOKENS",
    "DEFAULT_WINDOW",
    "BranchPreparation",
    "BranchSummaryResult",
    "collect_entries_for_branch_summary",
    "generate_branch_summary",
    "navigate_with_summary",
    "prepare_branch_entries",
]

BRANCH_MAX_TOKENS = 4096
DEFAULT_WINDOW = 128_000
NO_CONTENT = "No content to summarize"


@dataclass(slots=True)
class BranchPreparation:
    messages: list[dict[str, Any]] = field(default_factory=list)
    file_ops: FileOperations = field(default_factory=FileOperations)
    total_tokens: int = 0


@dataclass(frozen=True, slots=True)
class BranchSummaryResult:
    summary: str
    usage: dict[str, Any] | None = None
    read_files: list[str] = field(default_factory=list)
    modified_files: list[str] = field(default_factory=list)


def collect_entries_for_branch_summary(
    manager: Any, old_leaf_id: str | None, target_id: str | None
) -> tuple[list[Any], str | None]:
    """Entries of the abandoned branch, oldest first, and the common ancestor (Pi, spec 02 §8.1)."""
    if old_leaf_id is None:
        return [], None
    old_ids = {field_of(e, "id") for e in manager.get_branch(old_leaf_id)}
    target_path = manager.get_branch(target_id) if target_id is not None else []
    ancestor = next((field_of(e, "id") for e in reversed(target_path) if field_of(e, "id") in old_ids), None)
    entries = []
    current = manager.get_entry(old_leaf_id)
    while current is not None and field_of(current, "id") != ancestor:
        entries.append(current)
        parent = field_of(current, "parentId")
        current = manager.get_entry(parent) if parent is not None else None
    entries.reverse()
    return entries, ancestor


def _branch_message(entry: Any, edit: Any) -> dict[str, Any] | None:
    kind = field_of(entry, "type")
    if kind == "compaction":
        return {"role": "compactionSummary", "summary": entry.get("summary"), "tokensBefore":
                entry.get("tokensBefore"), "timestamp": 0}
    if kind == "branch_summary":  # Pi: kept even with an empty summary
        return {"role": "branchSummary", "summary": entry.get("summary") or "", "fromId": entry.get("fromId"),
                "timestamp": 0}
    if kind not in ("message", "custom_message"):
        return None
    projected = project_entry(entry, edit)  # the edited view: omitted -> [], replaced -> new content
    if not projected:
        return None
    message = projected[0]
    if field_of(message, "role") in ("toolResult", "system"):
        return None
    return message


def prepare_branch_entries(
    entries: Sequence[Any], edits: Mapping[Hashable, Any] | None = None, token_budget: int = 0
) -> BranchPreparation:
    """Messages of the newest entries that fit `token_budget` (≤ 0: all), plus file ops (spec 02 §8.2).

    Summary entries (compaction, branch summary) are forced in while under 90% of the budget.
    """
    prep = BranchPreparation()
    edits = edits or {}
    for entry in entries:
        if field_of(entry, "type") == "branch_summary":
            seed_from_details(entry, prep.file_ops)
    picked: list[dict[str, Any]] = []
    for entry in reversed(entries):
        key = field_of(entry, "id")
        edit = edits.get(key) if isinstance(key, Hashable) else None
        if field_of(entry, "type") == "message" and field_of(field_of(entry, "message"), "role") == "toolResult":
            continue
        message = _branch_message(entry, edit)
        if message is None:
            continue
        extract_file_ops_from_message(message, prep.file_ops)
        tokens = estimate_tokens(message)
        if token_budget > 0 and prep.total_tokens + tokens > token_budget:
            if field_of(entry, "type") in ("compaction", "branch_summary") and (
                prep.total_tokens < 0.9 * token_budget
            ):
                picked.append(message)
                prep.total_tokens += tokens
            break
        picked.append(message)
        prep.total_tokens += tokens
    prep.messages = picked[::-1]
    return prep


async def generate_branch_summary(
    entries: Sequence[Any],
    completion: Completion,
    *,
    edits: Mapping[Hashable, Any] | None = None,
    reserve_tokens: int = 16384,
    instructions: str | None = None,
    replace_instructions: bool = False,
    signal: Any = None,
) -> BranchSummaryResult:
    """The branch summary text (preamble + model text + file lists); raises a typed failure."""
    window = int(getattr(completion, "context_window", 0) or 0) or DEFAULT_WINDOW
    budget = window - reserve_tokens
    if budget <= 0:  # Pi silently drops the budget here
        raise CompactionError(
            f"branchSummary.reserveTokens ({reserve_tokens}) leaves no room in the model's window ({window})"
        )
    prep = prepare_branch_entries(entries, edits, budget)
    if not prep.messages:
        return BranchSummaryResult(NO_CONTENT)
    model_max = int(getattr(completion, "max_output_tokens", 0) or 0)
    max_tokens = min(BRANCH_MAX_TOKENS, model_max) if model_max > 0 else BRANCH_MAX_TOKENS
    text = prompts.branch_request(serialize_messages(prep.messages), instructions, replace_instructions)
    request = [{"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 0}]
    reply = await completion(prompts.SYSTEM_PROMPT, request, max_tokens, CompletionOptions(signal=signal))
    body = reply_text(reply, "Branch summarization")
    read_files, modified_files = compute_file_lists(prep.file_ops)
    summary = prompts.BRANCH_SUMMARY_PREAMBLE + body + format_file_operations(read_files, modified_files)
    usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else None
    return BranchSummaryResult(summary, usage, read_files, modified_files)


def _new_leaf(target: Any) -> str | None:
    """Where the leaf goes when navigating to `target` (spec 02 §8.4)."""
    kind = field_of(target, "type")
    if kind == "custom_message" or (kind == "message" and field_of(field_of(target, "message"), "role") == "user"):
        return field_of(target, "parentId")
    return field_of(target, "id")


async def navigate_with_summary(
    manager: Any,
    target_id: str,
    completion: Completion,
    *,
    reserve_tokens: int = 16384,
    instructions: str | None = None,
    replace_instructions: bool = False,
    signal: Any = None,
) -> str | None:
    """Move to `target_id`, leaving a summary of the abandoned branch; returns the summary entry id.

    Returns None (and only moves the leaf) when the abandoned branch has nothing to summarize.
    A failed summary raises and leaves both the leaf and the file unchanged.
    """
    target = manager.get_entry(target_id)
    if target is None:
        from picontext.errors import EntryNotFound

        raise EntryNotFound(target_id)
    old_leaf = manager.get_leaf_id()
    entries, _ = collect_entries_for_branch_summary(manager, old_leaf, target_id)
    new_leaf = _new_leaf(target)
    if not entries:
        manager.branch(new_leaf) if new_leaf is not None else manager.reset_leaf()
        return None
    edits = collect_edits(manager.get_branch(old_leaf))  # the old branch's edits: summarize what it saw
    result = await generate_branch_summary(entries, completion, edits=edits, reserve_tokens=reserve_tokens,
                                           instructions=instructions, replace_instructions=replace_instructions,
                                           signal=signal)
    details = {"readFiles": result.read_files, "modifiedFiles": result.modified_files}
    return manager.branch_with_summary(new_leaf, result.summary, details, usage=result.usage)


"""Tree navigation with an optional branch summary (spec 03 §8, Pi `navigateTree`).

`await session.navigate_tree(target_id, summarize=True, label="tried X")` moves the session's
leaf to another point of the tree. With `summarize`, the branch being left is summarized into a
`branch_summary` entry, so the model keeps what was learned there. Hooks: `session_before_tree`
(cancel, supply the summary, override instructions/label) and `session_tree`.

Navigation is one of the session's exclusive operations: it is refused while a run, a
compaction or another navigation is active (clear `SessionBusyError` message).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from picontext.ai.event_stream import AbortSignal
from picontext.compaction.branch_summary import collect_entries_for_branch_summary, generate_branch_summary
from picontext.errors import EntryNotFound, SummaryAborted
from picontext.session.projection import collect_edits, field_of

if TYPE_CHECKING:
    from picontext.agent.host import NavigationHost

__all__ = ["NavigationResult", "navigate_tree"]


@dataclass(frozen=True, slots=True)
class NavigationResult:
    """`cancelled` (a hook cancelled, or the summary was aborted), `editor_text` (the text of a
    user message navigated to, to edit and resend), `summary_entry` (the branch summary entry)."""

    cancelled: bool
    aborted: bool = False
    editor_text: str | None = None
    summary_entry: dict[str, Any] | None = None


def _new_leaf_and_text(target: Any) -> tuple[str | None, str | None]:
    kind = field_of(target, "type")
    if kind == "custom_message":
        content = target.get("content")
        return target.get("parentId"), content if isinstance(content, str) else _text(content)
    if kind == "message" and field_of(target.get("message"), "role") == "user":
        return target.get("parentId"), _text(target["message"].get("content"))
    return target.get("id"), None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


async def navigate_tree(
    session: NavigationHost,
    target_id: str,
    *,
    summarize: bool = False,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    label: str | None = None,
    signal: AbortSignal,
) -> NavigationResult:
    """Move to `target_id` (see the module docstring). Errors leave the leaf unchanged."""
    manager = session.manager
    old_leaf = manager.get_leaf_id()
    if target_id == old_leaf:
        return NavigationResult(cancelled=False)
    target = manager.get_entry(target_id)
    if target is None:
        raise EntryNotFound(target_id)
    entries, ancestor = collect_entries_for_branch_summary(manager, old_leaf, target_id)
    hook_summary: dict[str, Any] | None = None
    if session.hooks.has("session_before_tree"):
        event = {
            "preparation": {
                "targetId": target_id, "oldLeafId": old_leaf, "commonAncestorId": ancestor,
                "entriesToSummarize": entries, "userWantsSummary": summarize,
                "customInstructions": custom_instructions, "replaceInstructions": replace_instructions,
                "label": label,
            },
            "signal": signal,
        }
        for result in await session.run_hook("session_before_tree", event):
            if not isinstance(result, dict):
                continue
            if result.get("cancel"):
                return NavigationResult(cancelled=True)
            if isinstance(result.get("summary"), dict):
                hook_summary = result["summary"]
            custom_instructions = result.get("customInstructions", custom_instructions)
            replace_instructions = result.get("replaceInstructions", replace_instructions)
            label = result.get("label", label)
    summary_text: str | None = None
    details: Any = None
    usage: Any = None
    from_hook = False
    if summarize and hook_summary is not None:
        summary_text, details, from_hook = str(hook_summary.get("summary", "")), hook_summary.get("details"), True
    elif summarize and entries:
        edits = collect_edits(manager.get_branch(old_leaf)) if old_leaf else {}
        try:
            result = await generate_branch_summary(
                entries, session.summary_completion(), edits=edits,
                reserve_tokens=session.settings.branch_summary().reserve_tokens,
                instructions=custom_instructions, replace_instructions=replace_instructions, signal=signal,
            )
        except SummaryAborted:
            return NavigationResult(cancelled=True, aborted=True)
        if signal.aborted:
            return NavigationResult(cancelled=True, aborted=True)
        summary_text, usage = result.summary, result.usage
        details = {"readFiles": result.read_files, "modifiedFiles": result.modified_files}
    elif summarize and not entries:
        summary_text = None
    new_leaf, editor_text = _new_leaf_and_text(target)
    summary_entry = None
    async with manager.aexclusive(strict=False):  # waiting for the lock yields to the loop
        if summary_text is not None:
            entry_id = manager.branch_with_summary(new_leaf, summary_text, details, from_hook=from_hook or None,
                                                   usage=usage)
            if label:
                manager.append_label_change(entry_id, label)
            summary_entry = manager.get_entry(entry_id)
        else:
            if new_leaf is None:
                manager.reset_leaf()
            else:
                manager.branch(new_leaf)
            if label:
                manager.append_label_change(target_id, label)
    payload: dict[str, Any] = {"newLeafId": manager.get_leaf_id(), "oldLeafId": old_leaf,
                               "summaryEntry": summary_entry}
    if summary_entry is not None:
        payload["fromExtension"] = from_hook
    await session.run_hook("session_tree", payload)
    return NavigationResult(cancelled=False, editor_text=editor_text, summary_entry=summary_entry)


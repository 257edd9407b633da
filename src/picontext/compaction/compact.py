"""Compacting a session: plan, write the summary (or masks), append under the file lock.

    compact_session(manager, strategy=..., completion=..., settings=...) -> CompactOutcome

Strategies (issue 3 §5b):

* `summary` (default, Pi's behaviour): `prepare_compaction`, a model-written summary, one
  `compaction` entry.
* `mask`: no model; old tool results become one-line placeholders through `context_edit`
  entries (`mask.py`).
* `mask-then-summary`: mask first, then summarize only if the context is still over the
  threshold (`should_compact`).

A failed summary is retried once and then replaced by a mechanical summary (`fallback.py`);
each failed attempt appends a `picontext.compaction-failed` custom entry (Pi ignores it). With
`fallback=False` the last failure is raised instead (a `SummarizationFailed` subclass) and the
failure records are all that was appended. An abort writes nothing but a resumable span's end. The append itself happens
under the session file's lock, after checking that nobody else wrote to the file while the
summary was being written; if somebody did, `SessionChanged` is raised and nothing is appended.
All of it goes through the manager's store (`SessionManager.aexclusive`): this module never
touches a session file.

Example::

    manager = SessionManager.open("s.jsonl")
    outcome = await compact_session(manager, strategy="summary", completion=StreamCompletion(model),
                                    settings=CompactionSettings())
    print(outcome.tokens_before, "->", outcome.tokens_after)
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from picontext.compaction.mask import apply_masks, plan_masks
from picontext.compaction.prepare import prepare_compaction, project_path
from picontext.compaction.resumable import end_span, find_pending_span, record_span, resume_preparation, span_details
from picontext.compaction.settings import CompactionSettings
from picontext.compaction.strategies import STRATEGIES, Strategy
from picontext.compaction.tokens import estimate_projected_context_tokens, estimate_tokens, should_compact
from picontext.errors import ConfigError, NothingToCompact, SessionChanged, StaleSessionError, SummaryAborted
from picontext.session.projection import field_of
from picontext.session.system_prompt import get_current_system_message

if TYPE_CHECKING:  # the summary path pulls in the model client (httpx); masking never needs it
    from picontext.compaction.completion import Completion
    from picontext.compaction.summarize import SummaryResult

__all__ = ["STRATEGIES", "CompactOutcome", "Strategy", "compact_session", "context_tokens", "estimated_tokens",
           "nothing_to_compact_reason", "nothing_to_mask_reason"]



@dataclass(slots=True)
class CompactOutcome:
    """What `compact_session` did: new entry ids, masks, the summary, and the chars/4 estimate of
    the context before and after (see `estimated_tokens`)."""

    strategy: str
    tokens_before: int
    tokens_after: int
    appended: list[str] = field(default_factory=list)
    masked: int = 0
    summary: SummaryResult | None = None
    note: str | None = None


def context_tokens(manager: Any) -> int:
    """The context size of the manager's current branch (usage anchor when fresh, else estimate).

    This is what the trigger (`should_compact`) and Pi's `tokensBefore` use.
    """
    return int(estimate_projected_context_tokens(manager.build_session_projection(), manager.branch_view())["tokens"])


def estimated_tokens(manager: Any) -> int:
    """chars/4 estimate of the branch's context (system messages replayed into one).

    Used for the before/after numbers of `CompactOutcome`: a usage anchor goes stale with the
    first appended edit or compaction, so comparing an anchored "before" with an estimated
    "after" would mix two measures.
    """
    messages = manager.build_session_projection().messages
    system = get_current_system_message(messages)
    tokens = estimate_tokens(system) if system is not None else 0
    return tokens + sum(estimate_tokens(m) for m in messages if field_of(m, "role") != "system")


@contextlib.asynccontextmanager
async def _append_guard(manager: Any) -> AsyncIterator[None]:
    """Hold the session's writer section (waiting without blocking the event loop); refuse when
    anybody appended since the manager read the session, so the plan still matches the file."""
    try:
        async with manager.aexclusive():
            yield
    except StaleSessionError:
        raise SessionChanged(
            f"{manager.get_session_file()} changed while the summary was being written (another process appended "
            "to it); nothing was appended. Run the compaction again."
        ) from None


def nothing_to_compact_reason(path: list[Any], settings: CompactionSettings) -> str:
    """Why `prepare_compaction` found nothing on `path`, in words (the real run and the dry run
    say the same). It starts with Pi's own message ("Already compacted", "Nothing to compact
    (session too small)") and adds the numbers behind it."""
    if path and field_of(path[-1], "type") == "compaction":
        return "Already compacted: the branch ends with a compaction"
    # What the cut point weighs: the chars/4 estimate of each message after the last summary.
    messages = [m for m in project_path(path).messages if field_of(m, "role") not in ("system", "compactionSummary")]
    if not messages:
        return "Nothing to compact (session too small): the branch has no messages to summarize"
    tokens = sum(estimate_tokens(m) for m in messages)
    since = " since the last compaction" if any(field_of(e, "type") == "compaction" for e in path) else ""
    # (More than keepRecentTokens can still be all kept: a cut never falls inside a message.)
    return (f"Nothing to compact (session too small): the messages{since} (~{tokens:,} tokens by chars/4) all "
            f"fall in the part a compaction keeps, the newest keepRecentTokens ({settings.keep_recent_tokens:,}) "
            "from the nearest point a cut is allowed; a smaller --keep-recent-tokens summarizes more")


def nothing_to_mask_reason(settings: CompactionSettings) -> str:
    return (f"Nothing to mask: no tool result is older than the keep window (keepRecentTokens "
            f"{settings.keep_recent_tokens:,}; a smaller --keep-recent-tokens masks more)")


def _plan(manager: Any, path: list[Any], settings: CompactionSettings, instructions: str | None,
          model_ref: str | None) -> tuple[Any, CompactionSettings, str | None, str | None]:
    """(preparation, settings, instructions, span id): a pending span when `resumable` finds one
    (resumed with its own settings and instructions), else a new plan (recorded when resumable)."""
    if settings.resumable:
        pending = find_pending_span(path)
        if pending is not None:
            prep = resume_preparation(path, pending)
            if prep is not None:
                return prep, pending.settings, pending.instructions, pending.entry_id
            end_span(manager, pending.entry_id, "invalid")
            path = manager.get_branch()
    prep = prepare_compaction(path, settings)
    if prep is None:
        raise NothingToCompact(nothing_to_compact_reason(path, settings))
    span_id = None
    if settings.resumable:
        span_id = record_span(manager, prep, settings, reason="manual", instructions=instructions, model=model_ref)
    return prep, settings, instructions, span_id


async def _summarize(manager: Any, completion: Completion | None, settings: CompactionSettings,
                     instructions: str | None, thinking_level: str | None, signal: Any,
                     verify: bool, fallback: bool) -> tuple[SummaryResult, str]:
    if completion is None:
        raise ConfigError("the summary strategy needs a model (--model provider/id)")
    from picontext.compaction.fallback import FAILURE_TYPE, AttemptFailure, failure_data, summarize_with_fallback
    from picontext.compaction.summary_model import summarizer_ref, with_summary_model

    model_ref = summarizer_ref(completion)
    prep, settings, instructions, span_id = _plan(manager, manager.get_branch(), settings, instructions, model_ref)

    async def record(failure: AttemptFailure) -> None:
        async with _append_guard(manager):
            manager.append_custom_entry(FAILURE_TYPE, failure_data(failure, prep, reason="manual", model=model_ref))

    try:
        result = await summarize_with_fallback(
            prep, completion, reserve_tokens=settings.reserve_tokens, instructions=instructions,
            thinking_level=thinking_level, signal=signal, verify=verify, timeout_ms=settings.summary_timeout_ms,
            fallback=fallback and settings.fallback_summary, on_failure=record)
    except BaseException as exc:
        if span_id is not None and isinstance(exc, Exception):
            end_span(manager, span_id, "aborted" if isinstance(exc, SummaryAborted) else "failed")
        raise
    details = with_summary_model(span_details(result.details, span_id), model_ref)
    async with _append_guard(manager):
        entry_id = manager.append_compaction(result.summary, result.first_kept_entry_id, result.tokens_before,
                                             details, usage=result.usage)
    return result, entry_id


async def compact_session(
    manager: Any,
    *,
    strategy: str = "summary",
    completion: Completion | None = None,
    settings: CompactionSettings | None = None,
    instructions: str | None = None,
    leaf_id: str | None = None,
    thinking_level: str | None = None,
    signal: Any = None,
    context_window: int | None = None,
    verify: bool = True,
    fallback: bool = True,
) -> CompactOutcome:
    """Compact the manager's current branch (or `leaf_id`'s) with `strategy`; see the module docstring.

    Raises `NothingToCompact` when there is nothing to summarize or mask, `ConfigError` when
    the summary strategy has no model, a `SummarizationFailed` subclass when the model's reply
    is unusable twice and `fallback` is off (or `compaction.fallbackSummary` is false), and
    `SessionChanged` when another writer got in first. In every one of those cases no compaction
    was appended (a failed summary leaves its `picontext.compaction-failed` records).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")
    settings = settings or CompactionSettings()
    if leaf_id is not None:
        manager.branch(leaf_id)
    before = estimated_tokens(manager)
    outcome = CompactOutcome(strategy, before, before)

    if strategy == "summary":
        outcome.summary, entry_id = await _summarize(manager, completion, settings, instructions, thinking_level,
                                                     signal, verify, fallback)
        outcome.appended.append(entry_id)
    else:
        edits = plan_masks(manager.build_session_projection(), settings.keep_recent_tokens)
        if edits:
            async with _append_guard(manager):
                outcome.appended += apply_masks(manager, edits)
            outcome.masked = len(edits)
        if strategy == "mask" and not edits:
            raise NothingToCompact(nothing_to_mask_reason(settings))
        if strategy == "mask-then-summary":
            window = context_window or int(getattr(completion, "context_window", 0) or 0)
            tokens = context_tokens(manager)
            if window and should_compact(tokens, window, settings):
                if completion is None:
                    outcome.note = "still over the compaction threshold after masking; a summary needs --model"
                else:
                    outcome.summary, entry_id = await _summarize(manager, completion, settings, instructions,
                                                                 thinking_level, signal, verify, fallback)
                    outcome.appended.append(entry_id)
            elif not edits:
                raise NothingToCompact("Nothing to compact: no tool result to mask and the context is under the "
                                       "threshold")
    outcome.tokens_after = estimated_tokens(manager)
    return outcome

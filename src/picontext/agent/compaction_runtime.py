"""Compaction inside a live agent session: when to compact, overflow recovery, manual compaction.

Spec 03 §2-§5 (Pi `_checkCompaction`, `_runAutoCompaction`, `compact`, `_omitRecoveryAttempt`).
`CompactionRuntime` belongs to one `AgentSession`; the session calls it at the three check
times:

* check A, between turns of a run: `check_threshold()` (threshold only, projected estimate);
* check B, after a low-level run: `check(message, skip_aborted=True, tool_results)`;
* check C, before a new prompt: `check(message, skip_aborted=False, pre_prompt=True)`;
* on request: `compact_manual(instructions)`.

What we do beyond the reference (docs/divergences.md, "Agent runtime"):

* staleness (gate G3) is decided by journal order, not by comparing wall-clock timestamps;
* an unknown window (0) disables threshold compaction everywhere (overflow recovery still works);
* anti-thrash: before an automatic compaction the size after it is predicted; one that cannot
  get under the threshold is re-planned with a smaller kept tail, and skipped (one-line
  `compaction_skipped` event) when even that cannot help; after an ineffective compaction the
  threshold check backs off until the context has grown by a margin;
* the pre-prompt check never announces a retry (it omits a failed attempt and compacts, no
  `willRetry`), and does not report the fuse failure a second time;
* the summary entry handed to `session_compact` is the appended one (by id, not by text);
* a loop of automatic compactions that free nothing is stopped with one message
  (`compaction_loop.py`, `compaction.loopGuard`);
* opt-in, off by default: summaries written in the background (`background_compaction.py`,
  `compaction.backgroundTokens`), spans written down before the summary request and resumed
  after a crash (`compaction.resumable`), a summarizer model of its own (`compaction.model`),
  calibrated token estimates for the trigger (`compaction.calibrateTokens`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine
from typing import Any, Literal

from picontext.agent.compaction_loop import CompactionLoopGuard
from picontext.agent.events import CompactionReason
from picontext.agent.hooks import call_handler, handler_name
from picontext.agent.host import BackgroundHost, BackgroundSummaries, CompactionHost, CompactionPlan
from picontext.ai.event_stream import AbortSignal, aborts_with, wait_unless_aborted
from picontext.ai.overflow import is_context_overflow, is_recoverable_length, reports_usage
from picontext.ai.retrying import RetryCallbacks
from picontext.compaction.calibration import calibrated_projected_tokens, dense_tokens, learn_ratios, samples
from picontext.compaction.compact import estimated_tokens
from picontext.compaction.completion import Completion, StreamCompletion
from picontext.compaction.fallback import (
    FAILURE_TYPE,
    AttemptFailure,
    OnFailure,
    failure_data,
    fallback_notice,
    summarize_with_fallback,
)
from picontext.compaction.mask import MaskEdit, apply_masks, plan_kept_masks
from picontext.compaction.prepare import CompactionPreparation, prepare_compaction
from picontext.compaction.prompt_cache import CachedPrefix, plan_cached_prefix
from picontext.compaction.resumable import end_span, find_pending_span, record_span, resume_preparation, span_details
from picontext.compaction.settings import CompactionSettings, model_key
from picontext.compaction.summarize import (
    ProgressCallback,
    SummaryProgress,
    SummaryResult,
    history_max_tokens,
)
from picontext.compaction.summary_model import summarizer_ref, summary_completion, with_summary_model
from picontext.compaction.tokens import (
    calculate_context_tokens,
    estimate_context_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
    get_assistant_usage,
    should_compact,
)
from picontext.errors import CompactionError, NothingToCompact
from picontext.session.projection import SessionProjection, entry_time_ms, field_of
from picontext.session.system_prompt import get_current_system_message

__all__ = [
    "OVERFLOW_RECOVERY_FAILED",
    "TRUNCATED_RECOVERY_FAILED",
    "CompactionCancelled",
    "CompactionRuntime",
]

OVERFLOW_RECOVERY_FAILED = (
    "Context overflow recovery failed after one compact-and-retry attempt. "
    "Try reducing context or switching to a larger-context model."
)
TRUNCATED_RECOVERY_FAILED = "Truncated response recovery failed after one compact-and-retry attempt."


class CompactionCancelled(CompactionError):
    """The compaction was aborted (user abort, `abort_compaction()`) or cancelled by a hook."""

    def __init__(self, message: str = "Compaction cancelled", *, by_extension: bool = False) -> None:
        super().__init__(message)
        self.by_extension = by_extension


class CompactionRuntime:
    """Compaction state of one session: the one-shot overflow fuse, the active controller, the
    anti-thrash back-off and agent-requested compactions.

    Invariant: at most one compaction runs at a time (`controller` is set while it runs).

    `background` builds the background summaries (`BackgroundCompaction`) over this runtime, seen
    as its `BackgroundHost`; the runtime sees them only as `BackgroundSummaries` (agent/host.py).
    Every write it makes from async code goes through the store's non-blocking writer section.
    """

    def __init__(self, session: CompactionHost,
                 background: Callable[[BackgroundHost], BackgroundSummaries]) -> None:
        self.s = session
        self.fuse = False
        """Pi `_overflowRecoveryAttempted`: one compact-and-retry per user message."""
        self.controller: AbortSignal | None = None
        self.reason: CompactionReason | None = None
        self.backoff_until: int | None = None
        """After an ineffective compaction: skip threshold compaction until the context exceeds this."""
        self.requested: str | None = None
        """Instructions of a compaction the agent asked for (request_compaction tool); "" = none given."""
        self._skipped_at: int | None = None
        self.background = background(self)
        self.loop_guard = CompactionLoopGuard()
        self._resume_checked = False

    # -- facts -------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.controller is not None

    def settings(self) -> CompactionSettings:
        return self.s.settings.compaction(self.s.model)

    def window(self) -> int:
        return int(self.s.model.get("contextWindow") or 0)

    def threshold(self) -> int | None:
        """Tokens above which a compaction is due; None when the window is unknown."""
        window = self.window()
        if window <= 0:
            return None
        return window - self.settings().reserve_tokens

    def projected_tokens(self) -> int:
        return int(self.projected_estimate()["tokens"])

    def projected_estimate(self) -> Any:
        """Pi estimateProjectedContextTokens of the session now (`lastUsageIndex` None: no usage anchor)."""
        manager = self.s.manager
        projection, branch = manager.build_session_projection(), manager.branch_view()
        if self.settings().calibrate_tokens:  # ours, opt-in: the trailing part corrected per model
            return calibrated_projected_tokens(projection, branch, model_key(self.s.model))
        return estimate_projected_context_tokens(projection, branch)

    # Branch questions are answered by the session's index and live projection: nothing on the
    # request path walks or parses the whole branch.

    def _branch_position(self, entry_id: str | None) -> int | None:
        return self.s.manager.branch_position(entry_id)

    def _latest_compaction_position(self) -> int | None:
        return self.s.manager.latest_compaction_position()

    def _is_stale(self, message: Any) -> bool:
        """Gate G3 by journal order: the message's entry comes before the latest compaction."""
        compaction_at = self._latest_compaction_position()
        if compaction_at is None:
            return False
        position = self._branch_position(self.s.entry_id_of(message))
        if position is None:  # not persisted (or not on this branch): fall back to time
            compaction = self.s.manager.branch_view()[compaction_at]
            return bool((message.get("timestamp") or 0) <= entry_time_ms(compaction))
        return position < compaction_at

    def _is_projected(self, entry_id: str | None) -> bool:
        if entry_id is None:
            return True
        return self.s.manager.contributes_to_context(entry_id)

    async def emit(self, event: Any) -> None:
        await self.s.emit(event)

    def leaf_id(self) -> str | None:
        return self.s.manager.get_leaf_id()

    def branch(self) -> list[Any]:
        return self.s.manager.get_branch()

    def summary_budget(self) -> int:
        return history_max_tokens(self.settings().reserve_tokens, int(self.s.model.get("maxTokens") or 0))

    # -- writes (from async code: in the store's writer section, whose wait yields to the loop) ----

    async def record_span(self, plan: CompactionPlan, *, reason: CompactionReason, model: str | None,
                          instructions: str | None = None) -> str:
        async with self.s.manager.aexclusive(strict=False):
            return record_span(self.s.manager, plan.preparation, plan.settings, reason=reason,
                               instructions=instructions, model=model)

    async def end_span(self, span_id: str, outcome: str) -> None:
        async with self.s.manager.aexclusive(strict=False):
            end_span(self.s.manager, span_id, outcome)

    async def record_failure(self, failure: AttemptFailure, prep: CompactionPreparation, reason: str,
                             model_ref: str | None) -> None:
        """Ours: the durable record of one failed summary attempt (a custom entry Pi ignores)."""
        async with self.s.manager.aexclusive(strict=False):
            self.s.manager.append_custom_entry(FAILURE_TYPE, failure_data(failure, prep, reason=reason,
                                                                          model=model_ref))

    async def append_compaction(self, summary: str, first_kept: str, tokens_before: int, details: Any, usage: Any,
                                *, masks: list[MaskEdit] | None = None, from_hook: bool = False) -> str:
        """The compaction entry (after the context edits of `masks`), in one writer section."""
        manager = self.s.manager
        async with manager.aexclusive(strict=False):
            if masks:
                apply_masks(manager, masks)
            return manager.append_compaction(summary, first_kept, tokens_before, details, from_hook=from_hook,
                                             usage=usage)

    # -- check A -------------------------------------------------------------------------------

    async def check_threshold(self, signal: AbortSignal | None = None) -> bool:
        """Between turns (and before a retry): compact when the projected context is over the
        threshold, or when the agent asked for it. Returns True when a compaction ran."""
        if signal is not None and signal.aborted:
            return False
        if self.requested is not None:
            instructions, self.requested = self.requested, None
            return await self.run_auto("manual", False, signal=signal, instructions=instructions or None)
        threshold = self.threshold()
        settings = self.settings()
        if threshold is None or not settings.enabled:
            return False
        if await self._resume_pending(signal):
            return True
        tokens = self.projected_tokens()
        return await self._due(tokens, settings, signal)

    async def _due(self, tokens: int, settings: CompactionSettings, signal: AbortSignal | None) -> bool:
        """The threshold decision at a turn boundary, with the background summary first (ours)."""
        if await self.background.on_boundary(tokens):
            return True
        if not should_compact(tokens, self.window(), settings):
            return False
        taken = await self.background.take_over(signal)
        if taken:
            return True
        if signal is not None and signal.aborted:
            return False
        return await self.run_auto("threshold", False, signal=signal, tokens=tokens)

    async def _resume_pending(self, signal: AbortSignal | None) -> bool:
        """Once per session (ours, compaction.resumable): a span recorded before a crash is
        summarized again and applied (in the background when that is on)."""
        if self._resume_checked:
            return False
        self._resume_checked = True
        settings = self.settings()
        if not settings.resumable or self.running or self.background.active:
            return False
        # The scan stops at the newest compaction: through the lazy view it parses only the
        # entries after it; the whole branch is materialised only when there is a span to resume.
        pending = find_pending_span(self.s.manager.branch_view())
        if pending is None:
            return False
        prep = resume_preparation(self.s.manager.get_branch(), pending)
        if prep is None:
            await self.end_span(pending.entry_id, "invalid")
            return False
        plan = CompactionPlan(prep, pending.settings, self._predict_after(prep), pending.entry_id)
        if self.background.enabled:
            await self.background.start(int(prep.tokens_before), plan, pending.entry_id)
            return False
        try:
            await self._compact("threshold", False, plan, pending.instructions, signal)
        except Exception:
            return False
        return True

    # -- checks B and C ------------------------------------------------------------------------

    async def check(
        self,
        message: Any,
        *,
        skip_aborted: bool = True,
        tool_results: list[Any] | None = None,
        pre_prompt: bool = False,
        signal: AbortSignal | None = None,
    ) -> bool:
        """Pi `_checkCompaction`: overflow recovery or threshold compaction for `message`.

        Returns True when the caller should continue the run (a retry after recovery, or queued
        messages after a successful compaction).
        """
        settings = self.settings()
        if not settings.enabled:  # G1 (overflow too)
            return False
        if skip_aborted and message.get("stopReason") == "aborted":  # G2
            return False
        if self._is_stale(message):  # G3, by journal order
            return False
        model = self.s.model
        window = self.window()
        same_model = message.get("provider") == model.get("provider") and message.get("model") == model.get("id")
        entry_id = self.s.entry_id_of(message)
        projected = self._is_projected(entry_id)
        edit_after, retained = self._after_facts(entry_id)
        explicit = message.get("stopReason") == "error" and is_context_overflow(message, None)
        usage_matches = projected and not edit_after
        overflow = same_model and (
            (explicit and retained) or (usage_matches and is_context_overflow(message, window))
        )
        recoverable = (same_model and projected and reports_usage(message)  # ours: no usage, no evidence
                       and is_recoverable_length(message, int(model.get("maxTokens") or 0)))
        if overflow or recoverable:
            await self.background.cancel("overflow recovery compacts the usual way")
            return await self._overflow(message, overflow, tool_results or [], pre_prompt, signal)
        if await self._resume_pending(signal):
            return True
        return await self._threshold_after(message, settings, signal)

    def _entries_after(self, entry_id: str | None) -> list[Any]:
        return list(self.s.manager.entries_after(entry_id))

    def _after_facts(self, entry_id: str | None) -> tuple[bool, bool]:
        """Whether a context edit follows the message's entry, and whether an explicit overflow
        of it is retained. A function of its own: the entries after it (the newest tool output
        among them) are not held by `check` through the compaction it may start."""
        after = self._entries_after(entry_id)
        edit_after = any(field_of(e, "type") == "context_edit" for e in after)
        return edit_after, entry_id is None or self._retained_for_explicit(entry_id, after)

    @staticmethod
    def _retained_for_explicit(entry_id: str, after: list[Any]) -> bool:
        if any(field_of(e, "type") == "compaction" for e in after):
            return False
        edits = [e for e in after if field_of(e, "type") == "context_edit" and e.get("targetId") == entry_id]
        return not edits or edits[-1].get("replacement") is not None

    async def _overflow(
        self, message: Any, overflow: bool, tool_results: list[Any], pre_prompt: bool, signal: AbortSignal | None
    ) -> bool:
        if message.get("stopReason") == "stop":  # silent overflow: keep the answer, no retry
            if self.loop_guard.is_stopped(self.threshold()):
                return False  # ours: a compaction loop was reported; compacting again frees nothing
            return await self.run_auto("overflow", False, signal=signal)
        if self.fuse:
            if pre_prompt:  # already reported after the run; the new prompt resets the fuse
                return False
            error = OVERFLOW_RECOVERY_FAILED if overflow else TRUNCATED_RECOVERY_FAILED
            await self.s.emit(
                {"type": "compaction_end", "reason": "overflow", "aborted": False, "willRetry": False,
                 "errorMessage": error}
            )
            await self._hook_failed("overflow", error, aborted=False, from_extension=False)
            return False
        if pre_prompt:  # ours: drop the failed attempt and compact, never announce a retry
            await self.s.omit([message])
            await self.run_auto("overflow", False, signal=signal)
            return False
        self.fuse = True
        await self.s.omit([message, *tool_results])
        return await self.run_auto("overflow", True, signal=signal)

    async def _threshold_after(self, message: Any, settings: CompactionSettings, signal: AbortSignal | None) -> bool:
        window = self.window()
        if window <= 0:  # ours: an unknown window never triggers threshold compaction
            return False
        manager = self.s.manager
        usage = message.get("usage")
        direct = calculate_context_tokens(usage) if isinstance(usage, dict) else 0
        direct = 0 if direct != direct else int(direct)
        # The projection (a copy of the context's lists) is built only when an estimate needs it.
        if manager.context_has_edits():
            tokens = self.projected_tokens()
        elif message.get("stopReason") == "error" or direct == 0:
            estimate = self._estimate_unanchored(settings)
            if estimate is None:
                return False
            tokens = estimate
        else:
            tokens = direct
        return await self._due(tokens, settings, signal)

    def _estimate_unanchored(self, settings: CompactionSettings) -> int | None:
        """The context's estimate when the message reports no usage, or None when its usage
        anchor is stale. Not inline in the coroutine: the projection it reads would be held
        through the compaction that follows (the newest tool output with it)."""
        projection = self.s.manager.build_session_projection()
        estimate = estimate_context_tokens(projection.messages)
        index = estimate["lastUsageIndex"]
        if index is not None and self._is_stale(projection.messages[index]):
            return None
        tokens = int(estimate["tokens"])
        if settings.calibrate_tokens:
            ratios = learn_ratios(samples(projection.messages), model_key(self.s.model))
            start = 0 if index is None else index + 1
            dense = sum(dense_tokens(m) for m in projection.messages[start:])
            tokens = int(estimate["usageTokens"]) + ratios.apply(int(estimate["trailingTokens"]), dense)
        return tokens

    # -- the compaction itself -------------------------------------------------------------------

    def completion(self, source: str = "compaction") -> Completion:
        """The summarizer: the session's `summarizer`, else `compaction.model` (ours), else its
        model over the session's client, each retry wait announced as `summarization_retry_*` events."""
        if self.s.summarizer is not None:
            return self.s.summarizer
        options = self.s.request_options()
        ref = self.settings().model
        if ref is not None and ref != model_key(self.s.model):
            same_provider = ref.split("/", 1)[0] == self.s.model.get("provider")
            return summary_completion(ref, api_key=options.api_key if same_provider else None,
                                      retry=self.s.retry_policy, stream_fn=self.s.stream_fn,
                                      client=options.client, callbacks=self._retry_callbacks(source))
        return StreamCompletion(
            self.s.model, api_key=options.api_key, retry=self.s.retry_policy, stream_fn=self.s.stream_fn,
            client=options.client, callbacks=self._retry_callbacks(source),
        )

    def prompt_cache(self, plan: CompactionPlan, completion: Completion) -> CachedPrefix | str | None:
        """Ours (compaction.reusePromptCache): the session's last request to send the summary
        over, or why not; None when the setting is off (Pi's request, byte for byte)."""
        if not plan.settings.reuse_prompt_cache:
            return None
        if self.s.summarizer is not None or not isinstance(completion, StreamCompletion):
            return "the summarizer is not a provider model"
        model = completion.model
        if model_key(model) != model_key(self.s.model):
            return "another model writes the summaries (compaction.model); a prompt cache belongs to one model"
        window = int(model.get("contextWindow") or 0)
        budget = history_max_tokens(plan.settings.reserve_tokens, int(model.get("maxTokens") or 0))
        return plan_cached_prefix(plan.preparation, self.s.last_request, window=window, max_tokens=budget)

    def _retry_callbacks(self, source: str) -> RetryCallbacks:
        emit = self.s.emit
        return RetryCallbacks(
            on_retry_scheduled=lambda attempt, most, delay, error: emit({
                "type": "summarization_retry_scheduled", "source": source, "attempt": attempt,
                "maxAttempts": most, "delayMs": delay, "errorMessage": error,
            }),
            on_retry_attempt_start=lambda: emit({"type": "summarization_retry_attempt_start", "source": source}),
            on_retry_finished=lambda ok, attempt, error: emit({
                "type": "summarization_retry_finished", "source": source, "success": ok, "attempt": attempt,
                **({"finalError": error} if error else {}),
            }),
        )

    def _predict_after(self, prep: CompactionPreparation) -> int:
        """Size after compacting with `prep`, not counting the summary: system + kept messages."""
        projection = prep.projection
        system = get_current_system_message(projection.messages)
        tokens = estimate_tokens(system) if system is not None else 0
        for item in projection.entries[prep.first_kept_entry_index :]:
            tokens += sum(estimate_tokens(m) for m in item.messages if field_of(m, "role") != "system")
        return tokens

    def plan(self, reason: CompactionReason) -> tuple[CompactionPlan | None, str | None]:
        """The preparation to use, or None and one line saying why nothing can be compacted."""
        manager = self.s.manager
        branch = manager.get_branch()
        settings = self.settings()
        prep = prepare_compaction(branch, settings, projection=manager.build_session_projection())
        threshold = self.threshold()
        if threshold is None:
            if prep is not None:
                return CompactionPlan(prep, settings, self._predict_after(prep)), None
            return None, self._nothing_reason(branch)
        if prep is not None:
            predicted = self._predict_after(prep)
            if predicted < threshold:
                return CompactionPlan(prep, settings, predicted), None
        # Ours: re-plan with a smaller kept tail (small windows, oversized recent content).
        candidates = [(prep, settings)] if prep is not None else []
        if threshold > 0:
            for keep in (threshold // 2, threshold // 4):
                if keep <= 0 or keep >= settings.keep_recent_tokens:
                    continue
                smaller = dataclasses.replace(settings, keep_recent_tokens=keep)
                retry = prepare_compaction(branch, smaller, projection=manager.build_session_projection())
                if retry is not None:
                    predicted = self._predict_after(retry)
                    if predicted < threshold:
                        return CompactionPlan(retry, smaller, predicted), None
                    candidates.append((retry, smaller))
        # Ours: no cut leaves enough out (a huge tool output in the newest turn, with no cut
        # point after it): shorten the kept part's largest tool results as well.
        target = max(1, min(settings.keep_recent_tokens, threshold // 2))
        for candidate, used in candidates:
            predicted = self._predict_after(candidate)
            masks = plan_kept_masks(candidate.projection, candidate.first_kept_entry_index, predicted - target)
            if masks:
                saved = sum(m.tokens_saved for m in masks)
                return CompactionPlan(candidate, used, predicted - saved, masks=masks), None
        if prep is not None and reason in ("overflow", "manual"):
            return CompactionPlan(prep, settings, self._predict_after(prep)), None
        if prep is None:
            return None, self._nothing_reason(branch)
        predicted = self._predict_after(prep)
        return None, (
            f"the most recent context alone (~{predicted} tokens) is above the compaction threshold ({threshold}); "
            "a summary cannot free enough. Use a model with a larger context window or start a new session."
        )

    @staticmethod
    def _nothing_reason(branch: list[Any]) -> str:
        if branch and field_of(branch[-1], "type") == "compaction":
            return "Already compacted"
        return "Nothing to compact (session too small)"

    async def run_auto(
        self,
        reason: CompactionReason,
        will_retry: bool,
        *,
        signal: AbortSignal | None = None,
        tokens: int | None = None,
        instructions: str | None = None,
    ) -> bool:
        """Pi `_runAutoCompaction`. True = continue the run (retry, or queued messages)."""
        if self.running:
            return False
        if reason == "threshold" and self.loop_guard.is_stopped(self.threshold()):
            return False  # said so once when the loop was detected
        if reason == "threshold" and tokens is not None and self.backoff_until is not None:
            if tokens <= self.backoff_until:
                await self._skip(reason, tokens, (
                    f"Auto-compaction paused: the last one freed too little; it resumes above ~{self.backoff_until} "
                    "tokens."
                ))
                return False
        plan, why = self.plan(reason)
        if plan is None:
            if reason == "threshold" and tokens is not None:
                await self._skip(reason, tokens, f"Auto-compaction skipped: {why}")
            elif reason != "threshold":  # ours: recovery always ends with a paired start/end
                await self._start(reason)
                await self._fail(reason, NothingToCompact(why or "Nothing to compact"), aborted=False,
                                 from_extension=False)
            return False
        try:
            await self._compact(reason, will_retry, plan, instructions, signal)
        except Exception:
            return False
        if will_retry:
            return True
        return self.s.has_queued_messages()

    async def _skip(self, reason: CompactionReason, tokens: int, message: str) -> None:
        if self._skipped_at is not None and tokens <= self._skipped_at:
            return  # said it already for this size
        self._skipped_at = tokens
        await self.s.emit({"type": "compaction_skipped", "reason": reason, "message": message, "tokens": tokens})

    async def compact_manual(self, instructions: str | None = None) -> dict[str, Any]:
        """Pi `compact()` after the run was stopped: the result, or raises the original error."""
        await self.background.cancel("a manual compaction replaces it")
        self.loop_guard.reset()
        plan, why = self.plan("manual")
        if plan is None:
            await self._start("manual")
            error: Exception = NothingToCompact(why or "Nothing to compact (session too small)")
            await self._fail("manual", error, aborted=False, from_extension=False)
            raise error
        return await self._compact("manual", False, plan, instructions, None)

    async def _start(self, reason: CompactionReason) -> AbortSignal:
        controller = AbortSignal()
        self.controller, self.reason = controller, reason
        await self.s.emit({"type": "compaction_start", "reason": reason})
        return controller

    async def _compact(
        self,
        reason: CompactionReason,
        will_retry: bool,
        plan: CompactionPlan,
        instructions: str | None,
        parent: AbortSignal | None,
    ) -> dict[str, Any]:
        controller = await self._start(reason)
        with aborts_with(parent, controller):  # the run's abort stops the compaction, and only while it runs
            return await self._compact_under(reason, will_retry, plan, instructions, controller)

    async def _compact_under(
        self, reason: CompactionReason, will_retry: bool, plan: CompactionPlan, instructions: str | None,
        controller: AbortSignal,
    ) -> dict[str, Any]:
        prep = plan.preparation
        from_extension = False
        span_id = plan.span_id
        try:
            if controller.aborted:
                raise CompactionCancelled()
            supplied, cancelled = await self._hook_before(prep, instructions, reason, will_retry, controller)
            if cancelled:
                raise CompactionCancelled(by_extension=True)
            if controller.aborted:
                raise CompactionCancelled()
            if supplied is not None:
                from_extension = True
                summary = str(supplied["summary"])
                first_kept = supplied.get("firstKeptEntryId", prep.first_kept_entry_id)
                tokens_before = int(supplied.get("tokensBefore", prep.tokens_before))
                details, usage = supplied.get("details"), supplied.get("usage")
                if span_id is not None:  # a hook wrote it: the recorded span is not what was appended
                    await self.end_span(span_id, "replaced")
                    span_id = None
            else:
                completion = self.completion()
                if span_id is None and plan.settings.resumable:
                    span_id = await self.record_span(plan, reason=reason, instructions=instructions,
                                                     model=summarizer_ref(completion))
                if plan.masks:
                    self._release_kept(plan)
                    prep = plan.preparation
                with self.background.timing():  # for backgroundTokens "auto"
                    result = await self._summarize(plan, instructions, controller, completion, reason)
                summary, first_kept, tokens_before = result.summary, result.first_kept_entry_id, result.tokens_before
                usage = result.usage
                details = with_summary_model(span_details(result.details, span_id), summarizer_ref(completion))
            if controller.aborted:
                raise CompactionCancelled()
            entry_id = await self.append_compaction(summary, first_kept, tokens_before, details, usage,
                                                    masks=plan.masks, from_hook=from_extension)
        except Exception as exc:
            aborted = isinstance(exc, CompactionCancelled) or controller.aborted
            by_ext = isinstance(exc, CompactionCancelled) and exc.by_extension
            self.controller = self.reason = None
            if span_id is not None:
                await self.end_span(span_id, "aborted" if aborted else "failed")
            await self._fail(reason, exc, aborted=aborted, from_extension=from_extension or by_ext)
            if isinstance(exc, CompactionCancelled) or not aborted:
                raise
            raise CompactionCancelled() from exc
        return await self.announce(reason, will_retry, entry_id, summary, first_kept, tokens_before, details, usage,
                                   from_extension=from_extension)

    def _release_kept(self, plan: CompactionPlan) -> None:
        """Ours: the kept tool outputs that `plan.masks` shortens are held by nobody while the
        summaries are written: the preparation keeps only the projection's summarized part (what
        the summary path reads), and the session lets go of their values and of its projection,
        rebuilt after the compaction from the masked heads (`SessionManager.release_contents`).
        A session whose newest output is megabytes then holds it once less through the chunk
        round, its peak (docs/compaction.md, "Round six"); a failed compaction reads it back."""
        prep = plan.preparation
        summarized = list(prep.projection.entries[: prep.first_kept_entry_index])
        projection = SessionProjection(summarized, [m for item in summarized for m in item.messages],
                                       prep.projection.thinking_level, prep.projection.model)
        plan.preparation = dataclasses.replace(prep, projection=projection)
        self.s.manager.release_contents([mask.target_id for mask in plan.masks])

    async def announce(
        self, reason: CompactionReason, will_retry: bool, entry_id: str, summary: str, first_kept: str,
        tokens_before: int, details: Any, usage: Any, *, from_extension: bool, extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """After a compaction entry was appended: back-off and loop bookkeeping, the
        `session_compact` hook and the `compaction_end` event; returns the CompactionResult."""
        after = estimated_tokens(self.s.manager)
        self._after_success(reason, after)
        self.background.compacted()
        entry = self.s.manager.get_entry(entry_id)
        await self.s.run_hook("session_compact", {
            "compactionEntry": entry, "fromExtension": from_extension, "reason": reason, "willRetry": will_retry,
        })
        result_json: dict[str, Any] = {
            "summary": summary, "firstKeptEntryId": first_kept, "tokensBefore": tokens_before,
            "estimatedTokensAfter": after,
        }
        if usage is not None:
            result_json["usage"] = usage
        if details is not None:
            result_json["details"] = details
        self.controller = self.reason = None  # cleared before announcing (listeners may prompt)
        notice = fallback_notice(details)  # ours: the summary failed at first; say how it ended, once
        await self.s.emit({
            "type": "compaction_end", "reason": reason, "result": result_json, "aborted": False,
            "willRetry": will_retry, "tokensBefore": tokens_before, "tokensAfter": after,
            **({"notice": notice} if notice is not None else {}), **(extra or {}),
        })
        await self._check_loop(reason, tokens_before, after)
        return result_json

    async def _check_loop(self, reason: CompactionReason, before: int, after: int) -> None:
        """Ours (compaction.loopGuard): several automatic compactions within a few turns that free
        nothing stop automatic compaction with one clear message."""
        threshold = self.threshold()
        if reason == "manual" or threshold is None or not self.settings().loop_guard:
            return
        turn = self.s.manager.assistant_message_count()  # from the heads: a released output stays in the file
        message = self.loop_guard.record(turn, before, after, threshold)
        if message is not None:
            await self.s.emit({"type": "compaction_skipped", "reason": reason, "message": message, "tokens": after})

    def _after_success(self, reason: CompactionReason, after: int) -> None:
        threshold = self.threshold()
        self._skipped_at = None
        if threshold is None or after <= threshold * 0.9:
            self.backoff_until = None
            return
        margin = max(self.settings().keep_recent_tokens // 2, self.window() // 10, 1)
        self.backoff_until = after + margin

    def progress(self, reason: CompactionReason, *, background: bool) -> ProgressCallback:
        """Ours: each finished request of a summary written in several (a span over the
        summarizer's window) as a `compaction_progress` event."""

        async def report(progress: SummaryProgress) -> None:
            await self.s.emit({
                "type": "compaction_progress", "reason": reason, "background": background, "part": progress.part,
                "stage": progress.stage, "done": progress.done, "total": progress.total,
                "elapsedMs": int(progress.elapsed * 1000),
            })

        return report

    def summary_request(self, plan: CompactionPlan, completion: Completion, signal: AbortSignal, *,
                        reason: CompactionReason, background: bool, on_failure: OnFailure,
                        instructions: str | None = None) -> Coroutine[Any, Any, SummaryResult]:
        """The summary of `plan`. A background one is a single checked attempt (no retry, no
        mechanical summary): when it fails, the blocking path retries and falls back."""
        settings = plan.settings
        return summarize_with_fallback(
            plan.preparation, completion, reserve_tokens=settings.reserve_tokens, instructions=instructions,
            thinking_level=self.s.thinking_level, signal=signal, prompt_cache=self.prompt_cache(plan, completion),
            timeout_ms=settings.summary_timeout_ms, retry=not background,
            fallback=settings.fallback_summary and not background, on_failure=on_failure,
            on_progress=self.progress(reason, background=background),
        )

    async def _summarize(self, plan: CompactionPlan, instructions: str | None, controller: AbortSignal,
                         completion: Completion, reason: CompactionReason) -> SummaryResult:
        model_ref = summarizer_ref(completion)

        async def recorded(failure: AttemptFailure) -> None:
            await self.record_failure(failure, plan.preparation, reason, model_ref)

        task = asyncio.ensure_future(self.summary_request(
            plan, completion, controller, reason=reason, background=False, on_failure=recorded,
            instructions=instructions,
        ))
        if not await wait_unless_aborted(task, controller):  # race every await with the signal (spec 03 §12 item 18)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise CompactionCancelled()
        return task.result()

    async def _hook_before(
        self, prep: CompactionPreparation, instructions: str | None, reason: CompactionReason, will_retry: bool,
        signal: AbortSignal,
    ) -> tuple[dict[str, Any] | None, bool]:
        hooks = self.s.hooks
        if not hooks.has("session_before_compact"):
            return None, False
        event = {
            "preparation": prep, "branchEntries": self.s.manager.get_branch(), "customInstructions": instructions,
            "reason": reason, "willRetry": will_retry, "signal": signal,
        }
        supplied: dict[str, Any] | None = None
        for fn in hooks.handlers("session_before_compact"):
            try:
                result = await call_handler(fn, event)
            except Exception as exc:
                await self.s.report_hook_error(handler_name(fn), "session_before_compact", exc)
                continue
            if not isinstance(result, dict) or not result:
                continue
            if result.get("cancel"):
                return None, True
            if isinstance(result.get("compaction"), dict):
                supplied = result["compaction"]
        return supplied, False

    async def _fail(self, reason: CompactionReason, exc: Exception, *, aborted: bool, from_extension: bool) -> None:
        self.controller = self.reason = None
        event: dict[str, Any] = {"type": "compaction_end", "reason": reason, "aborted": aborted, "willRetry": False}
        message: str | None = None
        if not aborted:
            prefix = {"manual": "Compaction failed: ", "threshold": "Auto-compaction failed: ",
                      "overflow": "Context overflow recovery failed: "}[reason]
            message = prefix + (str(exc) or type(exc).__name__)
            event["errorMessage"] = message
        await self.s.emit(event)
        await self._hook_failed(reason, message, aborted=aborted, from_extension=from_extension)

    async def _hook_failed(self, reason: str, message: str | None, *, aborted: bool, from_extension: bool) -> None:
        payload: dict[str, Any] = {"reason": reason, "aborted": aborted, "willRetry": False,
                                   "fromExtension": from_extension}
        if message is not None:
            payload["errorMessage"] = message
        await self.s.run_hook("session_compact_failed", payload)

    def abort(self) -> None:
        if self.controller is not None:
            self.controller.abort("aborted")
        self.background.cancel_now()


CheckKind = Literal["threshold", "post_run", "pre_prompt"]


def valid_usage_tokens(message: Any) -> int | None:
    """Context tokens an assistant reply reports, or None when it cannot anchor usage."""
    usage = get_assistant_usage(message)
    return int(calculate_context_tokens(usage)) if usage is not None else None

"""Background compaction: the summary is written while the conversation goes on.

With `compaction.backgroundTokens` > 0, once the context passes that mark (below the threshold)
at a turn boundary, the session plans the compaction it would run now (the same cut, kept tail
and previous summary as a blocking one) and starts the summary request as an asyncio task next
to the conversation. At every later turn boundary:

* the summary is ready and its cut is still valid -> the compaction entry is appended there and
  the usual `compaction_start` / `compaction_end` pair is emitted (with `background: true`);
  the entries written meanwhile come after the cut, so they are simply kept;
* the conversation moved so that the summary no longer fits (the kept entry left the branch,
  another compaction happened, an entry it summarizes was edited), or the summary failed ->
  it is discarded (`compaction_background_discarded{reason, discarded}`) and the ordinary
  blocking path runs when the threshold is reached (no new background summary before the next
  compaction);
* the threshold is reached while the summary is still being written -> that turn waits for
  the running request (no second one); `compaction_end.waited` is true.

Overflow recovery and manual compaction cancel a running background job first and use the
blocking path. `abort()` cancels it too. Hooks: `session_before_compact` is not consulted for
background summaries (it cannot cancel work already done); `session_compact` is called as usual.

With `backgroundTokens: "auto"` the mark is learned (`Pace`): the tokens a turn adds and the time
it takes (between turn boundaries at which the context grew, idle time included: a summary
is written while the user reads too), and how long this session's summaries take. The summary
starts `ceil(latency / turn time) + 1` turns of growth below the threshold (the extra turn: it is
applied at a boundary, not the moment it is ready), never below what a compaction leaves
(`keepRecentTokens` + the summary's budget). Until a summary has been timed it is assumed to
take `PRIOR_SUMMARY_TURNS` turns, and starts no later than halfway from that floor to the
threshold; until two turns have been seen, nothing starts early.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterator

from picontext.agent.host import BackgroundHost, CompactionPlan
from picontext.ai.event_stream import AbortSignal, wait_unless_aborted
from picontext.compaction.fallback import AttemptFailure
from picontext.compaction.resumable import span_details
from picontext.compaction.summarize import SummaryResult
from picontext.compaction.summary_model import summarizer_ref, with_summary_model
from picontext.session.projection import field_of

__all__ = ["PRIOR_SUMMARY_TURNS", "BackgroundCompaction", "Pace"]

PRIOR_SUMMARY_TURNS = 4
"""How many turns a summary is assumed to take before one has been timed in this session."""
PACE_SAMPLES = 8


@dataclasses.dataclass(slots=True)
class Pace:
    """What `backgroundTokens: "auto"` knows of this session: growth and time per turn, summary time."""

    growth: deque[int] = dataclasses.field(default_factory=lambda: deque(maxlen=PACE_SAMPLES))
    turn_seconds: deque[float] = dataclasses.field(default_factory=lambda: deque(maxlen=PACE_SAMPLES))
    summary_seconds: deque[float] = dataclasses.field(default_factory=lambda: deque(maxlen=4))
    last: tuple[float, int] | None = None
    """(time, tokens) at the last boundary where the context grew (or shrank: a compaction)."""

    def boundary(self, now: float, tokens: int) -> None:
        """A turn boundary. Same size as before: not a turn (the boundary before a prompt repeats
        the one after the last reply), so the time between them counts into the next turn."""
        if self.last is not None and tokens > self.last[1]:
            self.growth.append(tokens - self.last[1])
            self.turn_seconds.append(now - self.last[0])
        if self.last is None or tokens != self.last[1]:
            self.last = (now, tokens)

    def summary_took(self, seconds: float) -> None:
        self.summary_seconds.append(max(0.0, seconds))

    def lead_turns(self) -> int | None:
        """Turns of growth a summary needs to be ready in time, or None before two turns are known."""
        if len(self.turn_seconds) < 2:
            return None
        # the faster turns: the summary must be ready even when the user answers at once
        turn = sorted(self.turn_seconds)[len(self.turn_seconds) // 4]
        if turn <= 0:
            return PRIOR_SUMMARY_TURNS + 1
        latency = max(self.summary_seconds) if self.summary_seconds else PRIOR_SUMMARY_TURNS * turn
        return math.ceil(latency / turn) + 1

    def mark(self, threshold: int, floor: int) -> int | None:
        """Where to start: the threshold less the growth of `lead_turns`, at least `floor`; before
        a summary has been timed, no later than halfway from `floor` to the threshold (a summary
        reads the whole span and writes a long note: it may take many turns, and starting the
        first one early costs one earlier compaction, not a wait)."""
        lead = self.lead_turns()
        if lead is None:
            return None
        floor = min(floor, threshold)
        mark = threshold - math.ceil(statistics.median(self.growth)) * lead
        if not self.summary_seconds:
            mark = min(mark, (floor + threshold) // 2)
        return max(mark, floor)


@dataclasses.dataclass(slots=True)
class _Job:
    plan: CompactionPlan
    task: asyncio.Task[SummaryResult]
    signal: AbortSignal
    leaf_id: str | None
    """The leaf when the span was chosen: it must still be on the branch when the summary lands."""
    previous_id: str | None
    """The compaction the span builds on (None: the first one); any other newest compaction invalidates."""
    summarized: frozenset[str]
    span_id: str | None
    model_ref: str | None
    tokens: int
    failures: list[AttemptFailure]
    """Its failed attempt (one at most: a background summary is not retried), recorded when discarded."""


class BackgroundCompaction:
    """At most one background summary per session (`job`); counters for tests and benchmarks.

    It sees the blocking runtime only as a `BackgroundHost` (agent/host.py)."""

    def __init__(self, host: BackgroundHost) -> None:
        self.host = host
        self.job: _Job | None = None
        self.started = 0
        self.applied = 0
        self.waited = 0
        self.discarded = 0
        self.paused = False
        """After a discard: no new background summary until the next compaction (the blocking path
        takes over for this span, so a conversation that keeps invalidating costs one summary more, not many)."""
        self.pace = Pace()
        self.clock: Callable[[], float] = time.monotonic
        """What the pace is measured with (tests give a clock of their own)."""

    @property
    def enabled(self) -> bool:
        settings = self.host.settings()
        mark = settings.background_tokens
        return settings.enabled and (mark == "auto" or mark > 0) and self.host.threshold() is not None

    @property
    def active(self) -> bool:
        return self.job is not None

    def compacted(self) -> None:
        self.paused = False

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        began = self.clock()
        yield
        self.pace.summary_took(self.clock() - began)

    def mark(self) -> int | None:
        """Tokens above which a summary starts: the setting, or the learned one ("auto"; None
        while too little is known)."""
        settings = self.host.settings()
        if settings.background_tokens != "auto":
            return settings.background_tokens
        threshold = self.host.threshold()
        if threshold is None:
            return None
        return self.pace.mark(threshold, settings.keep_recent_tokens + self.host.summary_budget())

    @property
    def ready(self) -> bool:
        return self.job is not None and self.job.task.done()

    # -- turn boundaries -------------------------------------------------------------------------

    async def on_boundary(self, tokens: int) -> bool:
        """Apply a finished summary, or start one above the mark. True when a compaction was applied."""
        self.pace.boundary(self.clock(), tokens)
        if self.job is not None:
            if self.job.task.done():
                return await self._apply(waited=False)
            return False
        if not self.enabled or self.paused or self.host.running:
            return False
        mark = self.mark()
        if mark is not None and tokens > mark:
            await self.start(tokens, mark=mark)
        return False

    async def take_over(self, signal: AbortSignal | None) -> bool | None:
        """The threshold is reached: use the background summary, waiting for it if needed.

        None = there is no job (run the blocking path); True = applied; False = discarded,
        failed or aborted (the caller falls back to the blocking path unless aborted)."""
        job = self.job
        if job is None:
            return None
        was_ready = job.task.done()
        if not was_ready:
            self.waited += 1
            if not await wait_unless_aborted(job.task, signal):
                return False  # the run was aborted; the job keeps going for the next boundary
        return await self._apply(waited=not was_ready)

    # -- start, apply, discard -------------------------------------------------------------------

    async def start(self, tokens: int, plan: CompactionPlan | None = None, span_id: str | None = None, *,
                    mark: int | None = None) -> bool:
        """Plan now (or take `plan`, e.g. a resumed span) and start the summary task."""
        host = self.host
        if plan is None:
            plan, _why = host.plan("threshold")
            if plan is None or plan.masks:  # a kept part that needs shortening: the blocking path does it
                return False
        try:
            completion = host.completion()
        except Exception as exc:  # e.g. compaction.model names a model without a key: say so, stop trying
            self.discarded += 1
            self.paused = True
            await host.emit({"type": "compaction_background_discarded", "reason": f"cannot start: {exc}",
                             "discarded": self.discarded})
            return False
        model_ref = summarizer_ref(completion)
        prep = plan.preparation
        if span_id is None and plan.settings.resumable:
            span_id = await host.record_span(plan, reason="threshold", model=model_ref)
        signal = AbortSignal()
        failures: list[AttemptFailure] = []
        # One checked attempt, no retry and no mechanical summary: a failed background summary
        # falls to the blocking path when the threshold is reached, which retries and falls back.
        task = asyncio.ensure_future(host.summary_request(
            plan, completion, signal, reason="threshold", background=True,
            on_failure=lambda failure: failures.append(AttemptFailure(
                failure.attempt, failure.kind, failure.error, "blocking", failure.usage)),
        ))
        started = self.clock()

        def timed(done: asyncio.Task[SummaryResult]) -> None:
            if not done.cancelled() and done.exception() is None:
                self.pace.summary_took(self.clock() - started)

        task.add_done_callback(timed)
        previous = prep.previous_compaction
        summarized = frozenset(
            str(field_of(item.source_entry, "id")) for item in prep.projection.entries[: prep.first_kept_entry_index]
        )
        self.job = _Job(plan, task, signal, host.leaf_id(),
                        field_of(previous, "id") if previous is not None else None, summarized, span_id, model_ref,
                        tokens, failures)
        self.started += 1
        event = {"type": "compaction_background_start", "tokens": tokens, "firstKeptEntryId": prep.first_kept_entry_id}
        if mark is not None:
            event["mark"] = mark
        await host.emit(event)
        return True

    def invalid_reason(self, job: _Job) -> str | None:
        """Why the job's summary no longer fits the branch, or None when it can be applied."""
        branch = self.host.branch()
        ids = [field_of(e, "id") for e in branch]
        if job.leaf_id is not None and job.leaf_id not in ids:
            return "the conversation moved to another branch"
        if job.plan.preparation.first_kept_entry_id not in ids:
            return "the first kept entry is no longer on the branch"
        latest = next((field_of(e, "id") for e in reversed(branch) if field_of(e, "type") == "compaction"), None)
        if latest != job.previous_id:
            return "another compaction was appended meanwhile"
        start = ids.index(job.leaf_id) + 1 if job.leaf_id is not None else 0
        for entry in branch[start:]:
            target = field_of(entry, "targetId")
            if field_of(entry, "type") == "context_edit" and isinstance(target, str) and target in job.summarized:
                return "an entry it summarizes was edited meanwhile"
        return None

    async def _apply(self, *, waited: bool) -> bool:
        job, self.job = self.job, None
        assert job is not None
        if job.task.cancelled():
            await self._discard(job, "cancelled")
            return False
        error = job.task.exception()
        if error is not None:
            await self._discard(job, f"the summary failed: {error}")
            return False
        why = self.invalid_reason(job)
        if why is not None:
            await self._discard(job, why)
            return False
        result = job.task.result()
        details = with_summary_model(span_details(result.details, job.span_id), job.model_ref)
        await self.host.emit({"type": "compaction_start", "reason": "threshold", "background": True})
        entry_id = await self.host.append_compaction(result.summary, result.first_kept_entry_id,
                                                     result.tokens_before, details, result.usage)
        self.applied += 1
        await self.host.announce("threshold", False, entry_id, result.summary, result.first_kept_entry_id,
                               result.tokens_before, details, result.usage, from_extension=False,
                               extra={"background": True, "waited": waited})
        return True

    async def _discard(self, job: _Job, reason: str) -> None:
        for failure in job.failures:  # ours: a failed attempt leaves its record, as on the blocking path
            await self.host.record_failure(failure, job.plan.preparation, "background", job.model_ref)
        job.failures.clear()
        self.discarded += 1
        self.paused = True
        if job.span_id is not None:
            await self.host.end_span(job.span_id, "discarded")
        await self.host.emit({"type": "compaction_background_discarded", "reason": reason,
                              "discarded": self.discarded})

    async def cancel(self, reason: str) -> None:
        """Stop a running job and discard it (overflow recovery, manual compaction, abort)."""
        job = self.job
        if job is None:
            return
        self.job = None
        job.signal.abort("aborted")
        if not job.task.done():
            job.task.cancel()
            await asyncio.gather(job.task, return_exceptions=True)
        await self._discard(job, reason)

    def cancel_now(self) -> None:
        """Synchronous abort (from `abort()`): stop the request; the discard is reported at the next boundary."""
        if self.job is not None:
            self.job.signal.abort("aborted")
            self.job.task.cancel()

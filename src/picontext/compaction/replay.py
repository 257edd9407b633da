"""Replaying real sessions through the compaction strategies (`picontext eval replay`).

For each session, along the branch of its last entry:

* **Cuts.** Before each recorded compaction (the leaf is the entry the compaction hangs on), and
  every `every` tokens of transcript (chars/4 of the messages on the branch, compactions not
  subtracted), moved forward to the next point where no tool call waits for its result.
* **Strategies.** At each cut the session is rebuilt in memory up to the cut and every strategy
  compacts it (`STRATEGIES`; `recorded`, the session's own compaction, only at recorded cuts).
  Summaries come from the summarizer given: a scripted one offline, or any catalog model.
* **Facts** (replay_facts.py, independent of the ledger's code) are computed from the transcript
  up to the cut, with the next tool call from after it; a fact is kept when the compacted context
  (summary plus what was kept) holds it.
* **Judge** (optional, replay_judge.py): a model answers probe questions from the compacted context
  and grades the answers.

One `ReplayRecord` per (session, cut, strategy): tokens before and after (chars/4 of the whole
context, the same measure on both sides), facts kept per kind, the summarizer's cost and the
wall time of the compaction.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from picontext.compaction.compact import compact_session, estimated_tokens
from picontext.compaction.completion import Completion
from picontext.compaction.fallback import mechanical_summary
from picontext.compaction.prepare import prepare_compaction
from picontext.compaction.replay_facts import Fact, context_text, fact_kept, transcript_facts
from picontext.compaction.settings import CompactionSettings
from picontext.compaction.tokens import estimate_tokens
from picontext.errors import CompactionError, NothingToCompact, SessionFormatError
from picontext.session.manager import SessionManager
from picontext.session.migrations import migrate_to_current
from picontext.session.projection import LAST, build_session_path, field_of
from picontext.session.store import load_file_entries

__all__ = [
    "STRATEGIES",
    "Cut",
    "ReplayRecord",
    "ReplaySession",
    "ReplayStrategy",
    "judge_with",
    "load_session",
    "plan_cuts",
    "replay",
    "strategy_names",
]

DEFAULT_EVERY = 40_000


@dataclass(slots=True)
class ReplaySession:
    """A session file's branch (root to its last entry), migrated in memory."""

    path: str
    header: dict[str, Any]
    branch: list[dict[str, Any]]
    source: str = ""
    """The file the user named (a transcript imported into `path`); `path` when it is a session."""

    @property
    def name(self) -> str:
        return os.path.basename(self.source or self.path)

    @property
    def session_id(self) -> str:
        return str(self.header.get("id"))

    @property
    def cwd(self) -> str:
        return str(self.header.get("cwd") or "/")

    def manager(self, end: int) -> SessionManager:
        """The session as it was with `branch[:end]`, in memory (appends never touch the file)."""
        return SessionManager.in_memory(self.cwd, entries=[self.header, *self.branch[:end]])


def load_session(path: str, source: str | None = None) -> ReplaySession:
    try:
        file_entries = load_file_entries(path)
    except OSError as exc:
        raise SessionFormatError(f"cannot read {path}: {exc.strerror}", path=path) from None
    if not file_entries:
        raise SessionFormatError(f"{path}: not a session file", path=path)
    migrate_to_current(file_entries)
    header = file_entries[0]
    entries = [e for e in file_entries[1:] if isinstance(e, dict)]
    branch = [e for e in build_session_path(entries, LAST) if isinstance(e, dict)]
    return ReplaySession(path, header, branch, source or path)


@dataclass(frozen=True, slots=True)
class Cut:
    """Where the session is compacted: after `branch[end - 1]`; `recorded` is the compaction the
    session itself made there (recorded cuts only)."""

    number: int
    kind: str  # "compaction" | "every"
    end: int
    transcript_tokens: int
    recorded: dict[str, Any] | None = None


def _message(entry: dict[str, Any]) -> dict[str, Any] | None:
    message = entry.get("message") if entry.get("type") == "message" else None
    return message if isinstance(message, dict) else None


def _waits_for_result(branch: Sequence[dict[str, Any]], end: int) -> bool:
    """Whether cutting after `branch[end - 1]` would leave a tool call without its result."""
    for entry in branch[end:]:
        message = _message(entry)
        if message is None:
            continue
        return message.get("role") == "toolResult"
    return False


def plan_cuts(session: ReplaySession, every: int | None = DEFAULT_EVERY, max_cuts: int | None = None) -> list[Cut]:
    """Recorded cuts and one every `every` transcript tokens, in branch order (see the module
    docstring); with `max_cuts`, that many of the every-N cuts are kept, evenly spread."""
    branch = session.branch
    recorded: list[tuple[int, dict[str, Any]]] = []
    regular: list[int] = []
    tokens_at: list[int] = []
    total = 0
    mark = every or 0
    wanted = False
    for index, entry in enumerate(branch):
        message = _message(entry)
        if message is not None and message.get("role") != "system":
            total += estimate_tokens(message)
        tokens_at.append(total)
        if entry.get("type") == "compaction" and index > 0:
            recorded.append((index, entry))
        if every and total >= mark:
            wanted = True
            while mark <= total:
                mark += every
        if wanted and index + 1 < len(branch) and not _waits_for_result(branch, index + 1):
            regular.append(index + 1)
            wanted = False
    if max_cuts is not None and len(regular) > max_cuts:
        step = len(regular) / max_cuts
        regular = [regular[int(i * step + step / 2)] for i in range(max_cuts)]
    cuts = [(i, "compaction", e) for i, e in recorded] + [(end, "every", None) for end in regular]
    cuts.sort(key=lambda c: (c[0], c[1] != "compaction"))
    return [Cut(n, kind, end, tokens_at[end - 1] if end else 0, entry)
            for n, (end, kind, entry) in enumerate(cuts, 1)]


# -- strategies -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class StrategyRun:
    """What one strategy did at one cut."""

    manager: SessionManager
    usage: dict[str, Any] | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ReplayContext:
    session: ReplaySession
    cut: Cut
    completion: Completion | None
    settings: CompactionSettings
    window: int


StrategyFn = Callable[[ReplayContext], Awaitable[StrategyRun]]


@dataclass(frozen=True, slots=True)
class ReplayStrategy:
    """A way to compact: `run` gets the session at the cut and returns the manager afterwards.
    `recorded_only`: it exists only where the session compacted itself."""

    name: str
    run: StrategyFn
    needs_summarizer: bool = False
    recorded_only: bool = False


async def _none(ctx: ReplayContext) -> StrategyRun:
    return StrategyRun(ctx.session.manager(ctx.cut.end))


async def _recorded(ctx: ReplayContext) -> StrategyRun:
    """The session's own compaction (Pi's summary, or Claude Code's), exactly as recorded."""
    entry = ctx.cut.recorded or {}
    usage = entry.get("usage") if isinstance(entry.get("usage"), dict) else None
    return StrategyRun(ctx.session.manager(ctx.cut.end + 1), usage=usage)


def _compaction(strategy: str, *, verify: bool = True) -> StrategyFn:
    async def run(ctx: ReplayContext) -> StrategyRun:
        manager = ctx.session.manager(ctx.cut.end)
        try:
            outcome = await compact_session(manager, strategy=strategy, completion=ctx.completion,
                                            settings=ctx.settings, context_window=ctx.window, verify=verify)
        except NothingToCompact as exc:
            return StrategyRun(manager, error=f"nothing to compact: {exc}")
        except CompactionError as exc:
            return StrategyRun(ctx.session.manager(ctx.cut.end), error=str(exc).splitlines()[0])
        usage = outcome.summary.usage if outcome.summary is not None else None
        return StrategyRun(manager, usage=usage)

    return run


async def _fallback(ctx: ReplayContext) -> StrategyRun:
    """The mechanical summary alone, as a compaction writes it when the model fails twice: what
    survives when no model helps (a floor for the summary strategies, at no cost)."""
    manager = ctx.session.manager(ctx.cut.end)
    prep = prepare_compaction(manager.get_branch(), ctx.settings)
    if prep is None:
        return StrategyRun(manager, error="nothing to compact")
    result = mechanical_summary(prep, reserve_tokens=ctx.settings.reserve_tokens, model_max=0, failures=())
    manager.append_compaction(result.summary, result.first_kept_entry_id, result.tokens_before, result.details)
    return StrategyRun(manager)


STRATEGIES: tuple[ReplayStrategy, ...] = (
    ReplayStrategy("none", _none),
    ReplayStrategy("recorded", _recorded, recorded_only=True),
    ReplayStrategy("mask", _compaction("mask")),
    ReplayStrategy("summary-no-ledger", _compaction("summary", verify=False), needs_summarizer=True),
    ReplayStrategy("summary", _compaction("summary"), needs_summarizer=True),
    ReplayStrategy("mask-then-summary", _compaction("mask-then-summary"), needs_summarizer=True),
    ReplayStrategy("fallback", _fallback),
)
"""`none` is the ceiling (nothing compacted); `summary-no-ledger` is Pi's behaviour; `recorded` is
what the session's own agent did. A new strategy is one more line here."""


def strategy_names() -> tuple[str, ...]:
    return tuple(s.name for s in STRATEGIES)


# -- records ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class ReplayRecord:
    """One (session, cut, strategy)."""

    session: str
    session_id: str
    cut: int
    cut_kind: str
    cut_entry: str
    transcript_tokens: int
    strategy: str
    summarizer: str
    tokens_before: int
    tokens_after: int
    facts: list[tuple[Fact, bool]]
    cost: float
    time: float
    error: str | None = None
    judge: dict[str, Any] | None = None
    by_kind: dict[str, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for fact, kept in self.facts:
            tally = self.by_kind.setdefault(fact.kind, [0, 0])
            tally[0] += kept
            tally[1] += 1

    @property
    def facts_total(self) -> int:
        return len(self.facts)

    @property
    def facts_kept(self) -> int:
        return sum(1 for _fact, kept in self.facts if kept)

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session, "sessionId": self.session_id, "cut": self.cut, "cutKind": self.cut_kind,
            "cutEntry": self.cut_entry, "transcriptTokens": self.transcript_tokens, "strategy": self.strategy,
            "summarizer": self.summarizer, "tokensBefore": self.tokens_before, "tokensAfter": self.tokens_after,
            "factsTotal": self.facts_total, "factsKept": self.facts_kept,
            "factsByKind": {k: {"kept": v[0], "total": v[1]} for k, v in self.by_kind.items()},
            "lost": [fact.to_json() for fact, kept in self.facts if not kept],
            "cost": self.cost, "time": round(self.time, 3), "error": self.error, "judge": self.judge,
        }


def _raw_messages(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for entry in entries:
        message = _message(entry)
        if message is not None:
            out.append(message)
        elif entry.get("type") == "custom_message":
            out.append({"role": "custom", "content": entry.get("content")})
    return out


JudgeFn = Callable[[SessionManager, list[Fact], ReplaySession, Cut], Awaitable[dict[str, Any]]]
Progress = Callable[[str], None]


def _excerpt(session: ReplaySession, cut: Cut) -> str:
    """The user and assistant text before the cut: the reference for the judge's decision question."""
    parts = []
    for message in _raw_messages(session.branch[:cut.end]):
        if message.get("role") in ("user", "assistant"):
            text = context_text([{"role": "user", "content": message.get("content")}] if message["role"] == "user"
                                else [{**message, "content": [b for b in message.get("content") or []
                                                               if isinstance(b, dict) and b.get("type") == "text"]}])
            if text.strip():
                parts.append(f"[{message['role']}] {text.strip()}")
    return "\n".join(parts)


def judge_with(completion: Completion) -> JudgeFn:
    """The judge (replay_judge.py) asking `completion` about each compacted context."""
    from picontext.compaction.replay_judge import judge_context

    async def judge(manager: SessionManager, facts: list[Fact], session: ReplaySession, cut: Cut) -> dict[str, Any]:
        return await judge_context(completion, manager.build_session_projection().messages, facts,
                                   _excerpt(session, cut))

    return judge


async def replay(
    sessions: Sequence[ReplaySession],
    *,
    strategies: Sequence[ReplayStrategy] = STRATEGIES,
    completion: Completion | None = None,
    summarizer: str = "extractive",
    every: int | None = DEFAULT_EVERY,
    max_cuts: int | None = None,
    settings: CompactionSettings | None = None,
    window: int = 200_000,
    judge: JudgeFn | None = None,
    progress: Progress | None = None,
) -> AsyncIterator[ReplayRecord]:
    """Every cut of every session with every strategy, in order (see the module docstring)."""
    settings = settings or CompactionSettings()
    for number, session in enumerate(sessions, 1):
        name = session.name
        cuts = plan_cuts(session, every, max_cuts)
        if progress:
            progress(f"[{number}/{len(sessions)}] {name}: {len(session.branch)} entries, {len(cuts)} cuts")
        for cut in cuts:
            before = _raw_messages(session.branch[:cut.end])
            after = _raw_messages(session.branch[cut.end:])
            facts = transcript_facts(before, after, session.cwd)
            cut_entry = str(field_of(session.branch[cut.end - 1], "id"))
            tokens_before = estimated_tokens(session.manager(cut.end))
            for strategy in strategies:
                if strategy.recorded_only and cut.recorded is None:
                    continue
                started = time.perf_counter()
                run = await strategy.run(ReplayContext(session, cut, completion, settings, window))
                elapsed = time.perf_counter() - started
                text = context_text(run.manager.build_session_projection().messages)
                cost = float(((run.usage or {}).get("cost") or {}).get("total") or 0)
                record = ReplayRecord(
                    name, session.session_id, cut.number, cut.kind, cut_entry, cut.transcript_tokens,
                    strategy.name, summarizer if strategy.needs_summarizer else "-", tokens_before,
                    estimated_tokens(run.manager), [(f, fact_kept(f, text)) for f in facts], cost, elapsed,
                    run.error)
                if judge is not None:
                    record.judge = await judge(run.manager, facts, session, cut)
                if progress:
                    note = f" ({run.error})" if run.error else ""
                    progress(f"  cut {cut.number}/{len(cuts)} ({cut.kind}, {tokens_before:,} tokens) {strategy.name}: "
                             f"{record.tokens_after:,} tokens, {record.facts_kept}/{record.facts_total} facts, "
                             f"{elapsed:.1f} s{note}")
                yield record

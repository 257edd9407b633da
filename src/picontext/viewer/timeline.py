"""One walk along the branch: what the viewer's plot, compaction table and dropped list show.

For every assistant message on the branch (one model request) two numbers are kept apart:

* `reported` — the provider's usage of that call (`calculate_context_tokens`), when the message
  can anchor (Pi `getAssistantUsage`); None for errors, aborts and zero usage;
* `estimate` — what picontext/Pi estimated the context to be just before the request
  (`estimate_projected_context_tokens` of the projection at the request's parent), i.e. the number
  compaction decisions compare with the threshold.

The walk extends one incremental projection entry by entry (`compaction.tokens.BranchEstimate`,
over a `session.live.LiveProjection`), so the estimate at every request costs linear time in
all, and the same projection says what each compaction folded away (its context just before
and just after it) and, at the end, what the branch's context is (for `session.dropped`).
`tests/viewer/test_view_data.py` holds every estimate equal to the estimator run from scratch
and each compaction's entries equal to folding the whole prefix before and after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from picontext.ai.overflow import is_context_overflow
from picontext.compaction.tokens import BranchEstimate, calculate_context_tokens, estimate_before
from picontext.session.projection import SessionProjection, field_of, hashable, message_role

__all__ = ["CompactionMark", "Request", "Timeline", "build_timeline", "estimate_before"]

_SUMMARIZABLE = frozenset({"message", "custom_message"})


@dataclass(slots=True)
class Request:
    position: int  # index of the assistant entry in the branch
    reported: int | float | None
    estimate: int | float
    window: int | None
    model: str


@dataclass(slots=True)
class CompactionMark:
    position: int  # index of the compaction entry in the branch
    requests_before: int  # how many requests precede it (its x on the plot)
    tokens_before: Any
    tokens_after: int | float
    overflow: bool  # it recovered from a context overflow (the previous request overflowed)
    fold_from: int = 0  # its kept part starts here: no position before it matters to later projections
    kept: int | None = None  # where its `firstKeptEntryId` first occurs on the branch (None: nowhere)
    # The message and custom message entries (not system messages) in the context just before it
    # and not just after it: what it summarized, in context order.
    summarized: list[Any] = field(default_factory=list)


@dataclass(slots=True)
class Timeline:
    requests: list[Request] = field(default_factory=list)
    compactions: list[CompactionMark] = field(default_factory=list)
    overflows: list[int] = field(default_factory=list)  # branch positions of overflowed requests
    projection: SessionProjection = field(default_factory=SessionProjection)  # of the whole branch


def _summarized(before: Sequence[Any], after: Sequence[Any]) -> list[Any]:
    kept = set(map(id, after))
    out = []
    for e in before:  # most of a long context before a compaction: the common shapes inline
        if id(e) in kept:
            continue
        if type(e) is dict:
            kind = e.get("type")
            if kind == "message":
                message = e.get("message")
                if type(message) is dict and message.get("role") == "system":
                    continue
                if type(message) is dict or field_of(message, "role") != "system":
                    out.append(e)
                continue
            if kind == "custom_message":
                out.append(e)
                continue
        if type(kind := field_of(e, "type")) is str and kind in _SUMMARIZABLE and message_role(e) != "system":
            out.append(e)
    return out


def build_timeline(path: Sequence[Any], window_of: Callable[[str, str], int | None]) -> Timeline:
    """Walk the root-first `path` once; `window_of(provider, model)` gives a model's context window."""
    out = Timeline()
    walk = BranchEstimate()
    live = walk.live
    add, add_message, tokens = walk.add, walk.add_message, walk.tokens
    requests = out.requests
    models: dict[tuple[str, str], tuple[int | None, str]] = {}  # (provider, model) -> window, name
    last_request_overflowed = False
    for pos, entry in enumerate(path):
        kind = entry.get("type") if type(entry) is dict else None
        if kind == "message":
            message = entry.get("message")
            if type(message) is not dict:
                add(entry)
                continue
            role = message.get("role")
            if role == "assistant":
                # get_assistant_usage and the usage's context tokens, in one
                usage = message.get("usage")
                stop = message.get("stopReason")
                reported = None
                if isinstance(usage, dict) and stop != "aborted" and stop != "error":
                    total = calculate_context_tokens(usage)
                    reported = total if total > 0 else None
                provider, model = message.get("provider", "?"), message.get("model", "?")
                known = models.get((provider, model)) if type(provider) is str and type(model) is str else None
                if known is None:
                    provider, model = str(provider), str(model)
                    known = models[(provider, model)] = (window_of(provider, model), f"{provider}/{model}")
                window = known[0]
                requests.append(Request(pos, reported, tokens(), window, known[1]))
                last_request_overflowed = stop == "error" and is_context_overflow(message, window)
                if last_request_overflowed:
                    out.overflows.append(pos)
            add_message(entry, message, role)
        elif kind == "compaction":
            before = live.context_entries  # replaced, not changed, by the fold below
            add(entry)
            kept = entry.get("firstKeptEntryId")
            out.compactions.append(CompactionMark(
                pos, len(requests), entry.get("tokensBefore"), tokens(), last_request_overflowed,
                walk.fold_from, summarized=_summarized(before, live.context_entries),
                kept=live.path_position(kept) if hashable(kept) else None))
        else:
            add(entry)
    out.projection = live.projection()
    return out

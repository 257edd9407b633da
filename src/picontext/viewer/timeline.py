"""Context size per request along a branch: what the plot of the viewer draws.

For every assistant message on the branch (one model request) two numbers are kept apart:

* `reported` — the provider's usage of that call (`calculate_context_tokens`), when the message
  can anchor (Pi `getAssistantUsage`); None for errors, aborts and zero usage;
* `estimate` — what picontext/Pi estimated the context to be just before the request
  (`estimate_projected_context_tokens` of the projection at the request's parent), i.e. the number
  compaction decisions compare with the threshold.

Calling the estimator on a fresh projection for every request is quadratic, so the walk keeps
it incremental: while no compaction or context edit follows the newest anchor, the estimate is
that anchor's usage plus the chars/4 estimates of the messages appended since, which is exactly
what `estimate_context_tokens` sums. After a compaction or edit, until the next anchor, every
usage in the context is stale or absent, so the estimator's answer is its pure estimate
(`pure_estimate`: the replayed system message plus every other message). A `LiveProjection` kept
along the walk says what each entry adds and what each edit replaces, so that sum is kept
current too: an append adds its messages, an edit swaps its target's, a compaction re-sums the
folded context, and the system message is replayed again only when a system message came or
went. Only an edit written before its target (which the estimator resolves by positions) runs
the estimator itself on the prefix. `tests/viewer/test_view_data.py` holds the
result equal to the estimator run from scratch for every request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from picontext.ai.overflow import is_context_overflow
from picontext.compaction.tokens import (
    calculate_context_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
    get_assistant_usage,
)
from picontext.session.live import LiveProjection
from picontext.session.projection import (
    SessionProjection,
    entry_to_messages,
    field_of,
    fold_path,
    hashable,
    project_context_entries,
)
from picontext.session.system_prompt import get_current_system_message

__all__ = ["CompactionMark", "Request", "Timeline", "build_timeline", "estimate_before"]

_CONTENT = frozenset({"message", "custom_message", "branch_summary"})


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


@dataclass(slots=True)
class Timeline:
    requests: list[Request] = field(default_factory=list)
    compactions: list[CompactionMark] = field(default_factory=list)
    overflows: list[int] = field(default_factory=list)  # branch positions of overflowed requests


def _projection_of(prefix: Sequence[Any]) -> SessionProjection:
    projected = project_context_entries(fold_path(prefix))
    return SessionProjection(projected, [m for p in projected for m in p.messages])


def estimate_before(path: Sequence[Any], position: int, start: int = 0) -> int | float:
    """The estimator itself on the context seen by a request at `position` (the slow, exact way).

    `start` may skip a prefix that cannot matter: everything before the kept part of the newest
    compaction (the fold and the anchor search then see the same entries).
    """
    prefix = list(path[start:position])
    return estimate_projected_context_tokens(_projection_of(prefix), prefix)["tokens"]


class _PathView:
    """The branch (parsed entries, root first) as the entry view a `LiveProjection` reads."""

    def __init__(self, path: Sequence[Any]) -> None:
        self.path = path

    def entry(self, index: int) -> Any:
        return self.path[index]

    def types_of(self, positions: list[int]) -> list[Any]:
        return [field_of(self.path[i], "type") for i in positions]

    def ids_of(self, positions: list[int]) -> list[Any]:
        return [field_of(self.path[i], "id") for i in positions]

    def role_of(self, index: int) -> Any:
        return field_of(field_of(self.path[index], "message"), "role")

    def position_of(self, entry_id: Any) -> int | None:
        return None  # never asked: ids_unique() says no, so the projection maps ids itself

    def ids_unique(self) -> bool:
        return False


class _PureSum:
    """`pure_estimate` of a live projection's messages, kept current as the walk changes them.

    `others`: the estimates of the non-system messages (each message object estimated once);
    the replayed system message is rebuilt only after a system message came or went."""

    def __init__(self, live: LiveProjection) -> None:
        self.live = live
        self.others = 0
        self.system_tokens = 0
        self.system_stale = False
        self._seen: dict[int, tuple[Any, int]] = {}

    def _of(self, message: Any) -> int:
        hit = self._seen.get(id(message))
        if hit is not None and hit[0] is message:  # the object is kept, so its id is not reused
            return hit[1]
        tokens = estimate_tokens(message)
        self._seen[id(message)] = (message, tokens)
        return tokens

    def add(self, messages: Sequence[Any], sign: int = 1) -> None:
        for m in messages:
            if field_of(m, "role") == "system":
                self.system_stale = True
            else:
                self.others += sign * self._of(m)

    def resum(self) -> None:
        self.others = 0
        self.system_stale = True  # system messages may have left with the folded part
        self.add(self.live.projection().messages)

    def tokens(self) -> int:
        if self.system_stale:
            system = get_current_system_message(self.live.projection().messages)
            self.system_tokens = estimate_tokens(system) if system is not None else 0
            self.system_stale = False
        return self.system_tokens + self.others


def build_timeline(path: Sequence[Any], window_of: Callable[[str, str], int | None]) -> Timeline:
    """Walk the root-first `path` once; `window_of(provider, model)` gives a model's context window."""
    out = Timeline()
    anchor: int | float | None = None  # usage of the newest anchor, None while stale
    trailing = 0
    edit_targets: set[Any] = set()
    last_request_overflowed = False
    first_at: dict[Any, int] = {}  # id -> first position on the path (fold_path looks ids up that way)
    fold_from = 0  # where the kept part of the newest compaction starts
    live = LiveProjection()
    live.rebuild(_PathView(path), [])
    pure = _PureSum(live)
    exotic = False  # an edit came before its target: positions decide, so ask the estimator itself

    def without_anchor(upto: int) -> int | float:
        return estimate_before(path, upto, fold_from) if exotic else pure.tokens()

    for pos, entry in enumerate(path):
        key = field_of(entry, "id")
        if hashable(key) and key not in first_at:
            first_at[key] = pos
        kind = field_of(entry, "type")
        message = entry.get("message") if kind == "message" else None
        if isinstance(message, dict) and message.get("role") == "assistant":
            estimate = anchor + trailing if anchor is not None else without_anchor(pos)
            usage = get_assistant_usage(message)
            provider, model = str(message.get("provider", "?")), str(message.get("model", "?"))
            window = window_of(provider, model)
            reported = calculate_context_tokens(usage) if usage is not None else None
            out.requests.append(Request(pos, reported, estimate, window, f"{provider}/{model}"))
            last_request_overflowed = message.get("stopReason") == "error" and is_context_overflow(message, window)
            if last_request_overflowed:
                out.overflows.append(pos)
        target = entry.get("targetId") if kind == "context_edit" else None
        replaced = live.messages_of(target) if kind == "context_edit" else ()
        live.append(entry, pos)
        if kind == "compaction" or (kind == "context_edit" and key == target):
            pure.resum()
        elif kind == "context_edit":
            pure.add(replaced, -1)
            pure.add(live.messages_of(target))
            pure.add(live.newest_messages())
        else:
            pure.add(live.newest_messages())
        if kind in ("compaction", "context_edit"):
            anchor = None
            if kind == "context_edit":
                target = entry.get("targetId")
                if hashable(target):
                    edit_targets.add(target)
            else:
                kept = entry.get("firstKeptEntryId")
                kept_at = first_at.get(kept, pos) if hashable(kept) else pos
                # A compaction whose id repeats an earlier one is folded at that earlier place: start over.
                fold_from = min(kept_at, pos) if first_at.get(key) == pos else 0
                out.compactions.append(CompactionMark(
                    pos, len(out.requests), entry.get("tokensBefore"), without_anchor(pos + 1),
                    last_request_overflowed, fold_from))
            continue
        if type(kind) is not str or kind not in _CONTENT:
            continue
        if hashable(field_of(entry, "id")) and entry.get("id") in edit_targets:
            anchor = None  # an edit written before its target: let the estimator sort it out
            exotic = True
            continue
        for m in entry_to_messages(entry):
            usage = get_assistant_usage(m)
            if usage is not None:
                anchor, trailing, exotic = calculate_context_tokens(usage), 0, False
            else:
                trailing += estimate_tokens(m)
    return out

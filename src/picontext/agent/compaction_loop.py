"""Compactions that cannot help: the same span twice in a row, and loops that free nothing.

Ours (`compaction.loopGuard`, on by default like the rest of the anti-thrash rules; the
reference has neither):

* **same span**: an automatic compaction whose cut is the previous compaction's
  `firstKeptEntryId` would only re-summarize the previous summary (it can happen with a split
  turn); it is skipped with a `compaction_skipped` line.
* **loop**: `LIMIT` automatic compactions within `TURNS` assistant turns, each leaving the context
  above `INEFFECTIVE` of the threshold, mean the recent context alone keeps the session at the
  threshold; automatic compaction stops with one clear message until a manual compaction or a
  model with another window.
"""

from __future__ import annotations

from typing import Any, Final

from picontext.session.projection import field_of

__all__ = ["INEFFECTIVE", "LIMIT", "TURNS", "CompactionLoopGuard", "same_span"]

LIMIT: Final = 3
TURNS: Final = 6
INEFFECTIVE: Final = 0.9


def same_span(prep: Any) -> bool:
    """The plan keeps exactly what the previous compaction kept: nothing new would be summarized."""
    previous = prep.previous_compaction
    return previous is not None and field_of(previous, "firstKeptEntryId") == prep.first_kept_entry_id


class CompactionLoopGuard:
    """Remembers the turns of recent ineffective automatic compactions."""

    def __init__(self, limit: int = LIMIT, turns: int = TURNS) -> None:
        self.limit = limit
        self.turns = turns
        self._ineffective: list[int] = []
        self._stopped_at: int | None = None
        """The threshold in force when the loop was detected (another window starts afresh)."""

    @property
    def stopped(self) -> bool:
        return self._stopped_at is not None

    def is_stopped(self, threshold: int | None) -> bool:
        if self._stopped_at is not None and threshold != self._stopped_at:
            self.reset()
        return self._stopped_at is not None

    def reset(self) -> None:
        self._ineffective.clear()
        self._stopped_at = None

    def record(self, turn: int, before: int, after: int, threshold: int) -> str | None:
        """Note one automatic compaction at assistant turn `turn`; the stop message when it
        completes a loop, else None."""
        if after <= threshold * INEFFECTIVE:
            self._ineffective.clear()
            return None
        self._ineffective = [t for t in self._ineffective if turn - t < self.turns] + [turn]
        if len(self._ineffective) < self.limit or self._stopped_at is not None:
            return None
        self._stopped_at = threshold
        return (
            f"Auto-compaction stopped: {len(self._ineffective)} compactions within {self.turns} turns each left the "
            f"context near the threshold (~{after} of {threshold} tokens), so compacting again would not help. "
            "Start a new session, switch to a model with a larger context window, or run a manual compaction "
            "(which turns auto-compaction back on)."
        )

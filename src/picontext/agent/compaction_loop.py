"""Compaction loops: several automatic compactions within a few turns that free nothing.

Ours (`compaction.loopGuard`, on by default like the rest of the anti-thrash rules; the
reference has none): `LIMIT` automatic compactions within `TURNS` assistant turns, each leaving
the context above `INEFFECTIVE` of the threshold, mean that what a compaction leaves (the kept
tail, or a summary that came out too long) keeps the session at the threshold; automatic
compaction stops with one clear message until a manual compaction or a model with another window.

(The same span is never compacted twice in a row without a loop guard: a plan whose cut is the
previous compaction's first kept entry has nothing to summarize, and `prepare_compaction`
returns None for it.)
"""

from __future__ import annotations

from typing import Final

__all__ = ["INEFFECTIVE", "LIMIT", "TURNS", "CompactionLoopGuard"]

LIMIT: Final = 3
TURNS: Final = 6
INEFFECTIVE: Final = 0.9


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

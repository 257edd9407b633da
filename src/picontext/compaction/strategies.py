"""The names of the compaction strategies and of the evaluation's scripted summarizers.

A module of constants only: the command line offers them as choices without importing what
runs them."""

from __future__ import annotations

from typing import Literal

__all__ = ["EVAL_STRATEGIES", "STRATEGIES", "SUMMARIZERS", "Strategy"]

Strategy = Literal["summary", "mask", "mask-then-summary"]
STRATEGIES: tuple[str, ...] = ("summary", "mask", "mask-then-summary")

EVAL_STRATEGIES: tuple[str, ...] = ("none", "mask", "summary-no-ledger", "summary", "mask-then-summary")
"""`none` = no compaction (the ceiling); `summary-no-ledger` is Pi's behaviour; the rest are ours."""
SUMMARIZERS: tuple[str, ...] = ("generic", "extractive")

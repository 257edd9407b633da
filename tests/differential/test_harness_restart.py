"""The shared node process: a crash fails the one request that caused it, and the next request
gets a new process (before, one crash failed every later differential test of the run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pi_reference import PiReference

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / "v1"
OVERFLOW = "pi-ai/dist/utils/overflow.js#isContextOverflow"
MESSAGE = {"role": "assistant", "stopReason": "error", "errorMessage": "prompt is too long"}


def test_a_crash_fails_one_request_and_the_harness_restarts() -> None:
    ref = PiReference()
    try:
        assert ref.call(OVERFLOW, MESSAGE) is True
        with pytest.raises(RuntimeError, match="died"):
            ref.op("harness_ops.crash")
        assert ref.call(OVERFLOW, MESSAGE) is True
    finally:
        ref.close()


def test_a_v1_load_with_colliding_ids_is_repeated(pi: PiReference) -> None:
    """The reference's v1 migration can mint one id twice (a parentId cycle that crashed node)."""
    real = sorted(FIXTURES.glob("*.jsonl"))[0]
    assert pi.op("harness_ops.loadWithOneIdCollision", str(real)) == {"attempt": 2, "unique": True}

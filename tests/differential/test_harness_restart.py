"""The shared node process: a crash fails the one request that caused it, and the next request
gets a new process (before, one crash failed every later differential test of the run)."""

from __future__ import annotations

import pytest

from conftest import PiReference

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

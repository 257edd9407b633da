from __future__ import annotations

import time

import pytest

from picontext.session import jsonl_index


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cache check happens as if well after the session files' last write (their ctime):
    a cache recorded then is trusted on its stat, not re-hashed as a racily recorded one is
    (jsonl_index.RACY_NS). Moves the clock picontext reads, not the files' timestamps."""
    monkeypatch.setattr(jsonl_index, "clock_ns", lambda: time.time_ns() + jsonl_index.RACY_NS + 1_000_000_000)

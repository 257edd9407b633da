"""Fixtures of the hardening tests: the test's PICONTEXT_DIR and a small valid session file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hostile_files import HEADER, entry, user, write_session


@pytest.fixture
def home() -> Path:
    return Path(os.environ["PICONTEXT_DIR"])


@pytest.fixture
def session(tmp_path: Path) -> Path:
    return write_session(tmp_path / "s.jsonl", [HEADER, entry("a", None, type="message", message=user("hi"))])

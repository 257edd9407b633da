"""Fixtures that talk to the Pi reference (npm package, pinned in node/package.json) through a
long-lived node process (node/harness.mjs). CI installs the package (see .ci/run); locally,
`npm ci --prefix tests/differential/node` does the same. Without node or the package these
tests fail rather than skip, because they are the proof of compatibility."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pi_reference import NODE_DIR, UNDEFINED, PiReference, ReferenceError

__all__ = ["NODE_DIR", "UNDEFINED", "PiReference", "ReferenceError"]


@pytest.fixture(scope="session")
def pi() -> Iterator[PiReference]:
    ref = PiReference()
    yield ref
    ref.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "differential" in str(item.fspath):
            item.add_marker(pytest.mark.differential)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The compaction comparison's case counts (matches, reference errors), when it ran."""
    module = sys.modules.get("test_compaction_vs_pi")
    stats = getattr(module, "STATS", None)
    if stats:
        terminalreporter.write_sep("-", "compaction vs Pi: cases compared")
        for key in sorted(stats):
            terminalreporter.write_line(f"  {key}: {stats[key]}")

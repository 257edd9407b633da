"""The differential corpus as (name, bytes): generated sessions (tests/differential/sessiongen.py),
the repository's fixtures and the real Pi sessions in ../shared/data/pi-sessions."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "differential"))
import sessiongen  # noqa: E402

SEEDS = int(os.environ.get("PICONTEXT_DIFF_SEEDS", "300"))
SHARED = [p / "shared" / "data" / "pi-sessions" for p in (REPO.parent, REPO.parent.parent)]
FILES = sorted((REPO / "tests" / "fixtures" / "sessions").rglob("*.jsonl")) + [
    f for d in SHARED if d.is_dir() for f in sorted(d.glob("*.jsonl"))
]


def corpus() -> Iterator[tuple[str, bytes, bool]]:
    """(name, file bytes, whether it is a valid session)."""
    for seed in range(SEEDS):
        g = sessiongen.generate(seed)
        yield f"gen-{seed}-{g.kind}", g.data, g.valid
    seen = set()
    for path in FILES:
        data = path.read_bytes()
        if data not in seen:  # the fixtures hold copies of the shared sessions
            seen.add(data)
            yield path.name, data, True

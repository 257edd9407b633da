from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_SESSIONS = REPO.parent / "shared" / "data" / "pi-sessions"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own PICONTEXT_DIR so nothing touches the user's real sessions."""
    home = tmp_path_factory.mktemp("picontext-home")
    monkeypatch.setenv("PICONTEXT_DIR", str(home))
    return home

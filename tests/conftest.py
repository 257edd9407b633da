from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from picontext.testing import ScriptedModelServer

REPO = Path(__file__).resolve().parent.parent
SHARED_SESSIONS = REPO.parent / "shared" / "data" / "pi-sessions"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own PICONTEXT_DIR so nothing touches the user's real sessions."""
    home = tmp_path_factory.mktemp("picontext-home")
    monkeypatch.setenv("PICONTEXT_DIR", str(home))
    return home


@pytest.fixture(scope="session")
def _model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def server(_model_server: ScriptedModelServer) -> Iterator[ScriptedModelServer]:
    """The scripted model server (real HTTP on 127.0.0.1), reset for each test; fails the test on
    unexpected requests or unused steps."""
    _model_server.reset()
    yield _model_server
    _model_server.assert_complete()

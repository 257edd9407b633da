from __future__ import annotations

from collections.abc import Iterator

import pytest

from picontext.testing import ScriptedModelServer


@pytest.fixture(scope="module")
def _server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def server(_server: ScriptedModelServer) -> Iterator[ScriptedModelServer]:
    _server.reset()
    yield _server
    _server.assert_complete()

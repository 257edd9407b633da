"""The real llama-cpp-python server for a test module: started once, stopped at the end.

Missing (not installed, no model file) is a skip on a developer's machine and a failure in CI,
where scripts/install/llama.sh must have installed it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from support.llama_server import LlamaServer, LlamaServerUnavailable


def serve_llama(n_ctx: int) -> Iterator[LlamaServer]:
    try:
        server = LlamaServer(n_ctx=n_ctx).start()
    except LlamaServerUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the real model server is part of CI: {exc}")
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()

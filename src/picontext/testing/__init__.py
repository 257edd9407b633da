"""Public test doubles for code built on picontext: the scripted model server (its home is
`picontext.scripted`; these names stay importable from here) and transcript writers
(`transcripts.py`). See docs/testing.md. The suite's own doubles (PostgreSQL, PgBouncer, a
fault-injecting proxy, a llama.cpp server) live in the repository's `tests/support/`.
"""

from __future__ import annotations

from picontext.scripted import model_server
from picontext.scripted.model_server import *  # noqa: F403  (the names code built on picontext imports from here)

__all__ = list(model_server.__all__)

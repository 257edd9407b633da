"""A scripted model: `ScriptedModelServer`, a real HTTP model server on 127.0.0.1 that replays a
script of replies and errors in the OpenAI Chat Completions, OpenAI Responses, Anthropic Messages
and Gemini dialects, and records every request. `picontext demo` plays its coding session on
one; code built on picontext tests against one without network or keys (docs/testing.md).
"""

from __future__ import annotations

from picontext.scripted import model_server
from picontext.scripted.model_server import *  # noqa: F403  (the server and its script helpers)

__all__ = list(model_server.__all__)

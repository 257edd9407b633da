"""Where `ScriptedModelServer` used to live: `picontext.scripted.model_server` under its old name,
for code that imports it from here (the very same module object)."""

from __future__ import annotations

import sys

from picontext.scripted import model_server

sys.modules[__name__] = model_server

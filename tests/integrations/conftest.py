"""The framework adapters' tests: their shared scripts live next to them; the llama.cpp
fixture is shared with tests/integration."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))

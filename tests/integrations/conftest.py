"""The framework adapters' tests: their shared scripts live next to them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

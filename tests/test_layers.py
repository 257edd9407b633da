"""Each layer imports only from itself and the layers before it (DEVELOPERS.md):
ai -> session -> compaction -> agent -> cli. `testing` (public test doubles) may use the layers
before cli, and cli may use it for `picontext demo`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "picontext"
ORDER = ["ai", "session", "compaction", "agent", "cli"]
ALLOWED = {layer: set(ORDER[: i + 1]) for i, layer in enumerate(ORDER)}
ALLOWED["testing"] = {"ai", "session", "compaction", "agent", "testing"}
ALLOWED["cli"] = ALLOWED["cli"] | {"testing", "viewer"}  # `picontext demo` runs against the scripted model server
ALLOWED["viewer"] = {"ai", "session", "compaction", "viewer"}  # the HTML export/server: shows, never computes anew
BASE = {"", "_json", "_clock", "_gc", "_files", "errors"}  # shared foundations under picontext/


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "picontext":
                found.add(parts[1] if len(parts) > 1 else "")
    return found


@pytest.mark.parametrize("layer", [*ORDER, "testing", "viewer"])
def test_layer_imports_only_earlier_layers(layer: str) -> None:
    bad = []
    for path in sorted((SRC / layer).rglob("*.py")):
        for target in _imports(path) - BASE:
            if target not in ALLOWED[layer]:
                bad.append(f"{path.relative_to(SRC)} imports picontext.{target}")
    assert not bad, "\n".join(bad)


def test_foundations_import_no_layer() -> None:
    for name in ("_json.py", "_clock.py", "_gc.py", "_files.py", "errors.py"):
        assert not (_imports(SRC / name) - BASE), name

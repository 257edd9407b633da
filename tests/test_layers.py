"""The package's import rules (docs/design.md, "Layers"):

- each layer imports only from itself and the layers before it: ai -> session -> compaction ->
  agent -> cli (`viewer` sits between compaction and cli; `scripted`, the scripted model server,
  uses only ai, and cli uses it for `picontext demo`; `testing`, the public test doubles,
  re-exports it and may use the layers before cli);
- front ends (cli, viewer, agent, compaction) reach sessions through the session repository and
  the store protocol, never a store backend (the JSONL store module, PostgreSQL, ...);
- no name starting with `_` is imported from another module of the package;
- no import cycle between the package's modules, counting imports made inside functions (they
  run too, later); imports under `if TYPE_CHECKING:` never run and are not counted.

Imports are read from the source (ast), wherever they are in a module."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "picontext"
ORDER = ["ai", "session", "compaction", "agent", "cli"]
ALLOWED = {layer: set(ORDER[: i + 1]) for i, layer in enumerate(ORDER)}
ALLOWED["scripted"] = {"ai", "scripted"}  # the scripted model server (`picontext demo`, tests of code built on us)
ALLOWED["testing"] = {"ai", "session", "compaction", "agent", "scripted", "testing"}
ALLOWED["cli"] = ALLOWED["cli"] | {"scripted", "viewer"}  # `picontext demo` runs against the scripted model server
ALLOWED["viewer"] = {"ai", "session", "compaction", "viewer"}  # the HTML export/server: shows, never computes anew
ALLOWED["integrations"] = {"ai", "session", "compaction", "agent", "integrations"}  # framework adapters, above agent
BASE = {"", "_json", "_clock", "_gc", "_files", "errors"}  # shared foundations under picontext/

FRONT_ENDS = ("cli", "viewer", "agent", "compaction", "integrations")
BACKENDS = ("picontext.session.store", "picontext.session.postgres", "picontext.session.memory")
"""Store backends (and their packages). A front end uses `picontext.session.repository` and
`picontext.session.protocol` instead."""

# Exceptions to the rules below: none, and none may be added without a reason next to each.
BACKEND_ALLOWED: set[tuple[str, str]] = set()
PRIVATE_ALLOWED: set[tuple[str, str, str]] = set()
CYCLES_ALLOWED: set[frozenset[str]] = set()


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = ["picontext", *path.relative_to(SRC).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node that can run: the bodies of `if TYPE_CHECKING:` are left out."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


@cache
def _imports(module: str) -> list[tuple[str, str | None]]:
    """(module imported from, name) of every runtime import of `module`; name None for `import x`."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, str | None]] = []
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            found.extend((source, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names)
    return [(source, name) for source, name in found if source.split(".")[0] == "picontext"]


def _targets(module: str) -> set[str]:
    """The package's modules `module` imports (a name that is a submodule counts as that module)."""
    targets = set()
    for source, name in _imports(module):
        if name is not None and f"{source}.{name}" in MODULES:
            targets.add(f"{source}.{name}")
        elif source in MODULES:
            targets.add(source)
    return targets


def _rel(module: str) -> str:
    return str(MODULES[module].relative_to(SRC))


def _under(layer: str) -> list[str]:
    return sorted(m for m in MODULES if m.split(".")[1:2] == [layer])


@pytest.mark.parametrize("layer", [*ORDER, "scripted", "testing", "viewer", "integrations"])
def test_layer_imports_only_earlier_layers(layer: str) -> None:
    bad = []
    for module in _under(layer):
        for source, _name in _imports(module):
            parts = source.split(".")
            target = parts[1] if len(parts) > 1 else ""
            if target not in BASE and target not in ALLOWED[layer]:
                bad.append(f"{_rel(module)} imports {source}")
    assert not bad, "\n".join(sorted(set(bad)))


def test_foundations_import_no_layer() -> None:
    for name in ("_json", "_clock", "_gc", "_files", "errors"):
        layers = {source.split(".")[1] if "." in source else "" for source, _ in _imports(f"picontext.{name}")}
        assert layers <= BASE, name


def _is_backend(module: str) -> bool:
    return any(module == b or module.startswith(b + ".") for b in BACKENDS)


def test_front_ends_use_the_repository_not_a_store_backend() -> None:
    found = {(_rel(module), target) for layer in FRONT_ENDS for module in _under(layer)
             for target in _targets(module) if _is_backend(target)}
    assert sorted(found - BACKEND_ALLOWED) == []
    assert sorted(BACKEND_ALLOWED - found) == [], "fixed: take these out of BACKEND_ALLOWED"


FILE_CALLS = {"os.stat", "os.lstat", "os.path.getmtime", "os.path.getsize", "os.path.getctime", "fcntl.flock",
              "fcntl.lockf"}
"""Calls that stat or lock a file by name: only a store does that to a session file."""
STORE_MODULES = {"picontext.session.store", "picontext.session.jsonl_index", "picontext.session.jsonl_columns",
                 "picontext._files"}
FILE_CALLS_ALLOWED = {
    ("session/importers/__init__.py", "os.stat"),  # other agents' transcripts, not session files
    ("session/importers/swe_agent.py", "os.stat"),  # a trajectory's time, when it has none of its own
    ("ai/auth.py", "fcntl.flock"),  # the API key file
}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def test_only_a_store_stats_or_locks_a_session_file() -> None:
    """Issue 20 item 4: listing, lookups and front ends ask a store (`modified()`, `tail()`,
    `facts()`), never the file system, about a session file."""
    found = set()
    for module, path in MODULES.items():
        if module in STORE_MODULES:
            continue
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and (name := _dotted(node)) in FILE_CALLS:  # called or passed
                found.add((_rel(module), name))
    assert sorted(found - FILE_CALLS_ALLOWED) == []
    assert sorted(FILE_CALLS_ALLOWED - found) == [], "fixed: take these out of FILE_CALLS_ALLOWED"


def test_no_private_name_crosses_a_module_line() -> None:
    found = set()
    for module in MODULES:
        for source, name in _imports(module):
            if name is None or not name.startswith("_") or name.endswith("__") or f"{source}.{name}" in MODULES:
                continue  # `from picontext import _json` imports a module, not a private name
            if source != module:
                found.add((_rel(module), source, name))
    assert sorted(found - PRIVATE_ALLOWED) == []
    assert sorted(PRIVATE_ALLOWED - found) == [], "fixed: take these out of PRIVATE_ALLOWED"


def _cycles() -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), or a module importing itself."""
    graph = {m: sorted(_targets(m)) for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1 or node in graph[node]:
                        groups.append(sorted(group))
    return groups


def test_no_import_cycles_function_level_imports_counted() -> None:
    cycles = [c for c in _cycles() if frozenset(c) not in CYCLES_ALLOWED]
    assert cycles == []


def test_no_module_is_imported_by_a_name_in_a_string() -> None:
    """`importlib.import_module("picontext...")` or `__import__` would hide an import from these rules."""
    found = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in ("import_module", "__import__"):
                    found.append(f"{_rel(module)}:{node.lineno}")
    assert found == []


def test_the_rules_see_imports_inside_functions_and_skip_type_checking_blocks(tmp_path: Path) -> None:
    """The checker itself: a function-level import is an edge, a TYPE_CHECKING one is not."""
    assert "picontext.session.manager" in _targets("picontext.cli.loading")  # inside a function today or not
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import picontext.cli\n"
                     "def f():\n    import picontext.agent\n")
    names = {n.names[0].name for n in _runtime_nodes(tree) if isinstance(n, ast.Import)}
    assert names == {"picontext.agent"}

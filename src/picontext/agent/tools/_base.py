"""What the coding tools share: a working directory, path resolution, and the tool record."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from picontext.agent.types import ToolError

SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", ".hg", ".svn"})
"""Directories grep and find never descend into."""
PATH_HELP = "Path of the file (relative to the working directory or absolute)"


def resolve(cwd: str, path: str | None) -> Path:
    """`path` (absolute, `~`-relative or relative to `cwd`) as an absolute path."""
    raw = (path or ".").strip()
    if raw.startswith("@"):  # models sometimes copy the @file mention syntax
        raw = raw[1:]
    expanded = os.path.expanduser(raw)
    joined = expanded if os.path.isabs(expanded) else os.path.join(cwd, expanded)
    return Path(os.path.normpath(joined))


def display(cwd: str, path: Path) -> str:
    """`path` relative to `cwd` when it is inside it, else absolute."""
    try:
        rel = path.relative_to(cwd)
    except ValueError:
        return str(path)
    return str(rel) if str(rel) != "." else "."


def require_dir(path: Path, given: str) -> None:
    if not path.exists():
        raise ToolError(f"Path not found: {given}")
    if not path.is_dir():
        raise ToolError(f"Not a directory: {given}")


def positive_int(args: dict[str, Any], key: str, default: int | None) -> int | None:
    value = args.get(key, default)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ToolError(f"{key} must be a positive integer, got {value!r}")
    return value


@dataclass(slots=True)
class ToolBase:
    """Name, label and description are class attributes of each tool; `cwd` is per instance."""

    cwd: str

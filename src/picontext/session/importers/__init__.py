"""Other agents' transcripts as Pi v3 sessions (`picontext import`, docs/import.md).

    detect_format(path)                     "claude-code" | "swe-agent", or ImportFailed
    import_files(paths, fmt, out_dir=...)   every session written, or ImportFailed and none

Formats: `claude_code.py` (Claude Code 1.x/2.x JSONL, streamed line by line) and `swe_agent.py`
(SWE-agent `.traj`). All sessions of one call are written to temporary files and put in place
together at the end (`output.ImportBatch`): a bad line in the last file leaves nothing behind.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from picontext.session.importers.claude_code import (
    find_sidechains,
    import_claude_code,
    looks_like_claude_code,
    read_first_line,
)
from picontext.session.importers.output import ImportBatch, ImportFailed, SessionSink
from picontext.session.importers.swe_agent import import_swe_agent

if TYPE_CHECKING:
    from picontext.session.repository import SessionRepository

__all__ = ["FORMATS", "ImportFailed", "ImportedSession", "detect_format", "import_files"]

FORMATS = ("claude-code", "swe-agent")


@dataclass(frozen=True, slots=True)
class ImportedSession:
    """One written session: where it came from and where it is."""

    source: str
    format: str
    path: str
    session_id: str
    entries: int
    parent_session: str | None


def _check_file(path: str) -> None:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ImportFailed(path, "no such file") from None
    except OSError as exc:
        raise ImportFailed(path, f"cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise ImportFailed(path, "not a regular file")


def detect_format(path: str) -> str:
    """The format of `path` from its name and first line; ImportFailed for anything else."""
    _check_file(path)
    if path.endswith(".traj"):
        return "swe-agent"
    with open(path, "rb") as f:
        head = f.read(1 << 16).lstrip()
    if not head:
        raise ImportFailed(path, "empty file (nothing to import)")
    if head.startswith(b"{") and b"\n" in head:
        try:
            first = read_first_line(path)
        except OSError as exc:
            raise ImportFailed(path, f"cannot read: {exc.strerror}") from None
        if isinstance(first, dict) and first.get("type") == "session" and "id" in first:
            raise ImportFailed(path, "is a Pi session already: open it directly (nothing to import)", 1)
        if looks_like_claude_code(first):
            return "claude-code"
    if head.startswith(b"{") and (b'"history"' in head or b'"trajectory"' in head or b'"environment"' in head):
        return "swe-agent"
    raise ImportFailed(path, "not a Claude Code transcript or a SWE-agent trajectory (give --from to say which)", 1)


def _order(paths: Sequence[str], fmt: str) -> list[tuple[str, str, str | None]]:
    """(path, format, parent path) in reading order: each Claude Code session before its
    subagents (found beside it), each file once."""
    plan: list[tuple[str, str, str | None]] = []
    seen: set[str] = set()
    for given in paths:
        path = os.path.abspath(given)
        if path in seen:
            continue
        kind = detect_format(path) if fmt == "auto" else fmt
        _check_file(path)
        if kind == "claude-code" and os.path.basename(path).startswith("agent-") and any(
                path in find_sidechains(p) for p, k, _parent in plan if k == "claude-code"):
            continue  # read with its parent already
        seen.add(path)
        plan.append((path, kind, None))
        if kind == "claude-code":
            for side in find_sidechains(path):
                if side not in seen:
                    seen.add(side)
                    plan.append((side, kind, path))
    return plan


def import_files(paths: Sequence[str], fmt: str = "auto", *, out_dir: str | None = None,
                 force: bool = False, repository: SessionRepository | None = None) -> list[ImportedSession]:
    """Import every file (with the subagent transcripts found beside Claude Code sessions); all
    sessions are written, or none (ImportFailed names the file and line). They go to `out_dir`
    when given, else to `repository` (default: session files under $PICONTEXT_DIR)."""
    if fmt not in ("auto", *FORMATS):
        raise ImportFailed("import", f"unknown format {fmt!r}; expected one of auto, {', '.join(FORMATS)}")
    written: list[tuple[str, str, SessionSink]] = []
    with ImportBatch(out_dir, force, repository) as batch:
        parents: dict[str, tuple[str, dict[str, str]]] = {}
        for path, kind, parent in _order(paths, fmt):
            if kind == "swe-agent":
                written += [(path, kind, sink) for sink in import_swe_agent(path, batch)]
                continue
            parent_path, links = parents.get(parent, (None, {})) if parent else (None, {})
            reader = import_claude_code(path, batch, parent_path=parent_path, agent_links=links)
            sinks = reader.written
            if sinks:
                parents[path] = (sinks[0].path, reader.agent_links)
            written += [(path, kind, sink) for sink in sinks]
        batch.commit()
    return [ImportedSession(path, kind, sink.path, sink.session_id, sink.entries, sink.header.get("parentSession"))
            for path, kind, sink in written]

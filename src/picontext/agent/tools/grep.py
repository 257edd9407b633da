"""`grep{pattern, path?, glob?, ignoreCase?, literal?, context?, limit?}`: search file contents.

Output lines are `file:line: text` for matches and `file-line- text` for context lines, files in
sorted order. Binary files and SKIP_DIRS are skipped; long lines are cut at 500 characters.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, ClassVar

from picontext.agent.tools._base import ToolBase, positive_int, resolve
from picontext.agent.tools.find import glob_match, walk_files
from picontext.agent.tools.truncate import GREP_MAX_LINE_LENGTH, truncate_head, truncate_line
from picontext.agent.types import AgentToolResult, ToolError, ToolUpdate
from picontext.ai.event_stream import AbortSignal

DEFAULT_LIMIT = 100


def _lines_of(path: Path) -> list[str] | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace").splitlines()


class GrepTool(ToolBase):
    name: ClassVar[str] = "grep"
    label: ClassVar[str] = "grep"
    description: ClassVar[str] = (
        "Search file contents for a regular expression (or literal text with literal=true). Returns "
        f"'file:line: text' per match, at most {DEFAULT_LIMIT} matches unless limit is given; lines longer than "
        f"{GREP_MAX_LINE_LENGTH} characters are cut. Filter files with glob (e.g. '*.py')."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression (Python syntax) or literal text"},
            "path": {"type": "string", "description": "File or directory to search (default: the working directory)"},
            "glob": {"type": "string", "description": "Only search files matching this glob, e.g. '*.ts'"},
            "ignoreCase": {"type": "boolean", "description": "Case-insensitive search"},
            "literal": {"type": "boolean", "description": "Treat pattern as literal text"},
            "context": {"type": "integer", "description": "Lines of context around each match"},
            "limit": {"type": "integer", "description": f"Maximum number of matches (default {DEFAULT_LIMIT})"},
        },
        "required": ["pattern"],
    }

    async def execute(
        self, call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult:
        return await asyncio.to_thread(self._grep, args, signal)

    def _regex(self, args: dict[str, Any]) -> re.Pattern[str]:
        pattern: str = args["pattern"]
        source = re.escape(pattern) if args.get("literal") else pattern
        try:
            return re.compile(source, re.IGNORECASE if args.get("ignoreCase") else 0)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {pattern!r}: {exc}; set literal=true to search text") from None

    def _grep(self, args: dict[str, Any], signal: AbortSignal) -> AgentToolResult:
        regex = self._regex(args)
        given = args.get("path") or "."
        root = resolve(self.cwd, given)
        limit = positive_int(args, "limit", DEFAULT_LIMIT) or DEFAULT_LIMIT
        context = args.get("context") or 0
        if not isinstance(context, int) or context < 0:
            raise ToolError(f"context must be a non-negative integer, got {context!r}")
        if not root.exists():
            raise ToolError(f"Path not found: {given}")
        if root.is_file():
            files = [(root, root.name)]
        else:
            glob = args.get("glob")
            files = [(root / rel, rel) for rel in walk_files(root) if not glob or glob_match(glob, rel)]
        out: list[str] = []
        matches = 0
        cut_lines = False
        for path, rel in files:
            if signal.aborted:
                raise ToolError("Search aborted")
            lines = _lines_of(path)
            if lines is None:
                continue
            shown = -1
            for number, line in enumerate(lines, 1):
                if not regex.search(line):
                    continue
                if matches >= limit:
                    break
                matches += 1
                first = max(number - context, shown + 1, 1)
                for ctx in range(first, number + context + 1):
                    if ctx > len(lines):
                        break
                    if ctx <= shown:
                        continue
                    text, was_cut = truncate_line(lines[ctx - 1])
                    cut_lines = cut_lines or was_cut
                    sep = ":" if ctx == number else "-"
                    out.append(f"{rel}{sep}{ctx}{sep} {text}")
                    shown = ctx
            if matches >= limit:
                break
        if not out:
            return AgentToolResult.text("No matches found")
        cut = truncate_head("\n".join(out))
        notes = []
        if matches >= limit:
            notes.append(f"stopped at {limit} matches; use limit or a narrower pattern")
        if cut.truncated:
            notes.append("output cut at the size limit")
        if cut_lines:
            notes.append(f"some lines cut at {GREP_MAX_LINE_LENGTH} characters; use read to see them")
        text = cut.content + ("\n\n[" + ". ".join(notes) + "]" if notes else "")
        return AgentToolResult.text(text, {"matchLimitReached": True} if matches >= limit else None)

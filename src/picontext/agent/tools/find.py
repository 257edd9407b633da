"""`find{pattern, path?, limit?}`: files whose name (or relative path, when the pattern has a
`/`) matches a glob; `**` spans directories. `.git`, `node_modules` and the like are skipped."""

from __future__ import annotations

import asyncio
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from picontext.agent.tools._base import SKIP_DIRS, ToolBase, positive_int, require_dir, resolve
from picontext.agent.tools.truncate import truncate_head
from picontext.agent.types import AgentToolResult, ToolUpdate
from picontext.ai.event_stream import AbortSignal

DEFAULT_LIMIT = 1000


@lru_cache(maxsize=64)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a glob: `*` and `?` stay within one path segment, `**/` spans segments,
    `{a,b}` alternates, `[...]` is a character class."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                i = end
        elif c == "{":
            end = pattern.find("}", i + 1)
            if end < 0:
                out.append(re.escape(c))
            else:
                alts = pattern[i + 1 : end].split(",")
                out.append("(?:" + "|".join(glob_regex(a).pattern[:-2] for a in alts) + ")")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def glob_match(pattern: str, rel_path: str) -> bool:
    target = rel_path if "/" in pattern else rel_path.rsplit("/", 1)[-1]
    return glob_regex(pattern).match(target) is not None


def walk_files(root: Path) -> list[str]:
    """Relative paths of the files under `root`, sorted, skipping SKIP_DIRS."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        rel_dir = os.path.relpath(dirpath, root)
        for name in filenames:
            found.append(name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/"))
    return sorted(found)


class FindTool(ToolBase):
    name: ClassVar[str] = "find"
    label: ClassVar[str] = "find"
    description: ClassVar[str] = (
        "Find files by glob pattern, e.g. '*.py', 'src/**/*.ts', '*.{js,ts}'. Without a '/', the pattern "
        "matches file names at any depth. Paths are relative to the searched directory. "
        f"At most {DEFAULT_LIMIT} results unless limit is given."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern"},
            "path": {"type": "string", "description": "Directory to search (default: the working directory)"},
            "limit": {"type": "integer", "description": f"Maximum number of results (default {DEFAULT_LIMIT})"},
        },
        "required": ["pattern"],
    }

    async def execute(
        self, call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult:
        return await asyncio.to_thread(self._find, args)

    def _find(self, args: dict[str, Any]) -> AgentToolResult:
        pattern: str = args["pattern"]
        given = args.get("path") or "."
        root = resolve(self.cwd, given)
        limit = positive_int(args, "limit", DEFAULT_LIMIT) or DEFAULT_LIMIT
        require_dir(root, given)
        matches = [p for p in walk_files(root) if glob_match(pattern, p)]
        if not matches:
            return AgentToolResult.text(f"No files found matching pattern {pattern!r}")
        cut = truncate_head("\n".join(matches[:limit]))
        text = cut.content
        if len(matches) > limit:
            text += f"\n\n[{limit} of {len(matches)} results shown; use limit or a narrower pattern]"
        elif cut.truncated:
            text += "\n\n[output cut at the size limit; use a narrower pattern]"
        details = {"resultLimitReached": True} if len(matches) > limit else None
        return AgentToolResult.text(text, details)

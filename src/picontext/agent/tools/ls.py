"""`ls{path?, limit?}`: a directory's entries, sorted case-insensitively, directories marked `/`."""

from __future__ import annotations

import asyncio
import os
from typing import Any, ClassVar

from picontext.agent.tools._base import ToolBase, positive_int, require_dir, resolve
from picontext.agent.tools.truncate import truncate_head
from picontext.agent.types import AgentToolResult, ToolError, ToolUpdate
from picontext.ai.event_stream import AbortSignal

DEFAULT_LIMIT = 500


class LsTool(ToolBase):
    name: ClassVar[str] = "ls"
    label: ClassVar[str] = "ls"
    description: ClassVar[str] = (
        "List a directory (default: the working directory). Entries are sorted alphabetically, "
        f"directories end with '/', dotfiles are included. At most {DEFAULT_LIMIT} entries unless limit is given."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Directory to list (default: the working directory)"},
            "limit": {"type": "integer", "description": f"Maximum number of entries (default {DEFAULT_LIMIT})"},
        },
    }

    async def execute(
        self, call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult:
        return await asyncio.to_thread(self._ls, args)

    def _ls(self, args: dict[str, Any]) -> AgentToolResult:
        given = args.get("path") or "."
        path = resolve(self.cwd, given)
        limit = positive_int(args, "limit", DEFAULT_LIMIT) or DEFAULT_LIMIT
        require_dir(path, given)
        try:
            names = sorted(os.listdir(path), key=lambda n: (n.lower(), n))
        except OSError as exc:
            raise ToolError(f"Cannot list {given}: {exc.strerror or exc}") from None
        if not names:
            return AgentToolResult.text("(empty directory)")
        lines = [n + "/" if (path / n).is_dir() else n for n in names[:limit]]
        cut = truncate_head("\n".join(lines))
        text = cut.content
        notes = []
        if len(names) > limit:
            notes.append(f"{limit} of {len(names)} entries shown; use limit={len(names)} to see all")
        if cut.truncated:
            notes.append("output cut at the size limit")
        if notes:
            text += "\n\n[" + ". ".join(notes) + "]"
        return AgentToolResult.text(text, {"entryLimitReached": len(names) > limit} if len(names) > limit else None)

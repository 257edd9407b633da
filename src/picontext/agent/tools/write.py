"""`write{path, content}`: create or overwrite a file (parent directories are created)."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from picontext.agent.tools._base import PATH_HELP, ToolBase, resolve
from picontext.agent.types import AgentToolResult, ToolError, ToolUpdate
from picontext.ai.event_stream import AbortSignal


class WriteTool(ToolBase):
    name: ClassVar[str] = "write"
    label: ClassVar[str] = "write"
    description: ClassVar[str] = (
        "Write content to a file. Creates the file if it does not exist and overwrites it if it does; "
        "parent directories are created automatically."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": PATH_HELP},
            "content": {"type": "string", "description": "The full content to write"},
        },
        "required": ["path", "content"],
    }

    async def execute(
        self, call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult:
        return await asyncio.to_thread(self._write, args["path"], args["content"])

    def _write(self, given: str, content: str) -> AgentToolResult:
        path = resolve(self.cwd, given)
        if path.is_dir():
            raise ToolError(f"{given} is a directory; give a file path")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            data = content.encode("utf-8")
            path.write_bytes(data)
        except OSError as exc:
            raise ToolError(f"Cannot write {given}: {exc.strerror or exc}") from None
        return AgentToolResult.text(f"Successfully wrote {len(data)} bytes to {given}")

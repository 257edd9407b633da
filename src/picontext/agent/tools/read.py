"""`read{path, offset?, limit?}`: a text file's lines (or an image), truncated with a hint to go on."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any, ClassVar

from picontext._files import FileTooLarge, NotRegularFile, read_regular
from picontext.agent.tools._base import PATH_HELP, ToolBase, positive_int, resolve
from picontext.agent.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_head
from picontext.agent.types import AgentToolResult, ToolError, ToolUpdate
from picontext.ai.event_stream import AbortSignal

IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


# Read at most this much: a whole file is loaded to count its lines, and a model asking for a
# multi-gigabyte log must not take the process down with it.
MAX_READ_BYTES = 32 * 1024 * 1024


def _read_capped(path: Path, given: str) -> bytes:
    """The file's bytes, refusing what is not a regular file (a FIFO would block forever, a
    device never ends; `_files.read_regular` checks before opening) and files over MAX_READ_BYTES."""
    try:
        return read_regular(str(path), MAX_READ_BYTES)
    except NotRegularFile:
        raise ToolError(f"{given} is not a regular file (a FIFO, device or socket); it was not read") from None
    except FileTooLarge:
        raise ToolError(f"{given} is larger than {format_size(MAX_READ_BYTES)}; read parts of it with bash "
                        f"(e.g. sed -n '1,200p' {given})") from None
    except OSError as exc:
        raise ToolError(f"Cannot read {given}: {exc.strerror or exc}") from None


class ReadTool(ToolBase):
    name: ClassVar[str] = "read"
    label: ClassVar[str] = "read"
    description: ClassVar[str] = (
        f"Read a file. Text output is cut at {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB, "
        "whichever comes first; use offset/limit to read more of a large file. "
        "Images (png, jpg, gif, webp) are returned as attachments."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": PATH_HELP},
            "offset": {"type": "integer", "description": "Line number to start from (1-based)"},
            "limit": {"type": "integer", "description": "Maximum number of lines to read"},
        },
        "required": ["path"],
    }

    async def execute(
        self, call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult:
        return await asyncio.to_thread(self._read, args)

    def _read(self, args: dict[str, Any]) -> AgentToolResult:
        given = args["path"]
        path = resolve(self.cwd, given)
        offset = positive_int(args, "offset", 1) or 1
        limit = positive_int(args, "limit", None)
        if not path.exists():
            raise ToolError(f"File not found: {given}")
        if path.is_dir():
            raise ToolError(f"{given} is a directory; use ls to list it")
        mime = IMAGE_TYPES.get(path.suffix.lower())
        data = _read_capped(path, given)
        if mime is not None:
            return AgentToolResult(
                [
                    {"type": "text", "text": f"Read image file [{mime}]"},
                    {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime},
                ],
            )
        if b"\0" in data[:8192]:
            raise ToolError(f"{given} looks like a binary file ({format_size(len(data))}); use bash to inspect it")
        return self._text(given, data.decode("utf-8", errors="replace"), offset, limit)

    def _text(self, given: str, text: str, offset: int, limit: int | None) -> AgentToolResult:
        lines = text.split("\n")
        if len(lines) > 1 and lines[-1] == "":
            lines.pop()
        total = len(lines)
        if offset > max(total, 1):
            raise ToolError(f"Offset {offset} is beyond the end of {given} ({total} lines)")
        start = offset - 1
        selected = lines[start : start + limit] if limit is not None else lines[start:]
        cut = truncate_head("\n".join(selected))
        end_line = start + cut.output_lines
        if cut.first_line_exceeds_limit:
            size = format_size(len(selected[0].encode("utf-8")))
            out = (
                f"[Line {offset} is {size}, over the {format_size(DEFAULT_MAX_BYTES)} limit. "
                f"Use bash: sed -n '{offset}p' {given} | head -c {DEFAULT_MAX_BYTES}]"
            )
        elif cut.truncated:
            out = (
                f"{cut.content}\n\n[Showing lines {offset}-{end_line} of {total}. "
                f"Use offset={end_line + 1} to continue.]"
            )
        elif limit is not None and start + len(selected) < total:
            remaining = total - (start + len(selected))
            out = (
                f"{cut.content}\n\n[{remaining} more lines in file. "
                f"Use offset={start + len(selected) + 1} to continue.]"
            )
        else:
            out = cut.content
        details = {"truncation": cut.as_details()} if cut.truncated else None
        return AgentToolResult.text(out, details)

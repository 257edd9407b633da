"""`edit{path, oldText, newText}`: replace one exact, unique occurrence of `oldText`.

Matching is exact (whitespace included). Line endings are compared as `\\n`, so a CRLF file can
be edited with LF text; the file keeps its own line endings and a leading BOM.
"""

from __future__ import annotations

import asyncio
import difflib
from typing import Any, ClassVar

from picontext.agent.tools._base import PATH_HELP, ToolBase, resolve
from picontext.agent.types import AgentToolResult, ToolError, ToolUpdate
from picontext.ai.event_stream import AbortSignal

BOM = "\ufeff"


def _normalize(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def unified_diff(before: str, after: str, name: str, context: int = 3) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{name}", f"b/{name}", n=context
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


class EditTool(ToolBase):
    name: ClassVar[str] = "edit"
    label: ClassVar[str] = "edit"
    description: ClassVar[str] = (
        "Edit a file by replacing exact text. oldText must match exactly one place in the file, "
        "including whitespace and indentation; include enough surrounding lines to make it unique."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": PATH_HELP},
            "oldText": {"type": "string", "description": "Exact text to find and replace"},
            "newText": {"type": "string", "description": "Text to put in its place"},
        },
        "required": ["path", "oldText", "newText"],
    }

    async def execute(
        self, call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult:
        return await asyncio.to_thread(self._edit, args["path"], args["oldText"], args["newText"])

    def _edit(self, given: str, old_text: str, new_text: str) -> AgentToolResult:
        path = resolve(self.cwd, given)
        if not path.exists():
            raise ToolError(f"File not found: {given}")
        if path.is_dir():
            raise ToolError(f"{given} is a directory, not a file")
        if old_text == "":
            raise ToolError("oldText must not be empty; use write to create or overwrite a whole file")
        try:
            raw = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{given} is not a UTF-8 text file") from None
        except OSError as exc:
            raise ToolError(f"Cannot read {given}: {exc.strerror or exc}") from None
        bom = BOM if raw.startswith(BOM) else ""
        body = raw[len(bom) :]
        crlf = "\r\n" in body
        text, old, new = _normalize(body), _normalize(old_text), _normalize(new_text)
        count = text.count(old)
        if count == 0:
            raise ToolError(
                f"Could not find the exact text in {given}. oldText must match exactly, including "
                "whitespace, indentation and line breaks; read the file again and copy the text."
            )
        if count > 1:
            raise ToolError(
                f"Found {count} occurrences of oldText in {given}. It must match exactly one place; "
                "include more surrounding lines to make it unique."
            )
        if old == new:
            raise ToolError(f"oldText and newText are identical; {given} was not changed")
        index = text.index(old)
        updated = text[:index] + new + text[index + len(old) :]
        out = bom + (updated.replace("\n", "\r\n") if crlf else updated)
        try:
            path.write_bytes(out.encode("utf-8"))
        except OSError as exc:
            raise ToolError(f"Cannot write {given}: {exc.strerror or exc}") from None
        first_changed_line = text.count("\n", 0, index) + 1
        details = {"diff": unified_diff(text, updated, given), "firstChangedLine": first_changed_line}
        return AgentToolResult.text(f"Successfully replaced text in {given}.", details)

"""`bash{command, timeout?}`: run a shell command in the working directory.

stdout and stderr are merged. The model sees at most the last 2000 lines / 50KB; when more was
printed, the whole output is kept in a temporary file whose path is in the result text and in
`details.fullOutputPath`. A timeout or an abort kills the whole process group. A non-zero exit
status, a timeout and an abort are error results that still carry the output.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal as signals
import tempfile
from typing import IO, Any, ClassVar

from picontext.agent.tools._base import ToolBase
from picontext.agent.tools.truncate import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, format_size, truncate_tail
from picontext.agent.types import AgentToolResult, ToolError, ToolUpdate
from picontext.ai.event_stream import AbortSignal, wait_unless_aborted

_EXIT_GRACE = 0.5  # seconds to keep reading after the shell exited (background children may hold the pipe)


class _Output:
    """Everything a command printed: in memory, spilled to a temp file once it outgrows the limit."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.file: IO[bytes] | None = None
        self.path: str | None = None
        self.total_bytes = 0
        self.newlines = 0
        self.ends_with_newline = False

    def add(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        self.newlines += chunk.count(b"\n")
        self.ends_with_newline = chunk.endswith(b"\n")
        self.buffer += chunk
        if self.file is None and len(self.buffer) > DEFAULT_MAX_BYTES:
            fd, self.path = tempfile.mkstemp(prefix="picontext-bash-", suffix=".log")
            self.file = os.fdopen(fd, "wb")
            self.file.write(self.buffer)
        elif self.file is not None:
            self.file.write(chunk)
        if self.file is not None and len(self.buffer) > 4 * DEFAULT_MAX_BYTES:
            del self.buffer[: len(self.buffer) - 2 * DEFAULT_MAX_BYTES]  # the tail is all we show

    def close(self) -> None:
        if self.file is not None:
            self.file.close()

    def save(self) -> str:
        """The path of a file holding the whole output (written now if it was not spilled yet)."""
        if self.path is None:
            fd, self.path = tempfile.mkstemp(prefix="picontext-bash-", suffix=".log")
            with os.fdopen(fd, "wb") as f:
                f.write(self.buffer)
        return self.path

    @property
    def total_lines(self) -> int:
        return self.newlines + (0 if self.ends_with_newline or not self.total_bytes else 1)

    def text(self) -> str:
        return self.buffer.decode("utf-8", errors="replace")


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signals.SIGKILL)


class BashTool(ToolBase):
    name: ClassVar[str] = "bash"
    label: ClassVar[str] = "bash"
    description: ClassVar[str] = (
        "Run a bash command in the working directory; stdout and stderr are merged. Output is cut to the "
        f"last {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB; the full output is then saved to a "
        "file whose path is given. Optional timeout in seconds."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command to run"},
            "timeout": {"type": "number", "description": "Timeout in seconds (optional, no timeout by default)"},
        },
        "required": ["command"],
    }

    async def execute(
        self, call_id: str, args: dict[str, Any], signal: AbortSignal, on_update: ToolUpdate
    ) -> AgentToolResult:
        command: str = args["command"]
        timeout = args.get("timeout")
        if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
            raise ToolError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if not os.path.isdir(self.cwd):  # noqa: ASYNC240 (one stat, before any await)
            raise ToolError(f"Working directory does not exist: {self.cwd}")
        shell = shutil.which("bash") or "/bin/sh"
        proc = await asyncio.create_subprocess_exec(
            shell,
            "-c",
            command,
            cwd=self.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        output = _Output()
        try:
            outcome = await self._wait(proc, output, timeout, signal, on_update)
        finally:
            if proc.returncode is None:
                _kill(proc.pid)
                await proc.wait()
            output.close()
        return self._result(output, proc.returncode, outcome, timeout)

    async def _wait(
        self,
        proc: asyncio.subprocess.Process,
        output: _Output,
        timeout: float | None,  # noqa: ASYNC109
        signal: AbortSignal,
        on_update: ToolUpdate,
    ) -> str:
        """'exit', 'timeout' or 'aborted', once the process is gone and its output read."""
        assert proc.stdout is not None
        stdout = proc.stdout

        async def pump() -> None:
            while chunk := await stdout.read(65536):
                output.add(chunk)
                on_update(AgentToolResult.text(truncate_tail(output.text()).content))

        reader = asyncio.ensure_future(pump())
        exited = asyncio.ensure_future(proc.wait())
        try:
            finished = await wait_unless_aborted(exited, signal, timeout=timeout)
            outcome = "exit" if finished else "aborted" if signal.aborted else "timeout"
            if outcome != "exit":
                _kill(proc.pid)
                await exited
            await asyncio.wait({reader}, timeout=_EXIT_GRACE)
            return outcome
        finally:
            for task in (reader, exited):
                task.cancel()
            await asyncio.gather(reader, exited, return_exceptions=True)

    def _result(self, output: _Output, code: int | None, outcome: str, timeout: float | None) -> AgentToolResult:
        cut = truncate_tail(output.text())
        text = cut.content or "(no output)"
        details: dict[str, Any] = {}
        if cut.truncated:
            total = output.total_lines
            details["truncation"] = {**cut.as_details(), "totalLines": total, "totalBytes": output.total_bytes}
            details["fullOutputPath"] = output.save()
            limit = f"{format_size(DEFAULT_MAX_BYTES)} limit" if cut.truncated_by == "bytes" else "line limit"
            text += (
                f"\n\n[Showing lines {total - cut.output_lines + 1}-{total} of {total} ({limit}). "
                f"Full output: {details['fullOutputPath']}]"
            )
        if outcome == "timeout":
            raise ToolError(f"{text}\n\nCommand timed out after {timeout:g} seconds")
        if outcome == "aborted":
            raise ToolError(f"{text}\n\nCommand aborted")
        if code:
            raise ToolError(f"{text}\n\nCommand exited with code {code}")
        return AgentToolResult.text(text, details or None)

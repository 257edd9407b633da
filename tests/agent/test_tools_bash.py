# ruff: noqa: ASYNC240  (tests read the files the tool wrote)
from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tool_helpers import call, text_of

from picontext.agent.tools import BashTool
from picontext.agent.types import AgentToolResult, ToolError
from picontext.ai.event_stream import AbortSignal


async def test_runs_in_working_directory(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("x")
    result = await call(BashTool(str(tmp_path)), command="pwd; ls; echo err >&2")
    assert not result.is_error
    assert text_of(result) == f"{os.path.realpath(tmp_path)}\nmarker.txt\nerr\n"


async def test_nonzero_exit_is_an_error_with_output(tmp_path: Path) -> None:
    result = await call(BashTool(str(tmp_path)), command="echo partial; exit 3")
    assert result.is_error
    assert text_of(result) == "partial\n\n\nCommand exited with code 3"


async def test_no_output(tmp_path: Path) -> None:
    assert text_of(await call(BashTool(str(tmp_path)), command="true")) == "(no output)"


async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    result = await call(BashTool(str(tmp_path)), command="echo started; sleep 30 & sleep 30", timeout=0.5)
    assert result.is_error
    assert text_of(result).startswith("started")
    assert text_of(result).endswith("Command timed out after 0.5 seconds")


async def test_long_output_truncated_with_full_output_file(tmp_path: Path) -> None:
    result = await call(BashTool(str(tmp_path)), command="seq 1 5000")
    text = text_of(result)
    assert not result.is_error
    assert text.splitlines()[0] == "3001"
    assert "[Showing lines 3001-5000 of 5000 (line limit). Full output: " in text
    full = Path(result.details["fullOutputPath"])
    assert full.read_text().splitlines() == [str(i) for i in range(1, 5001)]
    assert str(full) in text
    full.unlink()


async def test_huge_output_spills_to_file_and_keeps_tail(tmp_path: Path) -> None:
    cmd = "python3 -c \"import sys; [sys.stdout.write('x'*99 + '\\n') for _ in range(20000)]; print('END')\""
    result = await call(BashTool(str(tmp_path)), command=cmd)
    text = text_of(result)
    assert text.split("\n\n[")[0].endswith("END")
    assert "(50.0KB limit)" in text and "of 20001" in text
    full = Path(result.details["fullOutputPath"])
    assert full.stat().st_size == 20000 * 100 + 4
    full.unlink()


async def test_abort_kills_the_command(tmp_path: Path) -> None:
    signal = AbortSignal()
    started = asyncio.Event()

    def on_update(_partial: AgentToolResult) -> None:
        started.set()

    tool = BashTool(str(tmp_path))
    task = asyncio.ensure_future(tool.execute("c", {"command": "echo ready; sleep 30"}, signal, on_update))
    await started.wait()
    signal.abort()
    try:
        await asyncio.wait_for(task, 5)
        raise AssertionError("expected an error")
    except ToolError as exc:
        assert str(exc) == "ready\n\n\nCommand aborted"


async def test_bad_timeout_and_missing_cwd(tmp_path: Path) -> None:
    assert "timeout must be" in text_of(await call(BashTool(str(tmp_path)), command="true", timeout=0))
    gone = await call(BashTool(str(tmp_path / "gone")), command="true")
    assert gone.is_error and "Working directory does not exist" in text_of(gone)

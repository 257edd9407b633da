"""The read tool refuses FIFOs and devices without blocking, and caps how much it reads."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from tool_helpers import call, text_of

from picontext.agent.tools import ReadTool
from picontext.agent.tools import read as read_module


async def test_read_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    try:
        result = await asyncio.wait_for(call(ReadTool(str(tmp_path)), path="pipe.txt"), 20)
    except TimeoutError:
        # Release the blocked reader thread so the test fails instead of hanging the run.
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        raise
    assert result.is_error and "not a regular file" in text_of(result)


async def test_read_refuses_a_device(tmp_path: Path) -> None:
    (tmp_path / "dev.txt").symlink_to("/dev/null")
    result = await call(ReadTool(str(tmp_path)), path="dev.txt")
    assert result.is_error and "not a regular file" in text_of(result)


async def test_read_caps_the_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert read_module.MAX_READ_BYTES == 32 * 1024 * 1024  # docs/hardening.md: files over 32 MB are refused
    monkeypatch.setattr(read_module, "MAX_READ_BYTES", 1000, raising=False)
    (tmp_path / "big.log").write_text("line\n" * 400)  # 2000 bytes
    result = await call(ReadTool(str(tmp_path)), path="big.log")
    assert result.is_error and "larger than" in text_of(result) and "sed -n" in text_of(result)
    (tmp_path / "small.log").write_text("line\n" * 100)
    result = await call(ReadTool(str(tmp_path)), path="small.log")
    assert not result.is_error and text_of(result).count("line") == 100

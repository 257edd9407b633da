"""docs/cli.md: on a terminal, output taller than the screen goes through `$PAGER`, default
`less -FRX`; `--no-pager`, or output that fits, is written directly."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from picontext.cli import render


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _pager_command(monkeypatch: pytest.MonkeyPatch, lines: int, *, no_pager: bool = False) -> list[str]:
    """Print `lines` lines to a 10-line terminal; the pager command lines that were started."""
    started: list[str] = []

    def popen(command: str, **_: Any) -> Any:
        started.append(command)
        raise OSError("no pager here")  # paged() then writes the text itself

    monkeypatch.setattr(render.subprocess, "Popen", popen)
    monkeypatch.setattr(render.sys, "stdin", _Tty())
    monkeypatch.setattr(render.sys, "stdout", io.StringIO())
    console = Console(file=io.StringIO(), force_terminal=True, height=10, width=80)
    with render.paged(console, no_pager=no_pager) as out:
        for n in range(lines):
            out.print(f"line {n}")
    return started


def test_tall_output_goes_through_less_frx_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PAGER", raising=False)
    assert _pager_command(monkeypatch, 50) == ["less -FRX"]


def test_pager_names_the_pager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGER", "more")
    assert _pager_command(monkeypatch, 50) == ["more"]


def test_short_output_or_no_pager_is_written_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PAGER", raising=False)
    assert _pager_command(monkeypatch, 3) == []
    assert _pager_command(monkeypatch, 50, no_pager=True) == []

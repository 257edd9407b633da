"""What docs/cli.md promises about the chat's display, checked on the functions that draw it
(the tmux tests in test_cli_interactive.py cover the rest of the screen)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from picontext.cli.modes.interactive import usage_style
from picontext.cli.modes.transcript import redraw


@pytest.mark.parametrize(("percent", "style"), [
    (None, "dim"), (0.0, "dim"), (70.0, "dim"), (70.1, "yellow"), (90.0, "yellow"), (90.1, "bold red"),
])
def test_footer_is_yellow_above_70_and_red_above_90_percent(percent: float | None, style: str) -> None:
    assert usage_style(percent) == style


def test_a_redrawn_reply_is_cut_after_12_lines() -> None:
    reply: dict[str, Any] = {"role": "assistant", "stopReason": "stop",
                             "content": [{"type": "text", "text": "\n".join(f"line {n}" for n in range(1, 21))}]}
    branch = [{"type": "message", "id": "u", "message": {"role": "user", "content": "go", "timestamp": 1}},
              {"type": "message", "id": "a", "message": reply}]
    out = io.StringIO()
    redraw(Console(file=out, width=100, color_system=None), branch)
    shown = out.getvalue()
    assert "line 12" in shown and "line 13" not in shown
    assert "… +8 lines" in shown

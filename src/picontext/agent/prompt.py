"""The default system prompt of the coding agent (our own wording; Pi builds a similar one)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from picontext.agent.types import AgentTool


def default_system_prompt(cwd: str, tools: Sequence[AgentTool], today: date | None = None) -> str:
    """Who the agent is, its tools (one line each) and where it works."""
    lines = [
        "You are a coding agent working in a user's project. Use the tools to inspect and change files and to "
        "run commands; read before you edit, keep changes small, and say briefly what you did.",
        "",
        "Tools:",
        *(f"- {t.name}: {t.description}" for t in tools),
        "",
        "File paths are relative to the working directory unless absolute.",
        f"Working directory: {cwd}",
        f"Current date: {(today or date.today()).isoformat()}",
    ]
    return "\n".join(lines)

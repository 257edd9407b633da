"""The coding tools: read, write, edit, bash, ls, grep, find (one per module).

Names and argument names are the reference's (`read{path, offset, limit}`,
`write{path, content}`, `edit{path, oldText, newText}`, `bash{command, timeout}`, ...), so
compaction's file tracking recognises them (spec 02 §7.8).
"""

from __future__ import annotations

from picontext.agent.tools.bash import BashTool
from picontext.agent.tools.edit import EditTool
from picontext.agent.tools.find import FindTool
from picontext.agent.tools.grep import GrepTool
from picontext.agent.tools.ls import LsTool
from picontext.agent.tools.read import ReadTool
from picontext.agent.tools.write import WriteTool
from picontext.agent.types import AgentTool

__all__ = [
    "BashTool",
    "EditTool",
    "FindTool",
    "GrepTool",
    "LsTool",
    "ReadTool",
    "WriteTool",
    "all_tools",
    "coding_tools",
    "read_only_tools",
]


def coding_tools(cwd: str) -> list[AgentTool]:
    """The default tool set (Pi's): read, bash, edit, write."""
    return [ReadTool(cwd), BashTool(cwd), EditTool(cwd), WriteTool(cwd)]


def all_tools(cwd: str) -> list[AgentTool]:
    """Every built-in tool."""
    return [ReadTool(cwd), BashTool(cwd), EditTool(cwd), WriteTool(cwd), GrepTool(cwd), FindTool(cwd), LsTool(cwd)]


def read_only_tools(cwd: str) -> list[AgentTool]:
    return [ReadTool(cwd), GrepTool(cwd), FindTool(cwd), LsTool(cwd)]

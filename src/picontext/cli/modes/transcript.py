"""The conversation so far, redrawn when the chat opens an existing session (-c, -r, --session,
/resume): the last few turns of the current branch, with compactions and branch summaries marked."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text

from picontext.ai.types import content_text
from picontext.cli import render

RECENT_TURNS = 5  # user messages shown, with what followed each
REPLY_LINES = 12  # lines of an old reply shown before it is cut


def _start(branch: list[dict[str, Any]], turns: int) -> int:
    users = [i for i, e in enumerate(branch) if e.get("type") == "message"
             and isinstance(e.get("message"), dict) and e["message"].get("role") == "user"]
    return users[-turns] if len(users) >= turns else 0


def _reply(console: Console, message: dict[str, Any]) -> None:
    content = message.get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content_text(content)}]
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and str(block.get("text", "")).strip():
            lines = str(block["text"]).strip().splitlines()
            shown = "\n".join(lines[:REPLY_LINES])
            console.print(Markdown(shown))
            if len(lines) > REPLY_LINES:
                console.print(Text(f"  … +{len(lines) - REPLY_LINES} lines", style="dim"))
        elif block.get("type") == "toolCall":
            arguments = block.get("arguments")
            args: dict[str, Any] = arguments if isinstance(arguments, dict) else {}
            shown_args = " ".join(f"{k}={render.short(v if isinstance(v, str) else repr(v), 50)}"
                                  for k, v in args.items())
            console.print(Text(f"▸ {block.get('name')} {render.short(shown_args, 150)}", style="cyan"))
    if message.get("stopReason") in ("error", "aborted"):
        why = message.get("errorMessage") or message["stopReason"]
        console.print(Text(f"({render.short(str(why), 150)})", style="yellow"))


def redraw(console: Console, branch: list[dict[str, Any]], turns: int = RECENT_TURNS) -> None:
    """Print the recent part of `branch` (the entries from the root to the leaf)."""
    start = _start(branch, turns)
    earlier = branch[:start]
    compactions = sum(1 for e in earlier if e.get("type") == "compaction")
    if start:
        note = f"… {start} earlier entries"
        if compactions:
            note += f", {compactions} compaction{'s' if compactions > 1 else ''}"
        console.print(Text(f"{note} (picontext show for the whole branch)", style="dim"))
    for entry in branch[start:]:
        kind = entry.get("type")
        if kind == "compaction":
            before = entry.get("tokensBefore")
            before_text = f"{before:,}" if isinstance(before, int) else "?"
            console.print(Text(f"── compacted: {before_text} tokens summarized; the model sees the summary from "
                               "here ──", style="bold magenta"))
            console.print(Text(render.short(str(entry.get("summary", "")), 200), style="magenta"))
        elif kind == "branch_summary":
            console.print(Text("── summary of a branch left ──", style="bold blue"))
            console.print(Text(render.short(str(entry.get("summary", "")), 200), style="blue"))
        elif kind == "message" and isinstance(entry.get("message"), dict):
            message = entry["message"]
            role = message.get("role")
            if role == "user":
                console.print(Text("> ", style="bold cyan") + Text(render.short(content_text(message.get("content")),
                                                                                 400)))
            elif role == "assistant":
                _reply(console, message)
            elif role == "toolResult":
                first = render.short(content_text(message.get("content")) or "", 100)
                mark, style = ("✗", "red") if message.get("isError") else ("✓", "dim")
                console.print(Text(f"  {mark} {first}", style=style))
    console.print(Text("── end of the conversation so far ──", style="dim"))

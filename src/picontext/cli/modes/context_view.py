"""/context: where the context window goes, as a bar and a table.

Every part is a chars/4 estimate (Pi's estimator): the system prompt, the tool definitions,
compaction and branch summaries, messages by role, tool results, and the free space left. The
provider's reported count (the last reply's usage plus estimates of what came after it) is shown
next to the estimated total, marked as such, because the two differ: the estimate does not know
the tokenizer, the report does not exist right after a compaction.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.text import Text

from picontext.compaction.tokens import estimate_tokens

PARTS = (  # (key, label, colour)
    ("system", "system prompt", "magenta"),
    ("tools", "tool definitions", "blue"),
    ("summaries", "summaries", "bright_magenta"),
    ("user", "user messages", "cyan"),
    ("assistant", "assistant messages", "green"),
    ("toolResult", "tool results", "yellow"),
    ("other", "other messages", "white"),
)
BAR = 50


def breakdown(messages: list[Any], tools: list[Any], system_prompt: str | None) -> dict[str, int]:
    parts = dict.fromkeys((key for key, _, _ in PARTS), 0)
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        key = {"system": "system", "user": "user", "assistant": "assistant", "toolResult": "toolResult",
               "compactionSummary": "summaries", "branchSummary": "summaries"}.get(str(role), "other")
        parts[key] += estimate_tokens(message)
    if not parts["system"] and system_prompt:
        parts["system"] = len(system_prompt) // 4
    for tool in tools:
        chars = len(str(getattr(tool, "name", ""))) + len(str(getattr(tool, "description", "")))
        chars += len(json.dumps(getattr(tool, "parameters", {}) or {}))
        parts["tools"] += chars // 4
    return parts


def show(console: Console, controller: Any) -> None:
    session = controller.session
    window = int(controller.model.get("contextWindow") or 0)
    parts = breakdown(list(session.messages), list(session.tools), getattr(session, "system_prompt", None))
    total = sum(parts.values())
    reported, _, _ = controller.context_usage()
    scale = max(window, total, 1)
    bar = Text()
    for key, _, colour in PARTS:
        cells = round(parts[key] / scale * BAR)
        if parts[key] and not cells:
            cells = 1
        bar.append("█" * cells, style=colour)
    bar.append("░" * max(0, BAR - bar.cell_len), style="dim")
    model = f"{controller.model['provider']}/{controller.model['id']}"
    console.print(Text(f"Context of {model}", style="bold"))
    console.print(bar)
    for key, label, colour in PARTS:
        if not parts[key]:
            continue
        share = f"{parts[key] / window * 100:5.1f}%" if window else ""
        console.print(Text("■ ", style=colour) + Text(f"{label:<20}{parts[key]:>10,} tokens  {share}"))
    if window:
        free = max(0, window - total)
        console.print(Text("░ ", style="dim") + Text(f"{'free':<20}{free:>10,} tokens  {free / window * 100:5.1f}%"))
    console.print(Text(f"estimated total (chars/4): {total:,} of {window:,}" if window else
                       f"estimated total (chars/4): {total:,} (window unknown)", style="bold"))
    if reported is None:
        console.print(Text("reported by the provider: not yet (no reply since the last compaction)", style="dim"))
    else:
        console.print(Text(f"reported by the provider: {reported:,} (last reply's usage + estimate of what "
                           "followed)", style="dim"))

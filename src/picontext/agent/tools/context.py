"""Tools that let the agent see and manage its own context (ours, issue 4 §4).

* `context_usage{}`: tokens in the context, the window, percent, the compaction threshold;
* `request_compaction{instructions?}`: compact before the next request (at most
  `session.compaction_requests_per_prompt` times per user prompt; refused when there is
  nothing to compact);
* `recall{entryId?, query?, offset?, limit?}`: read back the original text of an entry that a
  compaction or a context edit removed from the context; without `entryId`, list such entries
  (optionally filtered by `query`).

Enable them with `AgentSession(..., context_tools=True)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from picontext.agent.types import AgentToolResult, ToolError, ToolUpdate
from picontext.ai.event_stream import AbortSignal
from picontext.session.dropped import dropped_entries, entry_text, find_dropped

if TYPE_CHECKING:
    from picontext.agent.host import ContextToolHost

__all__ = ["ContextUsageTool", "RecallTool", "RequestCompactionTool", "context_tools"]

RECALL_LIMIT = 20_000


class _SessionTool:
    def __init__(self, session: ContextToolHost) -> None:
        self.session = session


class ContextUsageTool(_SessionTool):
    name: ClassVar[str] = "context_usage"
    label: ClassVar[str] = "context usage"
    description: ClassVar[str] = (
        "Show how full your context window is: tokens used, window size, percent, and the size at which "
        "the conversation is compacted automatically."
    )
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    async def execute(self, call_id: str, args: dict[str, Any], signal: AbortSignal,
                      on_update: ToolUpdate) -> AgentToolResult:
        s = self.session
        usage = s.get_context_usage()
        threshold = s.compaction_threshold()
        if usage is None:
            return AgentToolResult.text("The model's context window is unknown; automatic compaction is off.")
        tokens = usage.tokens if usage.tokens is not None else s.estimated_context_tokens()
        measured = "" if usage.tokens is not None else " (estimated: no reply since the last compaction)"
        lines = [
            f"Context: ~{tokens} of {usage.context_window} tokens ({tokens / usage.context_window * 100:.1f}%)"
            f"{measured}.",
            f"Automatic compaction at {threshold} tokens" if threshold is not None and s.auto_compaction_enabled
            else "Automatic compaction is off.",
            f"Compaction requests left for this prompt: {s.compaction_requests_left()}.",
        ]
        details = {"tokens": tokens, "contextWindow": usage.context_window, "threshold": threshold}
        return AgentToolResult.text("\n".join(lines), details)


class RequestCompactionTool(_SessionTool):
    name: ClassVar[str] = "request_compaction"
    label: ClassVar[str] = "request compaction"
    description: ClassVar[str] = (
        "Ask for the conversation so far to be summarized before your next step, to free context. "
        "Use it at a natural break (a sub-task finished), not in the middle of reading files you still need. "
        "Optional instructions say what the summary must keep."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"instructions": {"type": "string", "description": "What the summary must focus on"}},
    }

    async def execute(self, call_id: str, args: dict[str, Any], signal: AbortSignal,
                      on_update: ToolUpdate) -> AgentToolResult:
        try:
            self.session.request_compaction(str(args.get("instructions") or ""))
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        return AgentToolResult.text(
            "Compaction scheduled: the conversation before the recent part will be summarized before your next "
            "request. Entries it removes can be read back with the recall tool."
        )


class RecallTool(_SessionTool):
    name: ClassVar[str] = "recall"
    label: ClassVar[str] = "recall"
    description: ClassVar[str] = (
        "Read back the original text of messages that were removed from your context by a compaction or an edit "
        "(for example a file you read earlier, a tool result, or a failed attempt). Without entryId: list the "
        "removed entries (id, role, why, size, preview), optionally filtered by a text query. With entryId: return "
        "that entry's full original text (use offset/limit for long ones)."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "entryId": {"type": "string", "description": "Entry id from the list"},
            "query": {"type": "string", "description": "Only list entries whose text contains this (case-insensitive)"},
            "offset": {"type": "integer", "description": "Character offset into the entry text (default 0)"},
            "limit": {"type": "integer", "description": f"Characters to return (default {RECALL_LIMIT})"},
        },
    }

    async def execute(self, call_id: str, args: dict[str, Any], signal: AbortSignal,
                      on_update: ToolUpdate) -> AgentToolResult:
        manager = self.session.manager
        entry_id = args.get("entryId")
        if not entry_id:
            query = str(args.get("query") or "").lower()
            items = dropped_entries(manager)
            if query:
                items = [d for d in items if query in entry_text(manager.get_entry(d.entry_id)).lower()]
            if not items:
                return AgentToolResult.text("Nothing matching has been removed from your context.")
            lines = [f"{d.entry_id}  {d.role:<10} {d.why:<9} {d.chars:>7} chars  {d.preview}" for d in items[-50:]]
            more = f"({len(items) - 50} older entries not shown)\n" if len(items) > 50 else ""
            return AgentToolResult.text(more + "\n".join(lines), [d.to_json() for d in items])
        entry, record = find_dropped(manager, str(entry_id))
        if entry is None:
            raise ToolError(f"Entry {entry_id} not found; call recall without entryId to list removed entries")
        text = entry_text(entry)
        offset = int(args.get("offset") or 0)
        limit = int(args.get("limit") or RECALL_LIMIT)
        chunk = text[offset : offset + limit]
        note = "" if record is not None else "(this entry is still in your context)\n"
        if offset + limit < len(text):
            chunk += f"\n[... {len(text) - offset - limit} more characters; call again with offset={offset + limit}]"
        return AgentToolResult.text(note + chunk, {"entryId": entry_id, "chars": len(text)})


def context_tools(session: ContextToolHost) -> list[Any]:
    return [ContextUsageTool(session), RequestCompactionTool(session), RecallTool(session)]

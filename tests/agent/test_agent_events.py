from __future__ import annotations

from picontext.agent.events import AGENT_EVENT_TYPES, LOOP_EVENT_TYPES, to_json_event
from picontext.agent.hooks import HOOK_EVENTS


def test_wire_strings_snapshot() -> None:
    assert LOOP_EVENT_TYPES == (
        "agent_start", "agent_end", "turn_start", "turn_end", "message_start", "message_update", "message_end",
        "tool_execution_start", "tool_execution_update", "tool_execution_end",
    )  # fmt: skip
    assert AGENT_EVENT_TYPES[len(LOOP_EVENT_TYPES) :] == (
        "agent_settled", "queue_update", "compaction_start", "compaction_end", "entry_appended",
        "auto_retry_start", "auto_retry_end", "thinking_level_changed", "extension_error",
        "compaction_skipped", "prompt_cancelled", "summarization_retry_scheduled",
        "summarization_retry_attempt_start", "summarization_retry_finished",
        "compaction_background_start", "compaction_background_discarded", "compaction_progress",
    )  # fmt: skip
    assert HOOK_EVENTS == (
        "context", "tool_call", "tool_result", "session_before_compact", "session_compact",
        "session_compact_failed", "session_before_tree", "session_tree",
    )  # fmt: skip


def test_json_event_drops_partial_snapshots() -> None:
    partial = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {}}],
        "usage": {"input": 1},
    }
    event = {
        "type": "message_update",
        "message": partial,
        "assistantMessageEvent": {"type": "toolcall_start", "contentIndex": 0, "partial": partial},
    }
    assert to_json_event(event) == {  # type: ignore[arg-type]
        "type": "message_update",
        "usage": {"input": 1},
        "assistantMessageEvent": {"type": "toolcall_start", "contentIndex": 0, "id": "c1", "toolName": "read"},
    }
    assert to_json_event({"type": "turn_start"}) == {"type": "turn_start"}

"""picontext as the OpenAI Agents SDK's session memory (`pip install 'picontext[openai-agents]'`).

    from agents import Agent, Runner
    from picontext.integrations.openai_agents import PicontextSession

    session = PicontextSession(model="openai/gpt-4.1-mini")     # a new session; session.session_id
    result = await Runner.run(agent, "Hello", session=session)
    session = PicontextSession("0193...", model="openai/gpt-4.1-mini")   # the same conversation later

`PicontextSession` implements the SDK's `Session` protocol and its compaction-aware variant
(`run_compaction`). Items are stored as Pi messages (`openai_agents_items.py`), `get_items`
returns the projected context (after compactions and context edits), usage comes from the run's
per-request usage, and compaction follows Pi's rule: after each stored turn, when the context
(the last request's reported tokens plus estimates of what came after) is above
`contextWindow - reserveTokens` of `model`, older turns are summarized into one message.

A run keeps its own copy of the conversation between its model calls; with
`RunConfig(call_model_input_filter=session.model_input_filter)` a compaction made during a long
run also shrinks that run's next request.
"""

from __future__ import annotations

from typing import Any

from agents.memory.session_settings import SessionSettings
from agents.run_config import CallModelData, ModelInputData

from picontext.compaction.completion import Completion
from picontext.integrations.memory import ConversationMemory
from picontext.integrations.openai_agents_items import items_to_messages, message_to_items

__all__ = ["PicontextSession"]


class PicontextSession:
    """An Agents SDK session kept in a picontext session of any store.

    `session_id` None creates a session (its id is `session_id`); an unknown id raises
    `picontext.errors.SessionNotFound`. `model` (`provider/id` from picontext's catalog or
    models.json) sets the window and writes summaries unless `compaction_model` (or the
    `compaction.model` setting) names another. `auto_compact=False` leaves compaction to
    `run_compaction()` calls. See `ConversationMemory` for `settings`, `summarizer`, `api_key`.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str | None = None,
        *,
        model: Any,
        store: Any = None,
        cwd: str | None = None,
        compaction_model: str | None = None,
        settings: dict[str, Any] | None = None,
        summarizer: Completion | None = None,
        api_key: str | None = None,
        auto_compact: bool = True,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.memory = ConversationMemory(session_id, model=model, store=store, cwd=cwd,
                                         compaction_model=compaction_model, settings=settings,
                                         summarizer=summarizer, api_key=api_key)
        self.session_id: str = self.memory.session_id
        self.auto_compact = auto_compact
        self.session_settings = session_settings
        self._last_usage: Any = None  # the SDK's usage record of the request whose reply was stored last
        self._compactions = 0
        self._converted: dict[int, tuple[dict[str, Any], list[dict[str, Any]]]] = {}

    # -- the Session protocol ------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[Any]:
        """The projected conversation as input items, oldest first; the newest `limit` when given."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        items = self._projected_items()
        if limit is not None:
            return items[-limit:] if limit > 0 else []
        return items

    async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
        """Store `items` in one write (usage of the run's last request goes on its reply), then
        compact when the context is over the threshold."""
        if not items:
            return
        messages = items_to_messages(items, tools=self._tool_call)
        has_reply = any(m.get("role") == "assistant" for m in messages)
        self.memory.append(messages, usage=self._new_usage(wrapper) if has_reply else None)
        if self.auto_compact:
            await self._maybe_compact()

    async def pop_item(self, *, wrapper: Any = None) -> Any | None:
        """Take the newest item off the conversation by branching (nothing is deleted). When it is
        one item of a model response (a tool call after text), the rest of that response is
        stored again on the new branch."""
        message = self.memory.pop()
        if message is None:
            return None
        items = message_to_items(message)
        if len(items) > 1 and message.get("role") == "assistant":
            rest = dict(message)
            rest["content"] = list(message.get("content") or [])[:-1]
            self.memory.append([rest])
        return items[-1] if items else await self.pop_item()

    async def clear_session(self, *, wrapper: Any = None) -> None:
        """Start over: a new root in the same session; the old conversation stays in the file."""
        self.memory.clear()

    # -- the compaction-aware variant ----------------------------------------------------------------

    async def run_compaction(self, args: dict[str, Any] | None = None, *, wrapper: Any = None) -> None:
        """Compact by Pi's rule; `{"force": True}` compacts whatever can be (a manual compaction).
        The SDK calls this after each stored turn of a Responses-API run."""
        if args and args.get("force"):
            result = await self.memory.acompact(reason="manual")
            self._compactions += result is not None
            return
        await self._maybe_compact()

    async def _maybe_compact(self) -> None:
        result = await self.memory.amaybe_compact()
        self._compactions += result is not None

    # -- inside a run --------------------------------------------------------------------------------

    async def model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """`RunConfig.call_model_input_filter`: when this session compacted while the run was
        going, the next request gets the compacted conversation (the run's own list still holds
        the old one). Anything not stored yet is kept as it is; never drops an item."""
        model_data = data.model_data
        stored = self._projected_items()
        given = list(model_data.input)
        if len(stored) >= len(given) or not stored or not given or not _same(stored[-1], given[-1]):
            return model_data
        return ModelInputData(input=stored, instructions=model_data.instructions)

    def close(self) -> None:
        """Close the store connection this session opened (as `SQLiteSession.close`)."""
        self.memory.close()

    @property
    def compactions(self) -> int:
        """Compactions this object made (automatic and `run_compaction`)."""
        return self._compactions

    # -- helpers -------------------------------------------------------------------------------------

    def _projected_items(self) -> list[Any]:
        """`messages_to_items` of the projection, converting only messages not seen before (the
        projection hands out the same message objects from one call to the next); every item is
        a new dict, so a caller changing one changes nothing here."""
        previous, seen = self._converted, {}
        out: list[Any] = []
        for message in self.memory.message_view():
            hit = previous.get(id(message))
            if hit is None or hit[0] is not message:
                hit = (message, message_to_items(message))
            seen[id(message)] = hit
            out.extend(dict(item) for item in hit[1])
        self._converted = seen
        return out

    def _tool_call(self, call_id: str) -> tuple[str, str] | None:
        """The stored toolCall block (id, name) for a function call output of a later write."""
        for message in reversed(self.memory.message_view()):
            if message.get("role") != "assistant":
                continue
            for block in message.get("content") or []:
                if block.get("type") == "toolCall" and str(block.get("id", "")).split("|")[0] == call_id:
                    return str(block["id"]), str(block.get("name", ""))
        return None

    def _new_usage(self, wrapper: Any) -> dict[str, Any] | None:
        """The usage of the run's newest model request, once (None when no new request)."""
        usage = getattr(wrapper, "usage", None)
        entries = getattr(usage, "request_usage_entries", None)
        if not entries or entries[-1] is self._last_usage:
            return None
        last = self._last_usage = entries[-1]  # held, so its identity is never reused
        details = getattr(last, "input_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0)
        prompt = int(last.input_tokens or 0)
        return {"input": max(prompt - cached, 0), "cacheRead": cached, "output": int(last.output_tokens or 0),
                "totalTokens": int(last.total_tokens or 0)}


def _same(a: Any, b: Any) -> bool:
    """Two items are the same message/call/output (ids and formatting aside)."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    for key in ("call_id", "role"):
        if a.get(key) != b.get(key):
            return False
    return (a.get("type") or "message") == (b.get("type") or "message")

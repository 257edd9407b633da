"""Framework-neutral conversation memory on a picontext session.

`ConversationMemory` is what every framework adapter (`openai_agents`, `pydantic_ai`,
`langchain`) stands on: it stores the framework's messages as Pi messages in a session of any
store, hands back the projected context (compactions, context edits, custom roles as user
messages), decides when to compact by Pi's rule and compacts with picontext's own machinery
(`picontext.agent.compaction_runtime.CompactionRuntime`: cut points, split turns, iterative
summaries, retries, the mechanical fallback, anti-thrash). The adapter only converts messages.

Example::

    memory = ConversationMemory(model="openai/gpt-4.1-mini")
    memory.append([{"role": "user", "content": "hi"}])
    ...                                  # the framework calls its model with memory.context()
    memory.append([assistant_message])   # Pi shape; missing api/provider/model/usage filled in
    memory.record_usage({"input": 1200, "output": 40})
    if memory.should_compact():
        await memory.acompact()

Nothing is ever deleted: `pop()` and `clear()` move the leaf of the session tree and write a
small custom entry (Pi ignores it) so the move survives a reopen.
"""

from __future__ import annotations

import asyncio
import inspect
import operator
import os
import time
from collections.abc import Callable, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any

from picontext.agent.background_compaction import BackgroundCompaction
from picontext.agent.compaction_runtime import CompactionRuntime
from picontext.agent.hooks import Hooks
from picontext.agent.retries import retry_policy_from_settings
from picontext.ai.event_stream import loop_running
from picontext.ai.models import Model, calculate_cost, default_catalog
from picontext.ai.providers import StreamOptions
from picontext.ai.stream import stream
from picontext.ai.types import empty_usage
from picontext.compaction.completion import Completion, StreamCompletion
from picontext.compaction.settings import Settings, load_settings, model_key
from picontext.compaction.summary_model import summary_completion
from picontext.compaction.tokens import (
    calculate_context_tokens,
    estimate_messages_tokens,
    estimate_projected_context_tokens,
)
from picontext.compaction.tokens import should_compact as _over_threshold
from picontext.errors import ConfigError, NothingToCompact, SessionNotFound
from picontext.session.convert import convert_to_llm
from picontext.session.manager import SessionManager
from picontext.session.projection import PrefixView, field_of
from picontext.session.repository import SessionRepository, open_repository

if TYPE_CHECKING:
    from picontext.ai.event_stream import AbortSignal
    from picontext.compaction.prompt_cache import SessionRequest

__all__ = ["CLEAR_ENTRY", "POP_ENTRY", "ConversationMemory", "head", "starts_with"]

POP_ENTRY = "picontext.pop"
"""customType of the entry that makes a `pop()` durable (data: the popped entry's id)."""
CLEAR_ENTRY = "picontext.clear"
"""customType of the entry that makes a `clear()` durable (a new root: the path before it is gone)."""

_ROLES = ("system", "user", "assistant", "toolResult", "custom")
Listener = Callable[[dict[str, Any]], Any]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _resolve_model(model: str | Model) -> Model:
    if isinstance(model, dict):
        missing = [k for k in ("provider", "id", "api") if not model.get(k)]
        if missing:
            raise ConfigError(f"model record lacks {', '.join(missing)}; give a provider/id from the catalog instead")
        return model
    if not isinstance(model, str):
        raise ConfigError(f"model must be a 'provider/id' string, got {type(model).__name__}")
    return default_catalog().get(model)


def _open_session(session_id: str | None, store: Any, cwd: str) -> tuple[SessionManager, SessionRepository | None]:
    """The session (created when `session_id` is None, else opened by id or unique id prefix) and
    the repository opened for it (None when the caller gave its own `SessionRepository`)."""
    if isinstance(store, SessionRepository):
        return _open_in(store, session_id, cwd), None
    repository = open_repository(os.fspath(store) if isinstance(store, os.PathLike) else store)
    try:
        return _open_in(repository, session_id, cwd), repository
    except BaseException:
        repository.close()
        raise


def _open_in(repository: SessionRepository, session_id: str | None, cwd: str) -> SessionManager:
    if session_id is not None:
        return repository.open(session_id, cwd=cwd)
    manager = repository.create(cwd)
    # A new session is written at its first reply; look its id up now, so that a store that
    # cannot be reached says so here (StoreUnavailable), not in the middle of the first turn.
    try:
        repository.resolve(manager.get_session_id())
    except SessionNotFound:
        pass
    return manager


class _Host:
    """The `CompactionHost` (picontext.agent.host) of a memory: no agent loop, no queues, no
    retries of the framework's requests; events go to the memory's listeners."""

    def __init__(self, manager: SessionManager, model: Model, settings: Settings, summarizer: Completion) -> None:
        self.manager = manager
        self.model = model
        self.settings = settings
        self.retry_policy = retry_policy_from_settings(settings.data)
        self.summarizer: Completion | None = summarizer
        self.stream_fn = stream
        self.last_request: SessionRequest | None = None
        self.hooks = Hooks()
        self.thinking_level = "off"
        self.listeners: list[Listener] = []

    def request_options(self) -> StreamOptions:
        return StreamOptions()

    def entry_id_of(self, message: Any) -> str | None:
        for entry in reversed(self.manager.branch_view()):
            if field_of(entry, "type") == "message" and entry.get("message") is message:
                return str(entry["id"])
        return None

    async def omit(self, messages: Sequence[Any]) -> list[str]:
        return []  # the framework retries its own requests; nothing of ours to take back

    def has_queued_messages(self) -> bool:
        return False

    async def emit(self, event: Any) -> None:
        for listener in list(self.listeners):
            result = listener(event)
            if inspect.isawaitable(result):
                await result

    async def run_hook(self, event: Any, payload: Any) -> list[Any]:
        results, _errors = await self.hooks.emit(event, payload)
        return list(results)

    async def report_hook_error(self, path: str, event: str, exc: Exception) -> None:
        await self.emit({"type": "extension_error", "extensionPath": path, "event": event,
                         "error": f"{type(exc).__name__}: {exc}"})


class ConversationMemory:
    """One conversation kept in a picontext session, for a framework that calls the model itself.

    `model` (`provider/id` from the catalog or models.json, or a model record) gives the window
    for the threshold and, unless `compaction_model` (or the `compaction.model` setting) names
    another, writes the summaries. `settings` are overrides on top of the settings files of
    `cwd` (`{"compaction": {"reserveTokens": ...}}`). `store`: a `SessionRepository`, or what
    `open_repository` takes (a directory, `postgresql://...`, `memory:NAME`; None: `$PICONTEXT_STORE`
    or picontext's session directory). `summarizer` replaces the summary model
    (tests, custom clients). Unknown model, summary model without a key: `ConfigError`; unknown
    session id: `SessionNotFound`; a store that cannot be used: `StoreUnavailable`, all raised
    here, at construction.
    """

    def __init__(
        self,
        session_id: str | None = None,
        *,
        model: str | Model,
        store: str | os.PathLike[str] | SessionRepository | None = None,
        cwd: str | None = None,
        compaction_model: str | None = None,
        settings: dict[str, Any] | None = None,
        summarizer: Completion | None = None,
        api_key: str | None = None,
    ) -> None:
        self.model: Model = _resolve_model(model)
        self.cwd = os.path.abspath(cwd or os.getcwd())
        self.settings = load_settings(self.cwd, overrides=settings)
        compaction_ref = compaction_model or self.settings.compaction(self.model).model
        completion = summarizer or self._summary_model(compaction_ref, api_key)
        self.manager, self._repository = _open_session(session_id, store, self.cwd)
        self.session_id: str = self.manager.get_session_id()
        self._host = _Host(self.manager, self.model, self.settings, completion)
        self._runtime = CompactionRuntime(self._host, BackgroundCompaction)
        self._pending_usage: dict[str, Any] | None = None
        self._unanchored: str | None = None  # last appended assistant entry that carries no usage
        self._reported: tuple[str, int] | None = None  # (that entry, tokens the framework reported)
        self.last_error: str | None = None
        """Why the last automatic compaction did not happen (one line), None after a success."""
        self._record_model()

    def _summary_model(self, ref: str | None, api_key: str | None) -> Completion:
        if ref is not None and ref != model_key(self.model):
            same_provider = ref.split("/", 1)[0] == self.model["provider"]
            return summary_completion(ref, api_key=api_key if same_provider else None)
        from picontext.ai.auth import require_api_key

        key = api_key or require_api_key(self.model["provider"], model=self.model)
        return StreamCompletion(self.model, api_key=key, retry=retry_policy_from_settings(self.settings.data))

    def _record_model(self) -> None:
        """A fresh session (or one last written with another model) records the model, as the
        picontext agent does, so `picontext -r ID` continues with it."""
        fresh = self.manager.entry_count() == 0
        current = self.manager.build_session_projection().model or {}
        # Built inside a running event loop, a session another process holds is not waited for
        # here (that would stall the loop): the entries go in with the memory's next write.
        with self.manager.batch(wait=not loop_running()):
            if (current.get("provider"), current.get("modelId")) != (self.model["provider"], self.model["id"]):
                self.manager.append_model_change(self.model["provider"], self.model["id"])
            if fresh:
                self.manager.append_thinking_level_change("off")

    def close(self) -> None:
        """Close the store this memory opened (a database connection); a repository passed in
        stays open. The session itself is always written through: closing loses nothing."""
        repository, self._repository = self._repository, None
        if repository is not None:
            repository.close()

    # -- events --------------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` (sync or async) with every compaction event (`compaction_start`,
        `compaction_end`, `compaction_skipped`, ...); returns an unsubscribe function."""
        self._host.listeners.append(listener)
        return lambda: self._host.listeners.remove(listener) if listener in self._host.listeners else None

    # -- messages ------------------------------------------------------------------------------------

    def append(self, messages: Sequence[dict[str, Any]], *, usage: dict[str, Any] | None = None) -> list[str]:
        """Store `messages` (Pi AgentMessages: system, user, assistant, toolResult, custom) in one write;
        returns their entry ids. `{"type": "custom", "customType": ..., "data": ...}` stores a
        custom entry instead (what the model never sees: a framework item Pi cannot represent).
        Assistant messages get `api`/`provider`/`model`/`usage`/`stopReason` filled in when
        missing. `usage` (the reply's reported usage, keys as in `record_usage`), or else usage
        recorded before, goes to the last assistant message of the call. A message of another
        shape raises `ValueError` before anything is written."""
        last_assistant = max((i for i, m in enumerate(messages) if isinstance(m, dict) and not _is_custom_entry(m)
                              and m.get("role") == "assistant"), default=None)
        prepared = [m if _is_custom_entry(m) else self._prepare(m, i, usage if i == last_assistant else None)
                    for i, m in enumerate(messages)]
        if last_assistant is not None and usage is None and self._pending_usage is not None:
            if not _has_usage(prepared[last_assistant]):
                prepared[last_assistant]["usage"] = self._pending_usage
        if last_assistant is not None:
            self._pending_usage = None
        ids: list[str] = []
        # One batch is one all-or-nothing write under the store's lock (another writer's appends
        # are taken in first, as in a non-strict writer section): durable before this returns.
        with self.manager.batch():
            for message in prepared:
                if _is_custom_entry(message):  # kept in the file, never in the context
                    ids.append(self.manager.append_custom_entry(message["customType"], message.get("data")))
                elif message["role"] == "custom":
                    ids.append(self.manager.append_custom_message_entry(
                        message["customType"], message["content"], bool(message.get("display", True)),
                        message.get("details")))
                else:
                    ids.append(self.manager.append_message(message))
        if last_assistant is not None:
            self._unanchored = None if _has_usage(prepared[last_assistant]) else ids[last_assistant]
        return ids

    def _prepare(self, message: Any, index: int, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        """`message` checked, as a new dict with Pi's defaults; `usage` (given for the call)
        replaces an assistant message's own."""
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            role = message.get("role") if isinstance(message, dict) else type(message).__name__
            raise ValueError(f"message {index}: role {role!r} is not one of {', '.join(_ROLES)}")
        out = dict(message)
        out.setdefault("timestamp", _now_ms())
        role = out["role"]
        if role == "assistant":
            content = out.get("content")
            if not isinstance(content, list):
                raise ValueError(f"message {index}: assistant content must be a list of blocks")
            out.setdefault("api", self.model["api"])
            out.setdefault("provider", self.model["provider"])
            out.setdefault("model", self.model["id"])
            out["usage"] = self._pi_usage(out.get("usage") if usage is None else usage)
            if "stopReason" not in out:
                calls = any(isinstance(b, dict) and b.get("type") == "toolCall" for b in content)
                out["stopReason"] = "toolUse" if calls else "stop"
        elif role == "toolResult":
            if not isinstance(out.get("toolCallId"), str):
                raise ValueError(f"message {index}: toolResult needs a toolCallId")
            out.setdefault("toolName", "")
            out.setdefault("isError", False)
            if isinstance(out.get("content"), str):
                out["content"] = [{"type": "text", "text": out["content"]}]
        elif role == "custom" and not isinstance(out.get("customType"), str):
            raise ValueError(f"message {index}: a custom message needs a customType")
        elif role == "system" and not isinstance(out.get("sections", {}), dict):
            raise ValueError(f"message {index}: system sections must be an object")
        if role in ("system", "user", "toolResult", "custom") and not isinstance(out.get("content"), str | list):
            raise ValueError(f"message {index}: content must be a string or a list of blocks")
        return out

    def _pi_usage(self, usage: Any) -> dict[str, Any]:
        """A usage record of Pi's shape (every field present, cost from the catalog's prices)."""
        out: dict[str, Any] = dict(empty_usage())
        if isinstance(usage, dict):
            for key in ("input", "output", "cacheRead", "cacheWrite", "totalTokens"):
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    out[key] = value
            if not out["totalTokens"]:
                out["totalTokens"] = out["input"] + out["output"] + out["cacheRead"] + out["cacheWrite"]
        out["cost"] = dict(out["cost"])
        try:
            cost: dict[str, Any] = calculate_cost(self.model, out)  # type: ignore[arg-type,assignment]
        except (KeyError, TypeError):
            return out  # a model record without prices: zero cost, as Pi writes for local models
        for key, value in cost.items():
            if type(value) is float and value.is_integer() and abs(value) < 2**53:
                # JSON.stringify writes 0.0 as 0: so does the session file, and an entry holding
                # the int is written without the slow exact-format encoder.
                cost[key] = int(value)
        return out

    def record_usage(self, usage: dict[str, Any]) -> None:
        """The usage the framework reported for its last model call (`input`, `output`,
        `cacheRead`, `cacheWrite`, `totalTokens`). Before that call's reply is appended it goes
        into the reply's `usage` (what Pi writes); after, it anchors the threshold in memory."""
        normalized = self._pi_usage(usage)
        if not calculate_context_tokens(normalized):
            return
        if self._unanchored is not None and self.manager.get_leaf_id() is not None:
            self._reported = (self._unanchored, int(calculate_context_tokens(normalized)))
            self._unanchored = None
        else:
            self._pending_usage = normalized

    def context(self) -> list[dict[str, Any]]:
        """The model's input: the projection (compactions, context edits) as provider messages
        (summaries and custom messages become user messages)."""
        return convert_to_llm(self.message_view())

    def messages(self) -> list[dict[str, Any]]:
        """The projection's messages before conversion (compactionSummary, custom ... roles kept)."""
        view = self.message_view()
        return view[:] if isinstance(view, PrefixView) else list(view)  # a slice copies in C

    def message_view(self) -> Sequence[dict[str, Any]]:
        """`messages()` as a read-only sequence, in O(1): the session's own message objects,
        not to be changed. While the conversation only grows, the next view `starts_with` this
        one (a `PrefixView`), so an adapter converts only what is new."""
        return self.manager.build_session_projection().messages

    # -- the threshold ---------------------------------------------------------------------------------

    @property
    def context_window(self) -> int:
        return int(self.model.get("contextWindow") or 0)

    def threshold(self) -> int | None:
        """Tokens above which a compaction is due (window - reserveTokens), None for an unknown window."""
        return self._runtime.threshold()

    def context_tokens(self) -> int:
        """Pi's estimate of the context now: the newest reported usage plus chars/4 of every
        message after it (a usage anchor before a compaction or context edit is not used)."""
        manager = self.manager
        projection = manager.build_session_projection()
        estimate = estimate_projected_context_tokens(projection, manager.branch_view())
        tokens = int(estimate["tokens"])
        if self._reported is None:
            return tokens
        entry_id, reported = self._reported
        start = len(projection.messages)
        for item in reversed(projection.entries):
            start -= len(item.messages)
            if field_of(item.source_entry, "id") == entry_id:
                index = start + len(item.messages) - 1
                if estimate["lastUsageIndex"] is not None and estimate["lastUsageIndex"] >= index:
                    return tokens  # a newer anchor in the file
                later = manager.entries_after(entry_id)
                if any(field_of(e, "type") in ("compaction", "context_edit") for e in later):
                    break
                return reported + estimate_messages_tokens(projection.messages[index + 1:])
        self._reported = None  # popped, compacted or edited away
        return tokens

    def should_compact(self) -> bool:
        """Pi's rule: `context_tokens() > contextWindow - reserveTokens` (never with an unknown
        window or compaction disabled)."""
        window = self.context_window
        if window <= 0:
            return False
        return _over_threshold(self.context_tokens(), window, self._runtime.settings())

    # -- compaction ----------------------------------------------------------------------------------

    async def acompact(self, *, reason: str = "threshold", signal: AbortSignal | None = None,
                       instructions: str | None = None) -> dict[str, Any] | None:
        """Compact now: the CompactionResult (`summary`, `firstKeptEntryId`, `tokensBefore`,
        `estimatedTokensAfter`), or None when nothing was compacted (`last_error` says why).

        `reason` "threshold"/"overflow" plan like the agent (a compaction that cannot get under
        the threshold is re-planned with a smaller tail, or skipped); "manual" compacts whatever
        can be compacted. A summary request that fails is retried, then replaced by the
        mechanical summary (`compaction.fallbackSummary`); a compaction that still fails writes
        nothing, so the conversation stays as it was."""
        if reason not in ("threshold", "overflow", "manual"):
            raise ValueError(f"reason must be threshold, overflow or manual, got {reason!r}")
        ended: list[dict[str, Any]] = []

        def capture(event: dict[str, Any]) -> None:
            if event.get("type") in ("compaction_end", "compaction_skipped"):
                ended.append(event)

        unsubscribe = self.subscribe(capture)
        try:
            if reason == "manual":
                try:
                    result = await self._runtime.compact_manual(instructions)
                except NothingToCompact as exc:
                    self.last_error = str(exc)
                    return None
                self.last_error = None
                return result
            await self._runtime.run_auto(reason, False, signal=signal,  # type: ignore[arg-type]
                                         instructions=instructions)
        finally:
            unsubscribe()
        for event in reversed(ended):
            if isinstance(event.get("result"), dict):
                self.last_error = None
                return dict(event["result"])
        self.last_error = next((str(e.get("errorMessage") or e.get("message")) for e in reversed(ended)
                                if e.get("errorMessage") or e.get("message")), "Nothing to compact")
        return None

    def compact(self, *, reason: str = "threshold", instructions: str | None = None) -> dict[str, Any] | None:
        """`acompact` for synchronous code (not from inside a running event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.acompact(reason=reason, instructions=instructions))
        raise RuntimeError("compact() was called inside a running event loop; use `await memory.acompact()`")

    async def amaybe_compact(self, *, signal: AbortSignal | None = None) -> dict[str, Any] | None:
        """`acompact()` when `should_compact()`; None otherwise."""
        if not self.should_compact():
            return None
        return await self.acompact(reason="threshold", signal=signal)

    # -- branching -----------------------------------------------------------------------------------

    def _last_message_entry(self) -> dict[str, Any] | None:
        for entry in reversed(self.manager.branch_view()):
            if field_of(entry, "type") in ("message", "custom_message"):
                return dict(entry)
        return None

    def pop(self) -> dict[str, Any] | None:
        """Take the newest message off the conversation: the leaf moves to its parent (the entry
        stays in the file, on a side branch); returns that message, None when there is none."""
        entry = self._last_message_entry()
        if entry is None:
            return None
        parent = entry.get("parentId")
        with self.manager.exclusive(strict=False):
            if parent is None:
                self.manager.reset_leaf()
            else:
                self.manager.branch(parent)
            self.manager.append_custom_entry(POP_ENTRY, {"entryId": entry["id"]})
        self._unanchored = None
        if entry.get("type") == "custom_message":
            return {"role": "custom", "customType": entry.get("customType"), "content": entry.get("content"),
                    "display": entry.get("display", True), "timestamp": entry.get("timestamp")}
        message = entry.get("message")
        return dict(message) if isinstance(message, dict) else None

    def clear(self) -> None:
        """Start the conversation over: a new root in the same session (nothing is deleted; the
        old path stays in the file and in `picontext tree`)."""
        with self.manager.exclusive(strict=False):
            self.manager.reset_leaf()
            self.manager.append_custom_entry(CLEAR_ENTRY, {})
        self._pending_usage = self._unanchored = self._reported = None
        self._record_model()


def starts_with(messages: Sequence[Any], prefix: Sequence[Any]) -> bool:
    """Whether `messages` begins with the very objects of `prefix`: O(1) when both are views
    of one projection (`PrefixView.starts_with`), else compared by identity in C."""
    if isinstance(messages, PrefixView):
        return messages.starts_with(prefix)
    count = len(prefix)
    return count <= len(messages) and all(map(operator.is_, islice(messages, count), prefix))


def head(messages: Sequence[Any], count: int) -> Sequence[Any]:
    """The first `count` of `messages`, kept to compare a later projection with (`starts_with`):
    a view of a view in O(1), a copy of a list (whose owner may change it)."""
    return messages.head(count) if isinstance(messages, PrefixView) else list(islice(messages, count))


def _is_custom_entry(message: Any) -> bool:
    return isinstance(message, dict) and message.get("type") == "custom" and isinstance(message.get("customType"), str)


def _has_usage(message: dict[str, Any]) -> bool:
    tokens = calculate_context_tokens(message.get("usage"))
    return tokens == tokens and tokens > 0  # NaN (malformed) is no usage

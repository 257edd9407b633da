"""What the chat, print, RPC and demo modes share: session flags, opening the session and model,
and a `Controller` around `AgentSession` for compaction, tree navigation and context usage.

The controller forwards every session event to its own listeners. When the session itself has no
`compact`/`navigate_tree` (older runtime), the controller does the work with the compaction
library and emits the same `compaction_start`/`compaction_end` events, so the UIs do not care
which one ran.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

from picontext._files import read_config_text
from picontext.agent.events import AgentEvent
from picontext.agent.prompt import default_system_prompt
from picontext.agent.session import AgentSession
from picontext.agent.tools import coding_tools
from picontext.ai.auth import require_api_key
from picontext.ai.models import Model, ModelCatalog, default_catalog, picontext_dir
from picontext.cli.base import CliError, flag, looks_like_session_id
from picontext.cli.loading import CappedWarnings
from picontext.cli.repo import repository
from picontext.compaction.settings import load_settings
from picontext.session.manager import SessionManager

Listener = Callable[[dict[str, Any]], Awaitable[None] | None]


# -- opening ---------------------------------------------------------------------------------------


def _resume_word_is_prompt(args: argparse.Namespace) -> None:
    """`picontext -r fix the bug`: argparse gives `fix` to -r; it is the prompt's first word."""
    resume = flag(args, "resume")
    if isinstance(resume, str) and not looks_like_session_id(resume):
        args.resume = True
        if hasattr(args, "message"):
            args.message = [resume, *(args.message or [])]


def open_manager(args: argparse.Namespace, cwd: str) -> SessionManager:
    """The chat's and print mode's session: --session REF (a new one when REF names none yet but
    could: a valid id, a file path), -r ID, -r (picked), -c (the latest, else new), new, or
    --no-session (in memory)."""
    _resume_word_is_prompt(args)
    if flag(args, "no_session"):
        return SessionManager.in_memory(cwd)
    repo = repository()
    warn = CappedWarnings()
    ref = flag(args, "session")
    resume = flag(args, "resume")
    if ref:
        manager = repo.open(ref, cwd=None, create=True, warn=warn)
    elif isinstance(resume, str):
        manager = repo.open(resume, warn=warn)
    elif resume:
        from picontext.cli.modes.pickers import pick_session  # prompt_toolkit: only to pick

        manager = repo.open(pick_session(cwd), warn=warn)
    else:
        latest = repo.latest(cwd, warn=warn) if flag(args, "continue_") else None
        manager = latest if latest is not None else repo.create(cwd, warn=warn)
    manager.check_writable()
    return manager


def settings_model() -> str | None:
    path = picontext_dir() / "settings.json"
    text = read_config_text(path)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CliError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        return None  # load_settings says what is wrong with it
    provider, model = data.get("defaultProvider"), data.get("defaultModel")
    return f"{provider}/{model}" if isinstance(provider, str) and isinstance(model, str) else None


def resolve_model(args: argparse.Namespace, catalog: ModelCatalog, manager: SessionManager) -> Model:
    """--model, else the session's last model, else settings.json's default; a one-line error otherwise."""
    if flag(args, "model"):
        return catalog.get(args.model)
    ref = manager.build_session_projection().model or {}
    if ref.get("provider") and ref.get("modelId"):
        found = catalog.find(ref["provider"], ref["modelId"])
        if found is not None:
            return found
    default = settings_model()
    if default:
        return catalog.get(default)
    raise CliError(
        "No model selected: pass --model provider/id (see `picontext models list`) "
        f'or set "defaultProvider"/"defaultModel" in {picontext_dir() / "settings.json"}'
    )


def build_session(args: argparse.Namespace, cwd: str | None = None) -> tuple[AgentSession, ModelCatalog]:
    """The AgentSession the flags ask for, with its key checked (no key/unknown model: one line, exit 2)."""
    cwd = cwd or os.getcwd()
    catalog = default_catalog()
    if flag(args, "model"):
        catalog.get(args.model)  # an unknown model fails before a session file is opened or picked
    manager = open_manager(args, cwd)
    model = resolve_model(args, catalog, manager)
    require_api_key(model["provider"], model=model)
    return session_for(manager, model, cwd, flag(args, "thinking")), catalog


def session_for(manager: SessionManager, model: Model, cwd: str, thinking: Any = None) -> AgentSession:
    """The CLI's AgentSession over `manager`: the coding tools in `cwd` and the default prompt."""
    tools = coding_tools(cwd)
    # The CLI agent can see its own context use, ask for a compaction (limited) and recall what a
    # compaction or an edit removed (issue 4 §4); library users opt in with context_tools=True.
    return AgentSession(manager, model=model, tools=tools, system_prompt=default_system_prompt(cwd, tools),
                        thinking_level=thinking, settings=load_settings(cwd), context_tools=True)


# -- the controller --------------------------------------------------------------------------------


def compaction_result_json(result: Any) -> dict[str, Any] | None:
    """The session's compaction result as RPC's JSON (it is already a dict, or None)."""
    return result if isinstance(result, dict) or result is None else dict(result)


class Controller:
    """An AgentSession plus what the CLI modes need around it (see the module docstring)."""

    def __init__(self, session: AgentSession, catalog: ModelCatalog | None = None) -> None:
        self.session = session
        self.catalog = catalog or default_catalog()
        self._listeners: list[Listener] = []
        session.subscribe(self._forward)

    # events
    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def emit(self, event: dict[str, Any]) -> None:
        for listener in list(self._listeners):
            result = listener(event)
            if inspect.isawaitable(result):
                await result

    async def _forward(self, event: AgentEvent) -> None:
        await self.emit(event)  # type: ignore[arg-type]

    # state
    @property
    def manager(self) -> SessionManager:
        return self.session.manager

    @property
    def model(self) -> Model:
        return self.session.model

    @property
    def is_compacting(self) -> bool:
        return self.session.is_compacting

    @property
    def auto_compaction_enabled(self) -> bool:
        return bool(self.session.auto_compaction_enabled)

    def set_auto_compaction(self, enabled: bool) -> None:
        """For this session only (settings files are not changed)."""
        self.session.set_auto_compaction(enabled)

    def context_usage(self) -> tuple[int | None, int, float | None]:
        """(tokens, window, percent); percent None = unknown (right after a compaction)."""
        usage = self.session.get_context_usage()
        window = int(self.model.get("contextWindow") or 0)
        if usage is None:
            return (None, window, 0.0)
        return (usage.tokens, usage.context_window, usage.percent)

    def estimated_percent(self) -> float | None:
        """chars/4 estimate of the context now (what the footer shows until a reply reports usage)."""
        from picontext.compaction.tokens import estimate_messages_tokens

        window = int(self.model.get("contextWindow") or 0)
        return estimate_messages_tokens(self.session.messages) / window * 100 if window > 0 else None

    def footer(self) -> str:
        """`provider/model  37.0%/200k (auto)`; right after a compaction, before a reply reports
        usage, the chars/4 estimate marked `~` (`~4.2%/200k`) where Pi shows `?`."""
        _, window, percent = self.context_usage()
        usage = format_usage(percent, window, self.auto_compaction_enabled)
        measured = self.session.get_context_usage()
        if measured is not None and measured.estimated and percent is not None:
            usage = "~" + usage  # the server reported no usage: a chars/4 estimate
        if percent is None:
            estimate = self.estimated_percent()
            if estimate is not None:
                usage = "~" + format_usage(estimate, window, self.auto_compaction_enabled)
        return f"{self.model['provider']}/{self.model['id']}  {usage}"

    def state(self) -> dict[str, Any]:
        s = self.session
        tokens, window, percent = self.context_usage()
        return {
            "model": {"provider": s.model["provider"], "id": s.model["id"], "contextWindow": window},
            "thinkingLevel": s.thinking_level,
            "isStreaming": s.is_streaming,
            "isCompacting": self.is_compacting,
            "autoCompactionEnabled": self.auto_compaction_enabled,
            "steeringMode": s.steering_mode,
            "followUpMode": s.follow_up_mode,
            "sessionFile": self.manager.stored_in_file(),  # null for a database session: no file
            "sessionId": self.manager.get_session_id(),
            "sessionName": self.manager.get_session_name(),
            "leafId": self.manager.get_leaf_id(),
            "messageCount": len(s.messages),
            "pendingMessageCount": s.pending_message_count,
            "contextUsage": {"tokens": tokens, "contextWindow": window, "percent": percent,
                             "estimated": bool(getattr(s.get_context_usage(), "estimated", False))},
        }

    # actions
    async def compact(self, instructions: str | None = None) -> dict[str, Any] | None:
        """Manual compaction (spec 03 §5); aborts a running response first, refuses while compacting."""
        return compaction_result_json(await self.session.compact(instructions))

    async def navigate_tree(self, target_id: str, *, summarize: bool = False, instructions: str | None = None,
                            label: str | None = None) -> dict[str, Any]:
        """Move the leaf to `target_id`, optionally summarizing the branch left behind (spec 03 §8)."""
        result = await self.session.navigate_tree(target_id, summarize=summarize, custom_instructions=instructions,
                                                  label=label)
        return result if isinstance(result, dict) else _as_dict(result)

    def fork(self, entry_id: str | None = None) -> str | None:
        """Continue in a new session file holding the path to `entry_id` (default: the leaf)."""
        leaf = entry_id or self.manager.get_leaf_id()
        if leaf is None:
            raise CliError("Nothing to fork yet")
        if self.manager.get_entry(leaf) is None:
            raise CliError(f"Entry {leaf} not found")
        return self.manager.create_branched_session(leaf)

    async def set_model(self, ref: str) -> Model:
        model = self.catalog.get(ref)
        require_api_key(model["provider"], model=model)
        await self.session.aset_model(model)  # a foreign lock never blocks the loop
        return model


def _as_dict(value: Any) -> dict[str, Any]:
    """A NavigationResult-like object as the spec's JSON (`cancelled`, `aborted`, `editorText`, `summaryEntry`)."""
    if value is None:
        return {"cancelled": False}
    names = {"cancelled": "cancelled", "aborted": "aborted", "editor_text": "editorText",
             "summary_entry": "summaryEntry"}
    out = {key: getattr(value, name) for name, key in names.items() if getattr(value, name, None) is not None}
    if not out.get("aborted"):
        out.pop("aborted", None)
    return out


# -- footer ----------------------------------------------------------------------------------------


def format_window(window: int) -> str:
    """Pi's window formatting: <1000 as is, <10k one-decimal k, <1M rounded k, <10M one-decimal M."""
    if window < 1000:
        return str(window)
    if window < 10_000:
        return f"{window / 1000:.1f}k"
    if window < 1_000_000:
        return f"{round(window / 1000)}k"
    if window < 10_000_000:
        return f"{window / 1_000_000:.1f}M"
    return f"{round(window / 1_000_000)}M"


def format_usage(percent: float | None, window: int, auto: bool) -> str:
    """`42.3%/200k (auto)`, `?/200k` right after a compaction (spec 03 §7)."""
    value = "?" if percent is None else f"{percent:.1f}%"
    return f"{value}/{format_window(window)}" + (" (auto)" if auto else "")

"""`picontext` / `picontext chat [PROMPT]`: the interactive chat in a terminal.

prompt_toolkit reads the input (history, Tab completion of slash commands and models, a bottom
toolbar with the footer); while the model works, the keys typed are read raw (typeahead.py) and
the reply, tool calls and spinners are drawn by reply_view.py. After every run a footer line:
`provider/model  37.0%/200k (auto)` (spec 03 §7), `~4.2%/200k` (the estimate) right after a
compaction until the next reply reports usage.

Ctrl+C at the prompt clears the line; on an empty line, twice within two seconds leaves (Ctrl+D
and /exit too). While the model works, Esc (or Ctrl+C) aborts, Enter queues the typed text as a
steering message and Alt+Enter as a follow-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.console import Console
from rich.text import Text

from picontext.agent.session import SessionBusyError
from picontext.ai.types import content_text
from picontext.cli import render
from picontext.cli.base import THINKING_CHOICES, CliError, flag
from picontext.cli.modes.common import Controller, build_session, session_for
from picontext.cli.modes.pickers import TreePicker, choose, session_options, tree_rows
from picontext.cli.modes.reply_view import ReplyView, short_args
from picontext.cli.modes.transcript import redraw
from picontext.cli.modes.typeahead import TypeAhead
from picontext.cli.repo import repository
from picontext.errors import PicontextError
from picontext.session.manager import SessionManager

__all__ = ["ChatUI", "ReplyView", "cmd_chat", "session_info", "short_args", "usage_style"]

COMMANDS = {
    "compact": ("[instructions]", "summarize the old part of the conversation now"),
    "tree": ("[ID]", "go to another point of the conversation (optionally summarizing the branch left)"),
    "fork": ("[ID]", "continue in a new session file holding the path to ID (default: here)"),
    "new": ("", "start a new session (this one stays on disk)"),
    "resume": ("[ID]", "switch to another session of this directory (a list, or by id prefix)"),
    "model": ("[provider/id]", "show or change the model (Tab completes)"),
    "thinking": ("[level]", "show or change the thinking level (off minimal low medium high xhigh)"),
    "name": ("[NAME]", "show or set the session's name"),
    "session": ("", "session file, id, entries, tokens and cost"),
    "context": ("", "where the context window goes: system prompt, tools, summaries, messages, free"),
    "export": ("[FILE]", "write the session as a self-contained HTML page (docs/viewer.md)"),
    "help": ("", "this list"),
    "exit": ("", "leave (also /quit, Ctrl+D, or Ctrl+C twice on an empty line)"),
}
ALIASES = {"quit": "exit", "q": "exit"}
KEYS = """\
While the model works: Esc aborts · Enter queues the typed text as a steering message ·
Alt+Enter queues it as a follow-up · Ctrl+O shows the last collapsed output in full.
At the prompt: Tab completes · Ctrl+O expands the last collapsed output · Ctrl+C clears the line."""


def help_text() -> str:
    rows = [f"/{name} {args}".ljust(26) + text for name, (args, text) in COMMANDS.items()]
    return "\n".join(rows) + "\n\n" + KEYS


HELP = help_text()
_EXIT_WINDOW = 2.0  # seconds between two Ctrl+C on an empty line that leave the chat


def cmd_chat(args: argparse.Namespace) -> int:
    if not sys.stdin.isatty() or not sys.stdout.isatty():
        raise CliError('The chat needs a terminal: use picontext -p "prompt" (print mode) or picontext rpc')
    cwd = os.getcwd()
    session, catalog = build_session(args, cwd)
    first = " ".join(getattr(args, "message", None) or []).strip()
    reopened = bool(flag(args, "continue_") or flag(args, "resume") or flag(args, "session"))
    ui = ChatUI(Controller(session, catalog), cwd=cwd, thinking=flag(args, "thinking"))
    asyncio.run(ui.run(first or None, redraw_history=reopened))
    return 0


def usage_style(percent: float | None) -> str:
    if percent is not None and percent > 90:
        return "bold red"
    if percent is not None and percent > 70:
        return "yellow"
    return "dim"


class SlashCompleter(Completer):
    """Slash commands, then models after `/model `."""

    def __init__(self, models: Callable[[], list[str]]) -> None:
        self.models = models

    def get_completions(self, document: Document, complete_event: Any) -> Any:
        text = document.text_before_cursor
        if not text.startswith("/"):
            return
        if " " not in text:
            for name, (_args, about) in COMMANDS.items():
                if name.startswith(text[1:]):
                    yield Completion(f"/{name}", start_position=-len(text), display_meta=about)
            return
        name, _, rest = text[1:].partition(" ")
        if name == "model":
            for ref in self.models():
                if ref.startswith(rest.strip()):
                    yield Completion(ref, start_position=-len(rest.lstrip()))
        elif name == "thinking":
            for level in THINKING_CHOICES:
                if level.startswith(rest.strip()):
                    yield Completion(level, start_position=-len(rest.lstrip()))


class ChatUI:
    """The read-eval-print loop; one prompt or command at a time, typed-ahead messages queued."""

    def __init__(self, controller: Controller, console: Console | None = None, *, cwd: str | None = None,
                 thinking: Any = None) -> None:
        # session text (replies, tool output) is untrusted: its control characters are made visible
        self.console = console or render.SafeConsole(highlight=False)
        self.cwd = cwd or os.getcwd()
        self.thinking = thinking
        self.view = ReplyView(self.console)
        self.view.hints = True
        self.view.server_url = lambda: self.c.model.get("baseUrl")
        self.c = controller
        self._attach(controller)
        self.input: PromptSession[str] = PromptSession(
            history=InMemoryHistory(), completer=SlashCompleter(self._model_refs), complete_while_typing=False,
            key_bindings=self._prompt_keys())
        self.editor_text = ""
        self._abort_task: asyncio.Task[None] | None = None
        self._last_interrupt = 0.0
        self._hint = ""
        self._queued: list[str] = []  # typed-ahead messages not yet seen as user messages
        self.typeahead = TypeAhead(on_abort=self._abort, on_send=self._queue, on_change=self._typed,
                                   on_expand=self.view.expand)

    def _attach(self, controller: Controller) -> None:
        self.c = controller
        controller.subscribe(self.view)
        controller.subscribe(self._give_back_cancelled_prompt)
        controller.subscribe(self._show_delivered)

    def _model_refs(self) -> list[str]:
        return [f"{m['provider']}/{m['id']}" for m in self.c.catalog.all()]

    def _prompt_keys(self) -> KeyBindings:
        keys = KeyBindings()

        @keys.add("c-c")
        def _(event: Any) -> None:
            buffer = event.app.current_buffer
            if buffer.text:
                buffer.reset()
                self._hint = ""
                return
            now = time.monotonic()
            if now - self._last_interrupt < _EXIT_WINDOW:
                event.app.exit(exception=EOFError())
                return
            self._last_interrupt = now
            self._hint = "Press Ctrl+C again to exit"
            event.app.invalidate()

        @keys.add("c-o")
        def _(event: Any) -> None:
            run_in_terminal(self.view.expand)

        return keys

    # -- helpers --------------------------------------------------------------------------------

    def _give_back_cancelled_prompt(self, event: dict[str, Any]) -> None:
        """A prompt aborted before it was sent (Esc during the pre-prompt compaction) goes back
        into the editor instead of being lost."""
        if event.get("type") == "prompt_cancelled":
            texts = [content_text(m.get("content")) for m in event.get("messages") or [] if m.get("role") == "user"]
            self.editor_text = "\n".join(t for t in [*texts, self.editor_text] if t)
            if self.editor_text:
                self.view.line("The prompt was not sent; it is back in the editor.", "yellow")

    def _show_delivered(self, event: dict[str, Any]) -> None:
        """A queued message, once the agent takes it, appears where it joins the conversation."""
        if event.get("type") != "message_end" or event["message"].get("role") != "user":
            return
        text = content_text(event["message"].get("content"))
        if text in self._queued:
            self._queued.remove(text)
            self.view.line(Text("> ", style="bold cyan") + Text(text))

    def _abort(self) -> None:
        if self._abort_task is not None and not self._abort_task.done():
            return
        self.view.line("Aborting…", "yellow")
        for name in ("abort_compaction", "abort_branch_summary"):
            method = getattr(self.c.session, name, None)
            if method is not None:
                with contextlib.suppress(Exception):
                    method()
        self._abort_task = asyncio.get_running_loop().create_task(self.c.session.abort())

    def _queue(self, mode: str, text: str) -> bool:
        if text.startswith("/"):  # a command is not a message: it waits in the editor for the prompt
            self.view.line(f"{text.split()[0]} runs once the model is done (Esc aborts); it stays in the editor",
                           "yellow")
            return False
        self._queued.append(text)
        what = "steering message (after the current tool calls)" if mode == "steer" else \
            "follow-up (when the agent is done)"
        self.view.line(Text(f"⏎ queued {what}: ", style="cyan") + Text(text))
        send = self.c.session.steer if mode == "steer" else self.c.session.follow_up
        asyncio.get_running_loop().create_task(send(text))
        return True

    def _typed(self, text: str) -> None:
        self.view.typed = text
        self.view.refresh()

    def toolbar(self) -> Any:
        if self._hint and time.monotonic() - self._last_interrupt < _EXIT_WINDOW:
            return f" {self._hint}"
        self._hint = ""
        return f" {self.c.footer()}   /help for commands"

    def footer_line(self) -> None:
        _, _, percent = self.c.context_usage()
        self.console.print(Text(f"── {self.c.footer()}", style=usage_style(percent)))

    async def ask(self, question: str, default: str = "") -> str | None:
        try:
            return await self.input.prompt_async(question, default=default)
        except (KeyboardInterrupt, EOFError):
            return None

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        """While the model works: the live region, keys read raw, Ctrl+C as a signal aborts too."""
        loop = asyncio.get_running_loop()
        installed = True
        try:
            loop.add_signal_handler(signal.SIGINT, self._abort)
        except (NotImplementedError, RuntimeError):
            installed = False
        self.view.start()
        try:
            with self.typeahead.active():
                yield
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)
            self.view.stop()
            left = self.typeahead.take().strip()
            if left:  # typed and never sent: back in the editor
                self.editor_text = f"{self.editor_text}\n{left}".strip() if self.editor_text else left

    # -- the loop -------------------------------------------------------------------------------

    def banner(self) -> None:
        m = self.c.manager
        where = m.get_session_file() if m.is_persisted() else "not saved (--no-session)"
        self.console.print(Text("picontext", style="bold") + Text(f"  {self.c.model['provider']}/{self.c.model['id']}"
                                                                  f"  session: {where}", style="dim"))
        self.console.print(Text("Type a message; /help for commands, Ctrl+D to leave.", style="dim"))

    def show_history(self) -> None:
        if self.c.session.messages:
            redraw(self.console, [e for e in self.c.manager.get_branch() if isinstance(e, dict)])
            self.footer_line()

    async def run(self, first: str | None = None, *, redraw_history: bool = False) -> None:
        self.banner()
        if redraw_history:
            self.show_history()
        if first:
            self.console.print(Text("> ", style="bold cyan") + Text(first))
            await self.send(first)
        while True:
            try:
                text = await self.input.prompt_async("> ", default=self.editor_text, bottom_toolbar=self.toolbar)
            except KeyboardInterrupt:
                self.editor_text = ""
                continue
            except EOFError:
                break
            self.editor_text = ""
            self._hint = ""
            text = text.strip()
            if not text:
                continue
            if text.startswith("/"):
                if not await self.command(text):
                    break
                continue
            await self.send(text)
        m = self.c.manager
        if m.is_persisted() and m.get_session_file():
            self.console.print(Text(f"Session saved: {m.get_session_file()}", style="dim"))

    async def send(self, text: str) -> None:
        with self.working():
            try:
                await self.c.session.prompt(text)
            except (SessionBusyError, PicontextError, CliError) as exc:
                self.view.line(str(exc), "bold red")
        await self._unsent_back_to_editor()
        self.footer_line()

    async def _unsent_back_to_editor(self) -> None:
        """Messages queued during a reply that was aborted are not sent later by surprise: they
        go back into the editor, after anything typed there."""
        if self.c.session.is_streaming or not self.c.session.has_queued_messages():
            return
        steering, follow_up = await self.c.session.clear_queue()
        texts = [*steering, *follow_up]
        self._queued = [t for t in self._queued if t not in texts]
        self.editor_text = "\n".join(t for t in [self.editor_text, *texts] if t)
        self.view.line("Queued messages not sent are back in the editor.", "yellow")

    # -- slash commands ------------------------------------------------------------------------

    async def command(self, line: str) -> bool:
        """Run one slash command; False = leave the chat."""
        name, _, rest = line[1:].partition(" ")
        name = ALIASES.get(name, name)
        rest = rest.strip()
        if name == "exit":
            return False
        command = getattr(self, f"cmd_{name}", None) if name in COMMANDS else None
        if command is None:
            self.view.line(f"Unknown command /{name}; /help lists them", "red")
            return True
        try:
            await command(rest)
        except (CliError, PicontextError, ValueError) as exc:
            self.view.line(str(exc), "bold red")
        return True

    async def cmd_help(self, _: str) -> None:
        self.console.print(Text(HELP))

    async def cmd_compact(self, instructions: str) -> None:
        shown = self.view.failures
        with self.working():
            try:
                await self.c.compact(instructions or None)
            except (CliError, PicontextError, RuntimeError) as exc:
                if self.view.failures == shown:  # not yet reported by a compaction_end event
                    self.view.line(str(exc), "bold red")
        self.footer_line()

    # sessions
    def _switch(self, manager: SessionManager) -> None:
        old = self.c
        session = session_for(manager, old.model, self.cwd, self.thinking)
        self._attach(Controller(session, old.catalog))

    async def cmd_new(self, _: str) -> None:
        manager = self.c.manager
        if not manager.is_persisted():
            self._switch(SessionManager.in_memory(self.cwd))
        else:  # the new session lives where the current one does
            self._switch((manager.repository or repository()).create(self.cwd))
        self.view.line("New session", "green")
        self.footer_line()

    async def cmd_resume(self, arg: str) -> None:
        repo = self.c.manager.repository or repository()
        if arg:
            ref = arg.split()[0]
        else:
            current = self.c.manager.get_session_id()
            infos = [i for i in repo.list(self.cwd) if i.id != current][:20]
            if not infos:
                self.view.line(f"No other sessions for {self.cwd}", "dim")
                return
            answer = await choose("Resume which session?", session_options(infos))
            if answer is None:
                return
            chosen = infos[int(answer) - 1]
            ref = chosen.file or chosen.id
        manager = repo.open(ref)
        path = manager.get_session_file() or manager.get_session_location()
        self._switch(manager)
        self.view.line(f"Resumed {path}", "green")
        self.show_history()

    async def cmd_tree(self, arg: str) -> None:
        target = arg.split()[0] if arg else None
        if target is None:
            rows = tree_rows(self.c.manager, max(40, self.console.width - 30))
            if not rows:
                self.view.line("The session is empty", "dim")
                return
            selected: str | None = None
            while True:
                picker = TreePicker(rows, height=max(8, self.console.height - 6))
                if selected is not None:
                    picker.selected = selected
                target = await picker.run()
                if target is None:
                    return
                if picker.action != "label":
                    break
                label = await self.ask(f"Label for {target[:8]} (empty clears it): ")
                if label is not None:
                    await self.c.session.aset_label(target, label.strip() or None)
                selected = target
                rows = tree_rows(self.c.manager, max(40, self.console.width - 30))
        if self.c.manager.get_entry(target) is None:
            matches = [e["id"] for e in self.c.manager.get_entries() if str(e.get("id", "")).startswith(target)]
            if len(matches) != 1:
                raise CliError(f"Entry {target} not found")
            target = matches[0]
        if target == self.c.manager.get_leaf_id():
            self.view.line("Already at this point", "dim")
            return
        choice = await choose("Summarize the branch you leave?", [
            ("n", "No summary"), ("y", "Summarize it"), ("c", "Summarize it with instructions")])
        if choice is None:
            return
        instructions = None
        if choice == "c":
            instructions = await self.ask("Summary instructions: ")
            if instructions is None:
                return
        summarize = choice in ("y", "c")
        with self.working():
            if summarize:
                self.view.spinner("Summarizing the branch…")
            try:
                result = await self.c.navigate_tree(target, summarize=summarize, instructions=instructions)
            finally:
                self.view.stop_spinner()
        if result.get("cancelled"):
            self.view.line("Branch summarization cancelled" if result.get("aborted") else "Navigation cancelled",
                           "yellow")
            return
        summary = " with a summary of the branch left" if result.get("summaryEntry") else ""
        self.view.line(f"Moved to {target[:8]}{summary}", "green")
        if result.get("editorText"):
            self.editor_text = str(result["editorText"])
        self.footer_line()

    async def cmd_fork(self, arg: str) -> None:
        path = self.c.fork(arg or None)
        where = path or "a new in-memory session"
        self.view.line(f"Forked: now in {where}", "green")

    async def cmd_model(self, arg: str) -> None:
        if not arg:
            current = (self.c.model["provider"], self.c.model["id"])
            usable = [m for m in self.c.catalog.all() if _has_key(m)]
            self.view.line(f"Models with a key ({len(usable)}; /model provider/id to change, Tab completes):", "bold")
            for m in sorted(usable, key=lambda m: (m["provider"], m["id"])):
                mark = "●" if (m["provider"], m["id"]) == current else " "
                window = m.get("contextWindow") or 0
                self.console.print(Text(f" {mark} {m['provider']}/{m['id']}", style="bold" if mark == "●" else "")
                                   + Text(f"  {window:,} tokens", style="dim"))
            return
        model = await self.c.set_model(arg)
        self.view.line(f"Model: {model['provider']}/{model['id']}", "green")
        self.footer_line()

    async def cmd_thinking(self, arg: str) -> None:
        if not arg:
            self.view.line(f"Thinking level: {self.c.session.thinking_level} ({' '.join(THINKING_CHOICES)})")
            return
        await self.c.session.aset_thinking_level(arg)  # type: ignore[arg-type]
        self.view.line(f"Thinking level: {arg}", "green")

    async def cmd_name(self, arg: str) -> None:
        if arg:
            await self.c.session.aset_session_name(arg)
        self.view.line(f"Session name: {self.c.manager.get_session_name() or '(none)'}")

    async def cmd_session(self, _: str) -> None:
        m = self.c.manager
        for key, value in format_session_info(session_info(self.c)):
            self.console.print(Text(f"{key:>14}: ", style="dim") + Text(value))
        if not m.is_persisted():
            self.view.line("(not saved: --no-session)", "dim")

    async def cmd_export(self, arg: str) -> None:
        from picontext.cli.export_cmds import write_export

        def export() -> str:  # reads and renders the whole session: off the event loop
            manager = self.c.manager
            if not manager.is_persisted() or not manager.stored():
                raise CliError("Nothing to export yet: the session is written with the first reply")
            file = manager.get_session_file()
            if file is not None:
                return write_export(file, manager.get_leaf_id(), arg or None)
            sid = manager.get_session_id()  # named by its id; the page goes to ID.html here by default
            return write_export(sid, manager.get_leaf_id(), arg or f"{sid}.html")

        self.view.line(f"Exported to {await asyncio.to_thread(export)}", "green")

    async def cmd_context(self, _: str) -> None:
        from picontext.cli.modes.context_view import show

        show(self.console, self.c)


def _has_key(model: Any) -> bool:
    from picontext.ai.auth import require_api_key

    try:
        require_api_key(model["provider"], model=model)
    except PicontextError:
        return False
    return True


def format_session_info(info: dict[str, Any]) -> list[tuple[str, str]]:
    """/session's lines: numbers with separators, cost in dollars, no Python reprs."""
    tokens = info.get("tokens") or {}
    names = {"input": "input", "output": "output", "cacheRead": "cache read", "cacheWrite": "cache write"}
    return [
        ("file", str(info.get("file") or info.get("location") or "(not saved)")),
        ("id", str(info.get("id"))),
        ("name", str(info.get("name") or "(none)")),
        ("model", str(info.get("model"))),
        ("entries", f"{info.get('entries', 0):,}"),
        ("messages", f"{info.get('messages', 0):,}"),
        ("compactions", f"{info.get('compactions', 0):,}"),
        ("tokens", " · ".join(f"{label} {int(tokens.get(key, 0)):,}" for key, label in names.items())),
        ("cost", f"${float(info.get('cost') or 0):.4f}"),
        ("context", str(info.get("context"))),
    ]


def session_info(c: Controller) -> dict[str, Any]:
    """What /session shows (and RPC's get_session_stats returns, in camelCase there)."""
    m = c.manager
    totals = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    cost = 0.0
    messages = 0
    compactions = 0
    for entry in m.get_entries():
        if not isinstance(entry, dict):
            continue
        if entry.get("type") == "compaction":
            compactions += 1
        message = entry.get("message") if entry.get("type") == "message" else None
        if isinstance(message, dict):
            messages += 1
            usage = message.get("usage") if message.get("role") == "assistant" else None
            if isinstance(usage, dict):
                for key in totals:
                    totals[key] += int(usage.get(key) or 0)
                cost += float((usage.get("cost") or {}).get("total") or 0)
    tokens, _, percent = c.context_usage()
    return {
        "file": m.stored_in_file(),
        "location": m.get_session_location(),
        "id": m.get_session_id(),
        "name": m.get_session_name(),
        "model": f"{c.model['provider']}/{c.model['id']}",
        "entries": m.entry_count() if callable(getattr(m, "entry_count", None)) else len(m.get_entries()),
        "messages": messages,
        "compactions": compactions,
        "tokens": totals,
        "cost": round(cost, 6),
        "context": c.footer().split("  ", 1)[-1] + (f" ({tokens:,} tokens)" if tokens is not None else ""),
        "percent": percent,
    }

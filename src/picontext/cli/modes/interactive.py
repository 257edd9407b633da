"""`picontext` / `picontext chat`: the interactive chat in a terminal.

prompt_toolkit reads the input (history, a bottom toolbar with the footer); rich renders the reply
as Markdown while it streams, tool calls as one line each, a spinner while the context is being
compacted, and a footer line after every run: `provider/model  37.0%/200k (auto)` (spec 03 §7;
`?` right after a compaction, until the next reply reports usage).

Slash commands: /compact [instructions], /tree [ID], /fork [ID], /model [provider/id],
/thinking [level], /name [NAME], /session, /help, /quit. Ctrl+C aborts a running reply (or
compaction); at the prompt it clears the line; Ctrl+D (or /quit) leaves.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.history import InMemoryHistory
from rich.console import Console, Group
from rich.live import Live
from rich.markdown import Markdown
from rich.status import Status
from rich.text import Text

from picontext.agent.session import SessionBusyError
from picontext.ai.overflow import is_context_overflow
from picontext.ai.types import content_text
from picontext.cli import render
from picontext.cli.main import CliError
from picontext.cli.modes.common import THINKING_CHOICES, Controller, add_session_flags, build_session
from picontext.errors import PicontextError

HELP = """\
/compact [instructions]   summarize the old part of the conversation now
/tree [ID]                go to another point of the conversation (optionally summarizing the branch left)
/fork [ID]                continue in a new session file holding the path to ID (default: here)
/model [provider/id]      show or change the model
/thinking [level]         show or change the thinking level (off minimal low medium high xhigh)
/name [NAME]              show or set the session's name
/session                  session file, id, entries, tokens and cost
/quit                     leave (Ctrl+D too); Ctrl+C aborts a running reply"""

_SHOWN_IN_TREE = frozenset({"message", "compaction", "branch_summary", "custom_message"})


def register(sub: Any) -> None:
    p = sub.add_parser("chat", help="interactive chat in the terminal (also `picontext` without a command)")
    add_session_flags(p)
    p.set_defaults(handler=cmd_chat)


def cmd_chat(args: argparse.Namespace) -> int:
    if not sys.stdin.isatty() or not sys.stdout.isatty():
        raise CliError('The chat needs a terminal: use picontext -p "prompt" (print mode) or picontext rpc')
    session, catalog = build_session(args, os.getcwd())
    asyncio.run(ChatUI(Controller(session, catalog)).run())
    return 0


def usage_style(percent: float | None) -> str:
    if percent is not None and percent > 90:
        return "bold red"
    if percent is not None and percent > 70:
        return "yellow"
    return "dim"


class ReplyView:
    """Renders the session's events as they come (one Live region per streamed reply)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._live: Live | None = None
        self._status: Status | None = None
        self._text = ""
        self._thinking = ""
        self.failures = 0  # compaction failures shown so far

    # streamed reply
    def _renderable(self) -> Any:
        parts: list[Any] = []
        if self._thinking.strip():
            parts.append(Text(self._thinking.strip(), style="dim italic"))
        if self._text:
            parts.append(Markdown(self._text))
        return Group(*parts)

    def _update(self) -> None:
        if not self.console.is_terminal:
            return  # no live region in a pipe or file: the reply is printed once, when it ends
        if self._live is None:
            self._live = Live(self._renderable(), console=self.console, refresh_per_second=10,
                              vertical_overflow="visible")
            self._live.start()
        else:
            self._live.update(self._renderable())

    def _close(self) -> None:
        if self._live is not None:
            self._live.update(self._renderable(), refresh=True)
            self._live.stop()
            self._live = None
        elif self._text or self._thinking.strip():
            self.console.print(self._renderable())
        self._text = self._thinking = ""

    def spinner(self, message: str) -> None:
        self._close()
        self.stop_spinner()
        self._status = self.console.status(Text(message, style="bold magenta"), spinner="dots")
        self._status.start()

    def stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def line(self, text: str, style: str = "") -> None:
        self._close()
        self.console.print(Text(text, style=style))

    def close(self) -> None:
        self._close()
        self.stop_spinner()

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "message_update":
            inner = event["assistantMessageEvent"]
            if inner["type"] == "text_delta":
                self._text += inner["delta"]
                self._update()
            elif inner["type"] == "thinking_delta":
                self._thinking += inner["delta"]
                self._update()
        elif kind == "message_end" and event["message"].get("role") == "assistant":
            self._close()
            message = event["message"]
            if message.get("stopReason") == "error":
                error = render.short(message.get("errorMessage") or "the model returned an error", 200)
                if is_context_overflow(message):
                    self.line(f"The context overflowed the model's window ({error})", "yellow")
                else:
                    self.line(f"Error: {error}", "bold red")
            elif message.get("stopReason") == "aborted":
                self.line("(aborted)", "yellow")
        elif kind == "tool_execution_start":
            self.line(f"▸ {event['toolName']} {_short_args(event.get('args') or {})}", "cyan")
        elif kind == "tool_execution_end":
            result = event.get("result") or {}
            first = render.short(content_text(result.get("content")) or "", 100)
            if event.get("isError"):
                self.line(f"  ✗ {first}", "red")
            else:
                self.line(f"  ✓ {first}" if first else "  ✓", "dim")
        elif kind == "compaction_start":
            why = {"manual": "", "threshold": " (context over the threshold)",
                   "overflow": " (the context overflowed)"}.get(event.get("reason", ""), "")
            self.spinner(f"Compacting context{why}…")
        elif kind == "compaction_end":
            self.stop_spinner()
            result = event.get("result")
            if event.get("aborted"):
                self.line("Compaction cancelled", "yellow")
            elif result is None:
                self.failures += 1
                self.line(f"Compaction failed: {event.get('errorMessage') or 'unknown error'}", "bold red")
            else:
                before = event.get("tokensBefore", result.get("tokensBefore"))
                after = event.get("tokensAfter", result.get("estimatedTokensAfter"))
                numbers = f": {before:,} → {after:,} tokens" if isinstance(before, int) and isinstance(after, int) \
                    else ""
                again = "; retrying the request" if event.get("willRetry") else ""
                self.line(f"✓ Context compacted ({event.get('reason')}){numbers}{again}", "bold magenta")
        elif kind == "compaction_skipped":
            self.line(str(event.get("message") or "Compaction skipped"), "yellow")
        elif kind == "compaction_background_start":
            self.line("compacting in background…", "dim magenta")
        elif kind == "compaction_background_discarded":
            self.line(f"background summary discarded ({event.get('reason')}); compacting the usual way when due",
                      "yellow")
        elif kind == "auto_retry_start":
            delay = (event.get("delayMs") or 0) / 1000
            self.line(f"Retrying in {delay:.1f}s (attempt {event.get('attempt')}/{event.get('maxAttempts')}): "
                      f"{event.get('errorMessage')}", "yellow")
        elif kind == "auto_retry_end" and not event.get("success"):
            self.line(f"Giving up after {event.get('attempt')} attempts: {event.get('finalError')}", "red")


def _short_args(args: dict[str, Any]) -> str:
    parts = []
    for key, value in args.items():
        shown = render.short(value, 60) if isinstance(value, str) else render.short(repr(value), 40)
        if isinstance(value, str) and "\n" in value:
            shown = f"<{len(value.splitlines())} lines>"
        parts.append(f"{key}={shown}")
    return render.short(" ".join(parts), 160)


class ChatUI:
    """The read-eval-print loop; one prompt or command at a time."""

    def __init__(self, controller: Controller, console: Console | None = None) -> None:
        self.c = controller
        self.console = console or Console(highlight=False)
        self.view = ReplyView(self.console)
        self.c.subscribe(self.view)
        self.c.subscribe(self._give_back_cancelled_prompt)
        self.input: PromptSession[str] = PromptSession(history=InMemoryHistory())
        self.editor_text = ""
        self._abort_task: asyncio.Task[None] | None = None

    # -- helpers --------------------------------------------------------------------------------

    def _give_back_cancelled_prompt(self, event: dict[str, Any]) -> None:
        """A prompt aborted before it was sent (Ctrl+C during the pre-prompt compaction) goes back
        into the editor instead of being lost."""
        if event.get("type") == "prompt_cancelled":
            texts = [content_text(m.get("content")) for m in event.get("messages") or [] if m.get("role") == "user"]
            self.editor_text = "\n".join(t for t in texts if t)
            if self.editor_text:
                self.view.line("The prompt was not sent; it is back in the editor.", "yellow")

    def toolbar(self) -> Any:
        state = "  compacting…" if self.c.is_compacting else ""
        return f" {self.c.footer()}{state}   /help for commands"

    def footer_line(self) -> None:
        _, _, percent = self.c.context_usage()
        self.console.print(Text(f"── {self.c.footer()}", style=usage_style(percent)))

    async def ask(self, question: str, default: str = "") -> str | None:
        try:
            return await self.input.prompt_async(question, default=default)
        except (KeyboardInterrupt, EOFError):
            return None

    @contextlib.contextmanager
    def _ctrl_c_aborts(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()

        def abort() -> None:
            self.view.line("Aborting…", "yellow")
            for name in ("abort_compaction", "abort_branch_summary"):
                method = getattr(self.c.session, name, None)
                if method is not None:
                    with contextlib.suppress(Exception):
                        method()
            self._abort_task = loop.create_task(self.c.session.abort())

        installed = True
        try:
            loop.add_signal_handler(signal.SIGINT, abort)
        except (NotImplementedError, RuntimeError):
            installed = False
        try:
            yield
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)
            self.view.close()

    # -- the loop -------------------------------------------------------------------------------

    def banner(self) -> None:
        m = self.c.manager
        where = m.get_session_file() if m.is_persisted() else "not saved (--no-session)"
        self.console.print(Text("picontext", style="bold") + Text(f"  {self.c.model['provider']}/{self.c.model['id']}"
                                                                  f"  session: {where}", style="dim"))
        self.console.print(Text("Type a message; /help for commands, Ctrl+D to leave.", style="dim"))
        if self.c.session.messages:
            self.footer_line()

    async def run(self) -> None:
        self.banner()
        while True:
            try:
                text = await self.input.prompt_async("> ", default=self.editor_text, bottom_toolbar=self.toolbar)
            except KeyboardInterrupt:
                self.editor_text = ""
                continue
            except EOFError:
                break
            self.editor_text = ""
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
        with self._ctrl_c_aborts():
            try:
                await self.c.session.prompt(text)
            except (SessionBusyError, PicontextError, CliError) as exc:
                self.view.line(str(exc), "bold red")
        self.footer_line()

    # -- slash commands ------------------------------------------------------------------------

    async def command(self, line: str) -> bool:
        """Run one slash command; False = leave the chat."""
        name, _, rest = line[1:].partition(" ")
        rest = rest.strip()
        handler = {
            "quit": None, "exit": None, "q": None,
            "help": self.cmd_help, "compact": self.cmd_compact, "tree": self.cmd_tree, "fork": self.cmd_fork,
            "model": self.cmd_model, "thinking": self.cmd_thinking, "name": self.cmd_name,
            "session": self.cmd_session,
        }
        if name not in handler:
            self.view.line(f"Unknown command /{name}; /help lists them", "red")
            return True
        command = handler[name]
        if command is None:
            return False
        try:
            await command(rest)
        except (CliError, PicontextError, ValueError) as exc:
            self.view.line(str(exc), "bold red")
        return True

    async def cmd_help(self, _: str) -> None:
        self.console.print(Text(HELP))

    async def cmd_compact(self, instructions: str) -> None:
        shown = self.view.failures
        with self._ctrl_c_aborts():
            try:
                await self.c.compact(instructions or None)
            except (CliError, PicontextError, RuntimeError) as exc:
                if self.view.failures == shown:  # not yet reported by a compaction_end event
                    self.view.line(str(exc), "bold red")
        self.footer_line()

    def tree_rows(self) -> list[tuple[str, str, bool, bool]]:
        """(id, text, on the current path, is the leaf) for every entry worth picking, in tree order."""
        m = self.c.manager
        leaf = m.get_leaf_id()
        on_path = {e.get("id") for e in m.get_branch()}
        rows: list[tuple[str, str, bool, bool]] = []
        stack = [(node, 0) for node in reversed(m.get_tree())]
        while stack:
            node, depth = stack.pop()
            entry = node.entry
            shown = isinstance(entry, dict) and entry.get("type") in _SHOWN_IN_TREE
            if shown and not (entry.get("type") == "message" and entry["message"].get("role") == "system"):
                label = f" [{node.label}]" if node.label else ""
                indent = "  " * min(depth, 8)
                text = f"{indent}{render.entry_summary(entry, 80)}{label}"
                rows.append((entry["id"], text, entry["id"] in on_path, entry["id"] == leaf))
            branching = len(node.children) > 1
            for child in reversed(node.children):
                stack.append((child, depth + 1 if branching else depth))
        return rows

    async def cmd_tree(self, arg: str) -> None:
        target = arg.split()[0] if arg else None
        if target is None:
            rows = self.tree_rows()
            if not rows:
                self.view.line("The session is empty", "dim")
                return
            for n, (entry_id, text, current, leaf) in enumerate(rows, 1):
                mark = "  ◀ you are here" if leaf else ""
                self.console.print(Text(f"{n:>3} {entry_id[:8]} {text}{mark}",
                                        style="bold" if current else "dim"))
            answer = await self.ask("Go to entry # or id (Enter = stay): ")
            if not answer or not answer.strip():
                return
            answer = answer.strip()
            if answer.isdigit() and 1 <= int(answer) <= len(rows):
                target = rows[int(answer) - 1][0]
            else:
                matches = [r[0] for r in rows if r[0].startswith(answer)]
                if len(matches) != 1:
                    self.view.line(f"No single entry matches {answer!r}", "red")
                    return
                target = matches[0]
        if self.c.manager.get_entry(target) is None:
            matches = [e["id"] for e in self.c.manager.get_entries() if str(e.get("id", "")).startswith(target)]
            if len(matches) != 1:
                raise CliError(f"Entry {target} not found")
            target = matches[0]
        if target == self.c.manager.get_leaf_id():
            self.view.line("Already at this point", "dim")
            return
        choice = await self.ask("Summarize the branch you leave? [n]o / [y]es / [c]ustom instructions: ", "n")
        if choice is None:
            return
        choice = choice.strip().lower()[:1] or "n"
        instructions = None
        if choice == "c":
            instructions = await self.ask("Summary instructions: ")
            if instructions is None:
                return
        summarize = choice in ("y", "c")
        with self._ctrl_c_aborts():
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
            self.view.line(f"Model: {self.c.model['provider']}/{self.c.model['id']} "
                           f"(window {self.c.model.get('contextWindow')}); /model provider/id to change it")
            return
        model = self.c.set_model(arg)
        self.view.line(f"Model: {model['provider']}/{model['id']}", "green")
        self.footer_line()

    async def cmd_thinking(self, arg: str) -> None:
        if not arg:
            self.view.line(f"Thinking level: {self.c.session.thinking_level} ({' '.join(THINKING_CHOICES)})")
            return
        self.c.session.set_thinking_level(arg)  # type: ignore[arg-type]
        self.view.line(f"Thinking level: {arg}", "green")

    async def cmd_name(self, arg: str) -> None:
        if arg:
            self.c.manager.append_session_info(arg)
        self.view.line(f"Session name: {self.c.manager.get_session_name() or '(none)'}")

    async def cmd_session(self, _: str) -> None:
        m = self.c.manager
        info = session_info(self.c)
        for key, value in info.items():
            self.console.print(Text(f"{key:>14}: ", style="dim") + Text(str(value)))
        if not m.is_persisted():
            self.view.line("(not saved: --no-session)", "dim")


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
        "file": m.get_session_file() if m.is_persisted() else None,
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

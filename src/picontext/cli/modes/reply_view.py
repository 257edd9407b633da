"""How the chat shows a session's events while the model works.

One transient live region at the bottom of the terminal holds what is still changing: the reply
being streamed (its last screenful), a spinner with the elapsed time and how to cancel, the text
typed ahead and the keys that act on it. Everything finished is printed once above it: the whole
reply when it ends (so an aborted partial reply appears exactly once), tool calls with their
output (line breaks kept, collapsed to a few lines; Ctrl+O prints the last one in full), edits as
a diff, compaction results and notices.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.segment import Segment
from rich.spinner import Spinner
from rich.text import Text

from picontext.ai.error_text import readable_error
from picontext.ai.overflow import is_context_overflow
from picontext.ai.types import content_text
from picontext.cli import render

TOOL_LINES = 4  # tool output lines shown before "… +N lines (Ctrl+O to expand)"
DIFF_LINES = 12
NOTHING_TO_COMPACT = "Nothing to compact"
UNREACHABLE = ("Connection error", "Network error", "Request timed out")


def compaction_error(message: str) -> str:
    """The reason without the repeated "Compaction failed: " prefixes of nested errors."""
    while message.lower().startswith("compaction failed: "):
        message = message[len("compaction failed: "):]
    return message


class _Region:
    """The live region's content, recomputed on every refresh (so the elapsed time moves)."""

    def __init__(self, view: ReplyView) -> None:
        self.view = view

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        v = self.view
        parts: list[Any] = []
        if v.thinking.strip():
            parts.append(Text(v.thinking.strip(), style="dim italic"))
        if v.text:
            parts.append(Markdown(v.text))
        status: list[Any] = []
        if v.status is not None:
            status.append(Text(v.status, style="dim magenta"))
        if v.activity is not None:
            message, started = v.activity
            elapsed = int(time.monotonic() - started)
            cancel = " · Esc to cancel" if v.hints else ""
            status.append(Spinner("dots", Text(f"{message}… {elapsed}s{cancel}", style="bold magenta"),
                                  style="magenta"))
        if v.typed:
            status.append(Text("✎ ", style="bold cyan") + Text(render.short(v.typed, options.max_width - 4)))
            status.append(Text("  Enter: steer · Alt+Enter: follow-up · Esc: abort", style="dim"))
        elif v.working and v.hints:
            status.append(Text("Esc: abort · type to queue a message", style="dim"))
        room = max(3, (options.height or console.height) - len(status) - 2)
        lines = console.render_lines(Group(*parts), options.update(height=None), pad=False) if parts else []
        if len(lines) > room:  # the last screenful: the region never outgrows the terminal
            lines = [[Segment(f"… {len(lines) - room + 1} lines above", console.get_style("dim"))],
                     *lines[-room + 1:]]
        for line in lines:
            yield from line
            yield Segment.line()
        if status:
            yield Group(*status)


class ReplyView:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.text = ""
        self.thinking = ""
        self.typed = ""
        self.activity: tuple[str, float] | None = None  # (what, monotonic start) for the spinner
        self.status: str | None = None  # a background compaction's progress, under the reply
        self.working = False
        self.hints = False  # the chat shows the keys that act (Esc, Ctrl+O...); the demo takes no keys
        self.failures = 0  # compaction failures reported so far
        self.last_output: tuple[str, str] | None = None  # (title, full text) for Ctrl+O
        self.last_error: str | None = None
        self._live: Live | None = None
        self.server_url: Callable[[], str | None] = lambda: None  # the model's baseUrl, named when unreachable

    # -- the live region --------------------------------------------------------------------------

    def start(self) -> None:
        self.working = True
        if self.console.is_terminal and self._live is None:
            self._live = Live(_Region(self), console=self.console, refresh_per_second=8, transient=True,
                              vertical_overflow="visible")
            self._live.start()

    def stop(self) -> None:
        self._flush_reply()
        self.activity = None
        self.typed = ""
        self.working = False
        if self._live is not None:
            self._live.stop()
            self._live = None

    def refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def _flush_reply(self) -> None:
        """Print the streamed reply once, in full, above the region."""
        parts: list[Any] = []
        if self.thinking.strip():
            parts.append(Text(self.thinking.strip(), style="dim italic"))
        if self.text.strip():
            parts.append(Markdown(self.text))
        if not self.console.is_terminal and self.text.strip():
            # Not a terminal (the demo in a pipe): the reply's own text, not Markdown padded and
            # wrapped to a width nobody sees.
            parts[-1] = Text(self.text.strip())
        self.text = self.thinking = ""
        if parts:
            self.console.print(Group(*parts))

    def spinner(self, message: str) -> None:
        self._flush_reply()
        self.activity = (message, time.monotonic())
        self.refresh()

    def stop_spinner(self) -> None:
        self.activity = None
        self.refresh()

    def line(self, text: str | Text, style: str = "") -> None:
        self._flush_reply()
        self.console.print(text if isinstance(text, Text) else Text(text, style=style))

    def close(self) -> None:
        self.stop()

    def expand(self) -> None:
        """Ctrl+O: the last collapsed tool output (or compaction summary) in full."""
        if self.last_output is None:
            self.line("Nothing collapsed to expand", "dim")
            return
        title, body = self.last_output
        self.line(f"── {title} ──", "bold")
        self.console.print(Text(body))

    # -- events -----------------------------------------------------------------------------------

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "message_update":
            inner = event["assistantMessageEvent"]
            if inner["type"] == "text_delta":
                self.text += inner["delta"]
            elif inner["type"] == "thinking_delta":
                self.thinking += inner["delta"]
        elif kind == "message_end" and event["message"].get("role") == "assistant":
            self._flush_reply()
            self._reply_ended(event["message"])
        elif kind == "tool_execution_start":
            self._tool_started(event["toolName"], event.get("args") or {})
        elif kind == "tool_execution_end":
            self._tool_ended(event)
        elif kind == "compaction_start":
            why = {"manual": "", "threshold": " (context over the threshold)",
                   "overflow": " (the context overflowed)"}.get(event.get("reason", ""), "")
            self.spinner(f"Compacting context{why}")
        elif kind == "compaction_end":
            self.status = None
            self._compaction_ended(event)
        elif kind == "compaction_skipped":
            self.line(str(event.get("message") or "Compaction skipped"), "yellow")
        elif kind == "compaction_progress":
            self._progress(event)
        elif kind == "compaction_background_start":
            self.line("compacting in background…", "dim magenta")
        elif kind == "compaction_background_discarded":
            self.status = None
            self.line(f"background summary discarded ({event.get('reason')}); compacting the usual way when due",
                      "yellow")
        elif kind == "auto_retry_start":
            delay = (event.get("delayMs") or 0) / 1000
            self.line(f"Retrying in {delay:.1f}s (attempt {event.get('attempt')}/{event.get('maxAttempts')}): "
                      f"{event.get('errorMessage')}", "yellow")
        elif kind == "auto_retry_end" and not event.get("success"):
            self.line(f"Giving up after {event.get('attempt')} attempts: {event.get('finalError')}", "red")

    def _expand_hint(self) -> str:
        return " (Ctrl+O to expand)" if self.hints else ""

    def _progress(self, event: dict[str, Any]) -> None:
        """A summary over the summarizer's window: the spinner (or, for one written in the
        background, the status line) says how far it is; the elapsed time keeps counting."""
        done, total = event.get("done"), event.get("total")
        part = "turn prefix" if event.get("part") == "turnPrefix" else "history"
        step = (f"{part}: {done} of {total} chunks summarized" if event.get("stage") == "chunks"
                else f"{part}: merging the notes ({done} of {total})")
        if event.get("background"):
            self.status = f"compacting in background, {step} ({int(event.get('elapsedMs') or 0) // 1000}s)"
            self.refresh()
        elif self.activity is not None:
            self.activity = (f"Compacting context, {step}", self.activity[1])
            self.refresh()

    def _reply_ended(self, message: dict[str, Any]) -> None:
        if message.get("stopReason") == "error":
            error = readable_error(message.get("errorMessage") or "") or "the model returned an error"
            error = render.short(error, 300)
            if is_context_overflow(message):
                self.line(f"The context overflowed the model's window ({error})", "yellow")
            else:
                url = self.server_url() if error.startswith(UNREACHABLE) else None
                self.line(f"Error: {error}" + (f" — is the server at {url} running?" if url else ""), "bold red")
        elif message.get("stopReason") == "aborted":
            self.line("(aborted)", "yellow")

    def _tool_started(self, name: str, args: dict[str, Any]) -> None:
        self.line(f"▸ {name} {short_args(args)}", "cyan")
        if name == "edit" and isinstance(args.get("oldText"), str) and isinstance(args.get("newText"), str):
            self._diff(str(args.get("path", "")), args["oldText"], args["newText"])

    def _diff(self, path: str, old: str, new: str) -> None:
        lines = [line for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1)
                 if not line.startswith(("---", "+++"))]
        shown = Text()
        for line in lines[:DIFF_LINES]:
            style = "green" if line.startswith("+") else "red" if line.startswith("-") else \
                "cyan" if line.startswith("@@") else "dim"
            shown.append(f"  {line}\n", style=style)
        if len(lines) > DIFF_LINES:
            shown.append(f"  … +{len(lines) - DIFF_LINES} diff lines{self._expand_hint()}\n", style="dim")
            self.last_output = (f"diff of {path}", "\n".join(lines))
        shown.rstrip()
        self.console.print(shown)

    def _tool_ended(self, event: dict[str, Any]) -> None:
        result = event.get("result") or {}
        body = (content_text(result.get("content")) or "").rstrip("\n")
        lines = body.splitlines()
        error = bool(event.get("isError"))
        mark, style = ("✗", "red") if error else ("✓", "dim")
        if not lines:
            self.line(f"  {mark}", style)
            return
        width = max(20, self.console.width - 6)
        out = Text()
        for n, line in enumerate(lines[:TOOL_LINES]):
            out.append(f"  {mark if n == 0 else ' '} {render.short_line(line, width)}".rstrip() + "\n", style=style)
        if len(lines) > TOOL_LINES:
            out.append(f"    … +{len(lines) - TOOL_LINES} lines{self._expand_hint()}\n", style="dim")
            self.last_output = (f"output of {event.get('toolName')} ({len(lines)} lines)", body)
        out.rstrip()
        self.line(out)

    def _compaction_ended(self, event: dict[str, Any]) -> None:
        self.stop_spinner()
        result = event.get("result")
        if event.get("aborted"):
            self.line("Compaction cancelled", "yellow")
        elif result is None:
            self.failures += 1
            reason = compaction_error(readable_error(str(event.get("errorMessage") or "")) or "unknown error")
            if reason.startswith(NOTHING_TO_COMPACT):
                self.line(f"{reason}: the conversation is still short enough to keep whole", "dim")
            else:
                self.line(f"Compaction failed: {reason}", "bold red")
        else:
            before = event.get("tokensBefore", result.get("tokensBefore"))
            after = event.get("tokensAfter", result.get("estimatedTokensAfter"))
            numbers = f": {before:,} → {after:,} tokens" if isinstance(before, int) and isinstance(after, int) \
                else ""
            again = "; retrying the request" if event.get("willRetry") else ""
            notice = f" ({event['notice']})" if event.get("notice") else ""
            keys = " · Ctrl+O shows the summary" if self.hints else ""
            self.line(f"✓ Context compacted ({event.get('reason')}){numbers}{notice}{again}{keys}",
                      "bold magenta" if not notice else "bold yellow")
            if isinstance(result.get("summary"), str):
                self.last_output = ("compaction summary", result["summary"])


def short_args(args: dict[str, Any]) -> str:
    parts = []
    for key, value in args.items():
        if key in ("oldText", "newText"):
            continue  # shown as a diff
        shown = render.short(value, 60) if isinstance(value, str) else render.short(repr(value), 40)
        if isinstance(value, str) and "\n" in value:
            shown = f"<{len(value.splitlines())} lines>"
        parts.append(f"{key}={shown}")
    return render.short(" ".join(parts), 160)

"""`picontext run -p PROMPT`: print mode. Runs the agent once and prints the reply (text) or every
event as a JSON line (`--mode json`, the same lines `picontext rpc` writes). `picontext -p PROMPT`
is the same command. Interactive chat: `picontext chat` (modes/interactive.py); RPC: `picontext rpc`.

Exit codes: 0 done; 1 the model answered with an error; 2 configuration problem (no key, unknown
model) or the server could not be reached, with one line on stderr; 130 interrupted (Ctrl+C
aborts the run, the aborted reply is saved).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import stat
import sys
from collections.abc import Mapping
from typing import Any

from picontext._json import dumps_line
from picontext.agent.events import AgentEvent, to_json_event
from picontext.agent.session import AgentSession
from picontext.ai.error_text import readable_error
from picontext.ai.overflow import is_context_overflow
from picontext.ai.types import AssistantMessage
from picontext.cli.base import CliError
from picontext.cli.modes.common import build_session
from picontext.cli.modes.reply_view import UNREACHABLE as _UNREACHABLE
from picontext.cli.modes.reply_view import compaction_error


def piped_input() -> str:
    """What was piped or redirected into stdin ("" for a terminal, /dev/null or a closed stdin).

    Only a pipe or a regular file is read: an inherited terminal or character device never
    blocks print mode waiting for input nobody will type."""
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return ""
    if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
        return ""
    return sys.stdin.read()


def _prompt_text(args: argparse.Namespace) -> str:
    """-p PROMPT (or the words after `run`), with piped input joined in: `cat notes.md | picontext
    -p "summarize"` sends the file and then the instruction; `echo question | picontext -p` sends
    the piped text alone."""
    text = getattr(args, "prompt", None)
    words = " ".join(getattr(args, "message", None) or [])
    text = " ".join(t for t in (text, words) if t)
    piped = piped_input()
    if piped.strip():
        text = f"{piped.rstrip()}\n\n{text}" if text.strip() else piped
    if not text.strip():
        raise CliError('No prompt: use picontext -p "your prompt" (or pipe it: echo "question" | picontext -p)')
    return text


def cmd_run(args: argparse.Namespace) -> int:
    text = _prompt_text(args)
    session, _ = build_session(args, os.getcwd())  # no key, unknown model: one line, exit 2
    printer = JsonPrinter() if getattr(args, "mode", "text") == "json" else TextPrinter()
    session.subscribe(printer)
    asyncio.run(_run(session, text))
    return _exit_code(printer.last_reply, session.model, printer.overflow_error)


async def _run(session: AgentSession, text: str) -> None:
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, lambda: loop.create_task(session.abort()))
    try:
        await session.prompt(text)
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        await session.aclose()


_RECOVERY_FAILED = "Context overflow recovery failed: "


def overflow_error(event: Mapping[str, Any]) -> str | None:
    """The error of an overflow compaction that failed (a `compaction_end` event), else None."""
    if event.get("type") != "compaction_end" or event.get("reason") != "overflow" or event.get("result") is not None \
            or event.get("aborted"):
        return None
    return compaction_error(str(event.get("errorMessage") or "unknown error"))


def _overflow_message(error: str | None) -> str:
    """Why an overflowed request could not be recovered, in one line."""
    if error is not None and error.startswith(_RECOVERY_FAILED):  # the summary itself failed
        reason = readable_error(error[len(_RECOVERY_FAILED):]) or "unknown error"
        return f"context overflow: the session could not be compacted: {reason}"
    if error is not None:  # compacted, retried once, and still too large
        return ("context overflow: one compaction and retry did not help; the request is still larger than the "
                "model's window. Try `picontext compact` with --instructions, or a model with a larger window")
    return ("context overflow: the request is larger than the model's window and the session could not be "
            "compacted (is compaction disabled in settings.json?)")


def _exit_code(reply: AssistantMessage | None, model: Any = None, overflow: str | None = None) -> int:
    if reply is None:
        return 0
    reason = reply.get("stopReason")
    if reason == "aborted":
        print("picontext: aborted", file=sys.stderr)
        return 130
    if reason == "error":
        message = readable_error(reply.get("errorMessage") or "") or "the model returned an error"
        if is_context_overflow(reply):
            message = _overflow_message(overflow)
        elif message.startswith(_UNREACHABLE) and isinstance(model, dict) and model.get("baseUrl"):
            message = f"{message} — is the server at {model['baseUrl']} running?"
        print(f"picontext: {message}", file=sys.stderr)
        return 2 if message.startswith(_UNREACHABLE) else 1
    return 0


class TextPrinter:
    """Streams the assistant's text to stdout; tool activity, compactions and overflow recovery
    go to stderr as one line each."""

    def __init__(self) -> None:
        self.last_reply: AssistantMessage | None = None
        self.overflow_error: str | None = None
        self._open_line = False

    def _note(self, text: str) -> None:
        if self._open_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._open_line = False
        print(text, file=sys.stderr, flush=True)

    def __call__(self, event: Mapping[str, Any]) -> None:  # AgentEvent; read by key, not narrowed
        kind = event["type"]
        if kind == "message_update":
            inner = event["assistantMessageEvent"]
            if inner["type"] == "text_delta":
                sys.stdout.write(inner["delta"])
                sys.stdout.flush()
                self._open_line = not inner["delta"].endswith("\n")
        elif kind == "message_end" and event["message"].get("role") == "assistant":
            self.last_reply = event["message"]
            if self._open_line:
                sys.stdout.write("\n")
                sys.stdout.flush()
                self._open_line = False
        elif kind == "tool_execution_start":
            self._note(f"[{event['toolName']}] {_short_args(event['args'])}")
        elif kind in ("auto_retry_start", "summarization_retry_scheduled"):
            self._note(retry_wait_line(event))
        else:
            self._compaction_note(event)  # type: ignore[arg-type]

    def _compaction_note(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "compaction_start":
            why = {"threshold": "the context is over the compaction threshold",
                   "overflow": "the context overflowed the model's window",
                   "manual": "asked to"}.get(str(event.get("reason")), str(event.get("reason")))
            self._note(f"picontext: compacting ({why})…")
        elif kind == "compaction_end":
            if event.get("aborted"):
                self._note("picontext: compaction cancelled")
            elif event.get("result") is None:
                error = compaction_error(str(event.get("errorMessage") or "unknown error"))
                self.overflow_error = overflow_error(event) or self.overflow_error
                if event.get("reason") == "overflow" and error.startswith(_RECOVERY_FAILED):
                    self._note(f"picontext: compaction failed: {readable_error(error[len(_RECOVERY_FAILED):])}")
                elif event.get("reason") == "overflow" and error.startswith(("Context overflow recovery failed",
                                                                             "Truncated response recovery")):
                    self._note("picontext: context overflow: one compaction and retry did not help")
                else:
                    self._note(f"picontext: compaction failed: {error.splitlines()[0]}")
            else:
                before = event.get("tokensBefore")
                after = event.get("tokensAfter")
                numbers = f" {before:,} → {after:,} tokens" if isinstance(before, int) and isinstance(after, int) \
                    else ""
                again = "; retrying the request" if event.get("willRetry") else ""
                notice = f" ({event['notice']})" if event.get("notice") else ""
                self._note(f"picontext: compacted{numbers}{notice}{again}")
        elif kind == "compaction_skipped":
            self._note(f"picontext: {event.get('message') or 'compaction skipped'}")
        elif kind == "compaction_progress":
            line = progress_line(event)
            if line is not None:
                self._note(line)


def progress_line(event: Any) -> str | None:
    """One stderr line for a `compaction_progress` event, or None: the start of each stage, then
    each tenth of it and its end, so a summary of hundreds of chunks prints about ten lines."""
    done, total = int(event.get("done") or 0), max(1, int(event.get("total") or 1))
    elapsed = f"{int(event.get('elapsedMs') or 0) / 1000:.0f}s"
    what = "turn prefix" if event.get("part") == "turnPrefix" else "history"
    if event.get("stage") == "chunks":
        if done == 0:
            return f"picontext: the {what} is larger than the summarizer's window: summarizing it in {total} chunks"
        if done == total or done * 10 // total != (done - 1) * 10 // total:
            return f"picontext: summarized chunk {done} of {total} ({elapsed})"
        return None
    if done == 0:
        return None
    if done == total or done * 10 // total != (done - 1) * 10 // total:
        return f"picontext: merged {done} of {total} note groups ({elapsed})" if total > 1 else \
            f"picontext: merged the notes ({elapsed})"
    return None


def retry_wait_line(event: Any) -> str:
    """One line announcing a retry wait: why, how long, which attempt, and who chose the delay."""
    what = "summary request" if event["type"] == "summarization_retry_scheduled" else "request"
    who = "as the server asked" if event.get("serverRequested") else "back-off"
    error = readable_error(str(event.get("errorMessage") or ""))[:200] or "error"
    return (f"picontext: {what} failed ({error}); retrying in {float(event['delayMs']) / 1000:g}s "
            f"({who}, attempt {event['attempt']}/{event['maxAttempts']})")


class JsonPrinter:
    """Every event as one JSON line on stdout (spec 03 §9)."""

    def __init__(self) -> None:
        self.last_reply: AssistantMessage | None = None
        self.overflow_error: str | None = None

    def __call__(self, event: AgentEvent) -> None:
        if event["type"] == "message_end" and event["message"].get("role") == "assistant":
            self.last_reply = event["message"]  # type: ignore[assignment]
        self.overflow_error = overflow_error(event) or self.overflow_error
        sys.stdout.buffer.write(dumps_line(to_json_event(event)))
        sys.stdout.flush()


def _short_args(args: dict[str, Any]) -> str:
    text = " ".join(f"{k}={v!r}" if not isinstance(v, str) or len(v) < 60 else f"{k}=<{len(v)} chars>"
                    for k, v in args.items())
    return text[:200]

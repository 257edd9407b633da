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
import sys
from collections.abc import Mapping
from typing import Any

from picontext._json import dumps_line
from picontext.agent.events import AgentEvent, to_json_event
from picontext.agent.session import AgentSession
from picontext.ai.types import AssistantMessage
from picontext.cli.main import CliError
from picontext.cli.modes.common import add_session_flags, build_session

_UNREACHABLE = ("Connection error", "Network error", "Request timed out")


def register(sub: Any) -> None:
    p = sub.add_parser("run", help="run the agent once on a prompt and print the reply (print mode)")
    p.add_argument("-p", "--print", dest="prompt", metavar="PROMPT", help="the prompt")
    p.add_argument("message", nargs="*", help="the prompt, if -p is not given")
    p.add_argument("--mode", choices=("text", "json"), default="text", help="text: the reply; json: one event per line")
    add_session_flags(p)
    p.set_defaults(handler=cmd_run)


def _prompt_text(args: argparse.Namespace) -> str:
    text = getattr(args, "prompt", None)
    text = text if text is not None else " ".join(getattr(args, "message", None) or [])
    if not text.strip() and not sys.stdin.isatty():
        text = sys.stdin.read()
    if not text.strip():
        raise CliError('No prompt: use picontext run -p "your prompt"')
    return text


def cmd_run(args: argparse.Namespace) -> int:
    text = _prompt_text(args)
    session, _ = build_session(args, os.getcwd())  # no key, unknown model: one line, exit 2
    printer = JsonPrinter() if getattr(args, "mode", "text") == "json" else TextPrinter()
    session.subscribe(printer)
    asyncio.run(_run(session, text))
    return _exit_code(printer.last_reply)


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


def _exit_code(reply: AssistantMessage | None) -> int:
    if reply is None:
        return 0
    reason = reply.get("stopReason")
    if reason == "aborted":
        print("picontext: aborted", file=sys.stderr)
        return 130
    if reason == "error":
        message = (reply.get("errorMessage") or "the model returned an error").splitlines()[0]
        print(f"picontext: {message}", file=sys.stderr)
        return 2 if message.startswith(_UNREACHABLE) else 1
    return 0


class TextPrinter:
    """Streams the assistant's text to stdout; tool activity goes to stderr as one line each."""

    def __init__(self) -> None:
        self.last_reply: AssistantMessage | None = None
        self._open_line = False

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
            print(f"[{event['toolName']}] {_short_args(event['args'])}", file=sys.stderr)
        elif kind in ("auto_retry_start", "summarization_retry_scheduled"):
            print(retry_wait_line(event), file=sys.stderr)


def retry_wait_line(event: Any) -> str:
    """One line announcing a retry wait: why, how long, which attempt, and who chose the delay."""
    what = "summary request" if event["type"] == "summarization_retry_scheduled" else "request"
    who = "as the server asked" if event.get("serverRequested") else "back-off"
    error = str(event.get("errorMessage") or "").splitlines()[0][:200] if event.get("errorMessage") else "error"
    return (f"picontext: {what} failed ({error}); retrying in {float(event['delayMs']) / 1000:g}s "
            f"({who}, attempt {event['attempt']}/{event['maxAttempts']})")


class JsonPrinter:
    """Every event as one JSON line on stdout (spec 03 §9)."""

    def __init__(self) -> None:
        self.last_reply: AssistantMessage | None = None

    def __call__(self, event: AgentEvent) -> None:
        if event["type"] == "message_end" and event["message"].get("role") == "assistant":
            self.last_reply = event["message"]  # type: ignore[assignment]
        sys.stdout.buffer.write(dumps_line(to_json_event(event)))
        sys.stdout.flush()


def _short_args(args: dict[str, Any]) -> str:
    text = " ".join(f"{k}={v!r}" if not isinstance(v, str) or len(v) < 60 else f"{k}=<{len(v)} chars>"
                    for k, v in args.items())
    return text[:200]

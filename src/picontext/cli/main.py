"""`picontext` command line: parse, dispatch, turn expected failures into one line + exit 2."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Callable, Sequence

from picontext import __version__
from picontext.cli import terminal
from picontext.cli.base import (
    CliError,
    add_session_flags,
    command_ends_process,
    leaves_held_data,
    looks_like_session_id,
)
from picontext.cli.commands import REGISTRATIONS, run_chat, run_print
from picontext.cli.repo import apply_store_flag
from picontext.errors import PicontextError

__all__ = ["build_parser", "command_names", "main", "route", "run"]

_RECURSION_LIMIT = 10_000
_RAW_STDOUT_COMMANDS = frozenset({"chat", "rpc", "demo", "export", "serve"})  # machine output or full-screen
Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The whole parser: every command as its registration (`cli/commands.py`) declares it.
    Building it imports no command's module (a handler imports its own when it runs)."""
    parser = argparse.ArgumentParser(
        prog="picontext",
        description="A coding agent whose sessions never die of a full context window; Pi-compatible sessions "
        "to inspect, project and compact. Without a command: interactive chat (or print mode with -p); "
        "words that are not a command are the chat's first message.",
        epilog='examples:\n  picontext "fix the failing test in app.py"\n  picontext -c\n  picontext -r 01a22be0\n'
        '  cat notes.md | picontext -p "summarize"\n  picontext -- tree of the project: explain it   '
        "(a prompt that starts with a command name)\n  picontext show --tail 20",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"picontext {__version__}")
    parser.add_argument("-p", "--print", dest="prompt", metavar="PROMPT", default=argparse.SUPPRESS, nargs="?",
                        const="",
                        help="print mode: run the agent once on PROMPT (same as `picontext run -p`)")
    parser.add_argument("--mode", choices=("text", "json"), default=argparse.SUPPRESS,
                        help="print mode output: text (the reply) or json (one event per line)")
    # Taken out of the arguments before parsing (apply_store_flag: valid anywhere, on every
    # command); declared here so that --help names it.
    parser.add_argument("--store", metavar="URL", default=argparse.SUPPRESS,
                        help="the session store: a directory, postgresql://... or memory: (also "
                        "$PICONTEXT_STORE; anywhere on the command line, for every command; docs/storage.md)")
    add_session_flags(parser, suppress=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in REGISTRATIONS:
        register(sub)
    return parser


# Top-level options that take a value (the token after them is not a prompt or a command name).
_VALUE_OPTIONS = frozenset({"-p", "--print", "--mode", "--model", "--thinking", "--session"})


def route(argv: Sequence[str], is_command: Callable[[str], bool]) -> list[str]:
    """`picontext fix the bug` -> `picontext chat fix the bug`; `picontext -p X` -> `picontext run -p X`.

    The first word that is not an option decides: a command name runs that command; anything else
    is the start of a prompt. `--` ends the options, so `picontext -- tree of life` is a chat
    prompt that starts with a command name (as is `picontext chat tree of life`). `is_command` is
    called only for the first word that is not an option."""
    args = list(argv)
    printing = False
    i = 0
    while i < len(args):
        token = args[i]
        if token in ("-h", "--help", "--version"):
            return args
        if token == "--":
            break
        if token.startswith("-"):
            name = token.split("=", 1)[0]
            printing = printing or name in ("-p", "--print")
            if name in _VALUE_OPTIONS and "=" not in token:
                i += 1
            elif name in ("-r", "--resume") and i + 1 < len(args) and not args[i + 1].startswith("-") \
                    and looks_like_session_id(args[i + 1]):
                i += 1  # `-r ID`
            i += 1
            continue
        if is_command(token):
            return args
        break
    return ["run" if printing else "chat", *args]


def command_names(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def main(argv: Sequence[str] | None = None) -> int:
    # Pi (V8) reads and writes JSON nested thousands of levels deep, and so must every command;
    # Python's default limit of 1,000 frames is below that (the JSON helpers recurse per level).
    if sys.getrecursionlimit() < _RECURSION_LIMIT:
        sys.setrecursionlimit(_RECURSION_LIMIT)

    # `--store URL` is valid everywhere on the command line
    arguments = apply_store_flag(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if arguments:  # `picontext fix the bug`: words that are not a command are a prompt
        arguments = route(arguments, command_names(parser).__contains__)
    args = parser.parse_args(arguments)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:  # no command: print mode with -p, else the interactive chat
        handler = run_print if getattr(args, "prompt", None) is not None else run_chat
    # Human output neutralizes control characters from session text (cli/terminal.py); JSON output,
    # the RPC protocol and the full-screen modes (which draw with escape codes) write raw.
    raw_stdout = (getattr(args, "json", False) or getattr(args, "mode", None) == "json"
                  or getattr(args, "command", None) in _RAW_STDOUT_COMMANDS
                  or (getattr(args, "command", None) is None and getattr(args, "prompt", None) is None))
    with terminal.safe_output(stdout=not raw_stdout):
        try:
            return handler(args)
        except (CliError, PicontextError) as exc:
            print(f"picontext: {exc}", file=sys.stderr)
            return 2
        except BrokenPipeError:
            return 0
        except RecursionError:
            print(f"picontext: data nested more than {_RECURSION_LIMIT // 2} levels deep", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("picontext: interrupted", file=sys.stderr)
            return 130


def run() -> None:
    command_ends_process()
    code = main()
    # The process ends here. The interpreter's final collections would walk every object still
    # alive (~500 imported modules, a parsed session) only to hand memory back to the OS: about
    # 0.2 s of a one-second `picontext -p`. Frozen objects are skipped by the collector and still
    # freed by reference counting; nothing of ours needs a finalizer at exit (session lines are
    # written with os.write, index files atomically, before the command returns).
    gc.freeze()
    if leaves_held_data():  # a command's data, kept only to be dropped with the process (`hold_until_exit`)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
    sys.exit(code)

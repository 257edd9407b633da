"""What every command shares, importing nothing but argparse: the expected-failure exception,
help layout, and the arguments several commands take (a session, output flags, session flags).

Command modules import these from here, never from `cli/main.py` (which imports them)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = [
    "FILE_HELP",
    "THINKING_CHOICES",
    "CliError",
    "add_file_argument",
    "add_output_flags",
    "add_session_flags",
    "described",
    "flag",
    "hold_until_exit",
    "looks_like_session_id",
]

FILE_HELP = ("session file, session id or unique id prefix (default: the latest session of the current "
             "directory)")
THINKING_CHOICES = ("off", "minimal", "low", "medium", "high", "xhigh")


class CliError(Exception):
    """An expected failure: printed as one line on stderr, exit code 2."""


def described(description: str, *examples: str) -> dict[str, Any]:
    """add_parser() keywords for a subcommand's --help: what it does, then examples."""
    return {"description": description, "epilog": "examples:\n" + "\n".join(f"  {e}" for e in examples),
            "formatter_class": argparse.RawDescriptionHelpFormatter}


def looks_like_session_id(word: str) -> bool:
    """A session id or prefix (hex digits and dashes), not a prompt word."""
    return len(word) >= 4 and all(c in "0123456789abcdefABCDEF-" for c in word)


def add_file_argument(parser: Any) -> None:
    parser.add_argument("file", nargs="?", metavar="SESSION", help=FILE_HELP)


def add_output_flags(parser: Any, *, tail: str = "lines") -> None:
    """--tail N and --no-pager for the commands that print a lot."""
    parser.add_argument("--tail", type=int, metavar="N", help=f"only the last N {tail}")
    parser.add_argument("--no-pager", action="store_true", help="never page through $PAGER, even on a terminal")


def add_session_flags(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    """--model, --thinking and where the conversation is kept: --session/--no-session/-c/-r.

    `suppress=True` leaves attributes unset when a flag is absent: the top-level parser then does
    not overwrite a subcommand's value, nor a subcommand the value given before its name
    (`picontext --model X rpc`)."""
    default: Any = argparse.SUPPRESS if suppress else None
    flag: Any = argparse.SUPPRESS if suppress else False
    parser.add_argument("--model", default=default, help="provider/modelId (default: the session's, then settings)")
    parser.add_argument("--thinking", choices=THINKING_CHOICES, default=default, help="thinking level")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--session", metavar="FILE|ID", default=default,
                       help="use this session: a file (created if missing) or a session id or unique id prefix")
    where.add_argument("--no-session", action="store_true", default=flag, help="do not save the conversation")
    where.add_argument("-c", "--continue", dest="continue_", action="store_true", default=flag,
                       help="continue the latest session of this directory")
    where.add_argument("-r", "--resume", nargs="?", const=True, metavar="ID", default=flag,
                       help="pick one of the recent sessions of this directory, or resume the session with this id")


def flag(args: argparse.Namespace, name: str) -> Any:
    """A session flag's value, or None when it was not given (the flags are suppressed when absent)."""
    return getattr(args, name, None)


_ends_with_command = False  # set by `main.run`: this process ends when its command returns
_held: list[Any] = []  # what a command left to be dropped with the process


def hold_until_exit(value: Any) -> bool:
    """When this process ends with the command (`main.run`), keep `value` alive to the end, out
    of the collector's sight (`gc.freeze`), and have `run` end the process without freeing it:
    freeing a parsed 100k-entry session took ~1 s of the export. Returns False (and keeps
    nothing) where `main()` was called in-process: the caller then frees it as usual. Only for a
    command that has nothing left to do but return (its output written and flushed)."""
    if not _ends_with_command:
        return False
    import gc

    _held.append(value)
    gc.freeze()
    return True


def leaves_held_data() -> bool:
    """True when a command asked (`hold_until_exit`) that the process end without teardown."""
    return bool(_held)


def command_ends_process() -> None:
    global _ends_with_command
    _ends_with_command = True

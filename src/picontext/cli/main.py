"""`picontext` command line: parse, dispatch, turn expected failures into one line + exit 2."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence

from picontext import __version__
from picontext.errors import PicontextError

Handler = Callable[[argparse.Namespace], int]


class CliError(Exception):
    """An expected failure: printed as one line on stderr, exit code 2."""


# Each module registers one group of subcommands (`register(subparsers)`); listed here in help order.
COMMAND_MODULES = (
    "inspect_cmds", "tokens_cmds", "compact_cmds", "sessions_cmds", "eval_cmds", "models_cmds", "auth_cmds",
    "agent_cmds",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="picontext",
        description="Pi-compatible sessions: inspect, project and compact long agent sessions.",
    )
    parser.add_argument("--version", action="version", version=f"picontext {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module_name = f"picontext.cli.{name}"
        if importlib.util.find_spec(module_name) is not None:  # modules of work in progress may be absent
            importlib.import_module(module_name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    try:
        return handler(args)
    except (CliError, PicontextError) as exc:
        print(f"picontext: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("picontext: interrupted", file=sys.stderr)
        return 130


def run() -> None:
    sys.exit(main())

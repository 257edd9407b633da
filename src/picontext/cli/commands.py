"""Every command's registration: its parser, its help, and the handler that runs it.

`cli/main.py` builds the whole parser from `REGISTRATIONS` (in help order) for every call, so the
command names, `--help` and the routing of a first word all come from here, and a command cannot
be registered without being routed. This module imports argparse and `cli/base.py` only: each
handler imports its command's module when it runs, so a command loads what it runs and nothing
of the others (`tests/cli/test_cli_imports.py` counts the modules)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from types import ModuleType
from typing import Any

from picontext.cli.base import add_file_argument, add_output_flags, add_session_flags, described
from picontext.compaction.strategies import EVAL_STRATEGIES, STRATEGIES, SUMMARIZERS

__all__ = ["REGISTRATIONS", "run_chat", "run_print"]


def _inspect_parser(sub: Any, name: str, summary: str, description: str, examples: list[str]) -> Any:
    return sub.add_parser(name, help=summary, **described(description, *examples))


# -- context (context_cmds.py) -----------------------------------------------------------------------

def _register_context(sub: Any) -> None:
    p = sub.add_parser("context", help="what the model sees for a leaf (exactly Pi's buildSessionContext)",
                       **described("The messages the model is sent for the branch ending at a leaf: compactions "
                                   "replaced by their summary, context edits applied. One line per message.",
                                   "picontext context", "picontext context 01a22be0 --tail 20",
                                   "picontext context FILE --json"))
    add_file_argument(p)
    p.add_argument("--leaf", help="entry id to project from (default: the file's last entry)")
    p.add_argument("--json", action="store_true", help="print {messages, thinkingLevel, model} as JSON")
    add_output_flags(p, tail="messages")
    p.set_defaults(handler=lambda args: _context_cmds().cmd_context(args))


# -- inspect (inspect_cmds.py) -----------------------------------------------------------------------

def _register_inspect(sub: Any) -> None:
    p = _inspect_parser(sub, "show", "readable transcript of a branch, marking compacted and edited entries",
                "The branch ending at a leaf, one line per entry (or whole messages with --full); entries a "
                "compaction summarized are dim, entries a context edit omitted are struck through.",
                ["picontext show", "picontext show 01a22be0 --tail 10 --full", "picontext show FILE --leaf 3f2a9c1d"])
    add_file_argument(p)
    p.add_argument("--leaf", help="entry id to show the branch of (default: the file's last entry)")
    p.add_argument("--full", action="store_true", help="whole messages, line breaks kept, instead of one line each")
    p.add_argument("--width", type=int, help="line width (default: the terminal's, 200 in a pipe)")
    add_output_flags(p, tail="entries")
    p.set_defaults(handler=lambda args: _inspect_cmds().cmd_show(args))

    p = _inspect_parser(sub, "tree", "the entry tree: branches, current leaf, labels, compactions, edits",
                "Every entry of the session as a tree: a linear chain stays at one indentation, each branch "
                "point indents; the leaf, labels, compactions and context edits are marked.",
                ["picontext tree", "picontext tree 01a22be0 --tail 30", "picontext tree FILE --json | jq .leafId"])
    add_file_argument(p)
    p.add_argument("--json", action="store_true", help="print {leafId, tree: [{id, type, summary, label?, children}]}")
    add_output_flags(p, tail="lines")
    p.set_defaults(handler=lambda args: _inspect_cmds().cmd_tree(args))

    p = _inspect_parser(sub, "stats", "entries by type, tokens and cost",
                "Counts of entries by type and messages by role, and the token usage and cost recorded in the "
                "file (replies, summaries, tool-nested usage).",
                ["picontext stats", "picontext stats 01a22be0 --json"])
    add_file_argument(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=lambda args: _inspect_cmds().cmd_stats(args))


# -- tokens (tokens_cmds.py) -------------------------------------------------------------------------

def _register_tokens(sub: Any) -> None:
    p = sub.add_parser("tokens", help="context size of a branch: usage anchor plus chars/4 estimates (Pi's rules)",
                       **described("How many tokens the branch ending at a leaf puts in the context: the last reply's "
                                   "reported usage plus chars/4 estimates of what follows it, as Pi counts them.",
                                   "picontext tokens", "picontext tokens 01a22be0 --json"))
    add_file_argument(p)
    p.add_argument("--leaf", help="entry id to measure the branch of (default: the file's last entry)")
    p.add_argument("--json", action="store_true", help='print {"estimate": ..., "perMessage": [...]} as JSON')
    p.add_argument("--accuracy", action="store_true",
                   help="estimate vs reported prompt tokens at every usage report, chars/4 and calibrated")
    p.set_defaults(handler=lambda args: _tokens_cmds().cmd_tokens(args))


# -- compact (compact_cmds.py) -----------------------------------------------------------------------

def _register_compact(sub: Any) -> None:
    p = sub.add_parser("compact", help="summarize or mask the old part of a session (appends to the file)",
                       **described("Compact a session file offline: summarize (with a model) or mask the old part "
                                   "of a branch; the result is appended as a compaction entry, nothing is rewritten.",
                                   "picontext compact --dry-run",
                                   "picontext compact 01a22be0 --model anthropic/claude-sonnet-4-5",
                                   "picontext compact FILE --strategy mask"))
    add_file_argument(p)
    p.add_argument("--leaf", help="compact the branch ending at this entry (default: the file's last entry)")
    p.add_argument("--model", help="model as provider/id: picks per-model settings, and writes the summary unless "
                                   "--summary-model or compaction.model names another")
    p.add_argument("--summary-model", metavar="PROVIDER/ID",
                   help="the model that writes the summary (default: compaction.model, else --model)")
    p.add_argument("--instructions", help="extra focus for the summary")
    p.add_argument("--strategy", choices=STRATEGIES, default="summary",
                   help="summary (Pi's behaviour, default), mask (no model), or mask-then-summary")
    p.add_argument("--dry-run", action="store_true", help="show what would happen; write nothing")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--keep-recent-tokens", type=int, metavar="N", help="override keepRecentTokens")
    p.add_argument("--reserve-tokens", type=int, metavar="N", help="override reserveTokens")
    p.add_argument("--no-fallback", action="store_true",
                   help="when the model's summary fails twice, exit 2 instead of compacting with a mechanical "
                        "summary (the failure records are still appended)")
    p.set_defaults(handler=lambda args: _compact_cmds().cmd_compact(args))


# -- sessions (sessions_cmds.py) ---------------------------------------------------------------------

def _register_sessions(sub: Any) -> None:
    p = sub.add_parser("sessions", help="sessions of the current directory (or --all), newest first",
                       **described("The saved sessions of this directory (or of every project), newest activity "
                                   "first, with their id: any unique id prefix opens one (picontext -r ID, "
                                   "picontext show ID).", "picontext sessions", "picontext sessions --all --json"))
    p.add_argument("--all", action="store_true", help="sessions of every project")
    p.add_argument("--dir", help="list every session in this directory (whatever its project), instead of "
                                 "this project's")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=lambda args: _sessions_cmds().cmd_sessions(args))


# -- eval (eval_cmds.py) -----------------------------------------------------------------------------

def _register_eval(sub: Any) -> None:
    p = sub.add_parser("eval", help="evaluations (offline unless a model is given)",
                       **described("Evaluations of the compaction strategies.", "picontext eval compaction"))
    groups = p.add_subparsers(dest="eval_command", metavar="WHAT", required=True)
    c = groups.add_parser("compaction", help="plant facts in seeded sessions; probe which survive each strategy",
                          **described("Plant facts in seeded sessions, compact them with each strategy and probe "
                                      "which facts survive.", "picontext eval compaction --json"))
    c.add_argument("--rounds", type=int, default=6, help="work rounds per session, each followed by a compaction")
    c.add_argument("--sessions", type=int, default=3, help="seeded sessions per row (default 3)")
    c.add_argument("--strategy", action="append", choices=EVAL_STRATEGIES,
                   help="only these strategies (repeatable; default all)")
    c.add_argument("--summarizer", action="append", choices=SUMMARIZERS,
                   help="only these scripted summarizers (repeatable; default all; ignored with --model)")
    c.add_argument("--model", help="live: this model (provider/id) summarizes and answers the probes")
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.set_defaults(handler=lambda args: _eval_cmds().cmd_eval_compaction(args))
    r = groups.add_parser(
        "replay", help="real sessions: tokens after vs facts kept, per strategy, at real cuts",
        **described("Cut real sessions at their recorded compactions and every N tokens, compact each cut with "
                    "every strategy and count which facts of the transcript (files read and modified, the task, "
                    "the last request, the latest error, the next tool call) the compacted context still holds. "
                    "FILE is a session, or a Claude Code transcript or SWE-agent trajectory (imported first, in "
                    "a temporary directory). Progress goes to stderr (docs/compaction.md, \"Replay\").",
                    "picontext eval replay tests/fixtures/replay/pi/real-before-compaction.jsonl",
                    "picontext eval replay run.traj --every 4000 --keep-recent-tokens 1000 --json",
                    "picontext eval replay s.jsonl --model anthropic/claude-sonnet-4-5 --judge openai/gpt-5"))
    r.add_argument("files", nargs="+", metavar="FILE", help="sessions or transcripts to replay")
    r.add_argument("--strategy", action="append", metavar="S",
                   help="only these strategies (repeatable; default all; an unknown name lists them)")
    r.add_argument("--model", help="the summarizer (provider/id); default: a scripted summarizer, offline")
    r.add_argument("--summarizer", choices=SUMMARIZERS, default="extractive",
                   help="the scripted summarizer without --model (default extractive)")
    r.add_argument("--judge", metavar="PROVIDER/ID", help="a model answers probe questions from each compacted "
                   "context and grades them 0-5")
    r.add_argument("--every", type=int, default=40_000, metavar="N",
                   help="also cut every N tokens of transcript (default 40000; 0: recorded compactions only)")
    r.add_argument("--max-cuts", type=int, metavar="K", help="at most K of the every-N cuts per session, evenly spread")
    r.add_argument("--keep-recent-tokens", type=int, default=20_000, metavar="N",
                   help="tokens kept verbatim by each compaction (default 20000, Pi's)")
    r.add_argument("--reserve-tokens", type=int, default=16_384, metavar="N", help="Pi's reserveTokens (default 16384)")
    r.add_argument("--window", type=int, default=200_000, metavar="N",
                   help="the session model's window, for mask-then-summary's threshold (default 200000)")
    r.add_argument("--from", dest="format", choices=("auto", "claude-code", "swe-agent"), default="auto",
                   help="format of FILEs that are not sessions (default: recognised)")
    r.add_argument("--json", action="store_true", help="one JSON record per session, cut and strategy")
    r.set_defaults(handler=lambda args: _eval_cmds().cmd_eval_replay(args))


# -- models (models_cmds.py) -------------------------------------------------------------------------

def _register_models(sub: Any) -> None:
    p = sub.add_parser("models", help="the model catalog: built-in models and <PICONTEXT_DIR>/models.json",
                       **described("The models picontext knows: built-in ones and your own from "
                                   "<PICONTEXT_DIR>/models.json (docs/providers.md shows examples for Ollama, "
                                   "llama.cpp, vLLM, LM Studio and OpenRouter).", "picontext models list"))
    msub = p.add_subparsers(dest="models_command", metavar="SUBCOMMAND")
    lp = msub.add_parser("list", help="list models with window, max output, prices and key status",
                          **described("Every model with its context window, max output, prices and whether a key "
                                      "is available.", "picontext models list", "picontext models list --json"))
    lp.add_argument("--provider", help="only this provider's models")
    lp.add_argument("--json", action="store_true", help="machine-readable output")
    lp.set_defaults(handler=lambda args: _models_cmds().cmd_models_list(args))
    p.set_defaults(handler=lambda args: _models_cmds().cmd_models_list(args), provider=None, json=False)


# -- auth (auth_cmds.py) -----------------------------------------------------------------------------

def _register_auth(sub: Any) -> None:
    p = sub.add_parser("auth", help="API keys: set (from stdin), list (redacted), remove",
                       **described("Store, list and remove API keys (in <PICONTEXT_DIR>/auth.json, mode 0600).",
                                   "picontext auth set anthropic", "picontext auth list"))
    asub = p.add_subparsers(dest="auth_command", metavar="SUBCOMMAND")
    sp = asub.add_parser("set", help="store a key for PROVIDER, read from stdin (hidden prompt on a terminal)",
                          **described("Store a key for PROVIDER; it is read from stdin (a hidden prompt on a "
                                      "terminal) and never printed.", "picontext auth set openai",
                                      "printenv OPENROUTER_KEY | picontext auth set openrouter"))
    sp.add_argument("provider", help="provider name, as in `picontext models list`")
    # Swallowed so that argparse's "unrecognized arguments: <the key>" never echoes a key.
    sp.add_argument("extra", nargs="*", help=argparse.SUPPRESS)
    sp.set_defaults(handler=lambda args: _auth_cmds().cmd_auth_set(args))
    lp = asub.add_parser("list", help="providers with a key, and where it comes from (redacted)",
                          **described("Providers with a key and where it comes from (environment or auth file), "
                                      "redacted.", "picontext auth list --json"))
    lp.add_argument("--json", action="store_true", help="machine-readable output")
    lp.set_defaults(handler=lambda args: _auth_cmds().cmd_auth_list(args))
    rp = asub.add_parser("remove", help="delete PROVIDER's key from the auth file",
                          **described("Delete PROVIDER's key from the auth file (keys in the environment stay).",
                                      "picontext auth remove openai"))
    rp.add_argument("provider", help="provider name")
    rp.set_defaults(handler=lambda args: _auth_cmds().cmd_auth_remove(args))
    p.set_defaults(handler=lambda args: _auth_cmds().cmd_auth_list(args), json=False)


# -- run (agent_cmds.py) -----------------------------------------------------------------------------

def _register_run(sub: Any) -> None:
    p = sub.add_parser("run", help="run the agent once on a prompt and print the reply (print mode)",
                       **described("Print mode: run the agent once and print the reply; piped input is sent "
                                   "before the prompt. `picontext -p PROMPT` is the same command.",
                                   'picontext -p "what does app.py do?"', 'cat notes.md | picontext -p "summarize"',
                                   'git diff | picontext -p "review this" --mode json'))
    p.add_argument("-p", "--print", dest="prompt", metavar="PROMPT", nargs="?", const="",
                   help="the prompt (without a value: read it from stdin)")
    p.add_argument("message", nargs="*", help="the prompt, if -p is not given")
    p.add_argument("--mode", choices=("text", "json"), default="text", help="text: the reply; json: one event per line")
    add_session_flags(p, suppress=True)  # flags given before the command name stay
    p.set_defaults(handler=run_print)


# -- chat (modes/interactive.py) ---------------------------------------------------------------------

def _register_chat(sub: Any) -> None:
    p = sub.add_parser("chat", help="interactive chat in the terminal (also `picontext` without a command)",
                       **described("The interactive chat. `picontext PROMPT` is the same as `picontext chat "
                                   "PROMPT`; a prompt that starts with a command name goes after `--` or `chat`.",
                                   'picontext "fix the failing test in app.py"', "picontext -c",
                                   "picontext -r 01a22be0", "picontext -- tree of the project: explain it"))
    p.add_argument("message", nargs="*", help="a first message to send as soon as the chat starts")
    add_session_flags(p, suppress=True)  # flags given before the command name stay
    p.set_defaults(handler=run_chat)


# -- rpc (modes/rpc.py) ------------------------------------------------------------------------------

def _register_rpc(sub: Any) -> None:
    p = sub.add_parser("rpc", help="JSON-lines commands on stdin, events and responses on stdout",
                       **described("RPC mode: one JSON command per stdin line; the session's events and one "
                                   "response per command on stdout (docs/cli.md lists the commands).",
                                   'echo \'{"type": "prompt", "message": "hi"}\' | picontext rpc --no-session'))
    add_session_flags(p, suppress=True)  # flags given before the command name stay
    p.set_defaults(handler=lambda args: _rpc().cmd_rpc(args))


# -- demo (demo_cmds.py) -----------------------------------------------------------------------------

def _register_demo(sub: Any) -> None:
    p = sub.add_parser("demo", help="watch an agent session outgrow its window and survive (offline, scripted)",
                       **described("An offline demonstration: a scripted model drives a real agent session with a "
                                   "12k window; a pasted log overflows it once, the session compacts and retries, "
                                   "later compacts at its threshold, and finishes.",
                                   "picontext demo", "picontext demo --fast --dir /tmp/demo"))
    p.add_argument("--fast", action="store_true", help="no pauses while streaming")
    p.add_argument("--dir", help="work here instead of a new temporary directory")
    p.set_defaults(handler=lambda args: _demo_cmds().cmd_demo(args))


# -- dropped (dropped_cmds.py) -----------------------------------------------------------------------

def _register_dropped(sub: Any) -> None:
    p = sub.add_parser("dropped", help="entries a compaction or context edit removed from the context; their text",
                       **described("What a compaction or a context edit removed from the model's context, and "
                                   "the original text of any of it.", "picontext dropped",
                                   "picontext dropped 01a22be0 --entry 3f2a9c1d"))
    add_file_argument(p)
    p.add_argument("--entry", metavar="ID", help="print the original text of this entry")
    p.add_argument("--leaf", metavar="ID", help="look at the branch ending here (default: the current leaf)")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(handler=lambda args: _dropped_cmds().cmd_dropped(args))


# -- store (store_cmds.py) ---------------------------------------------------------------------------

def _register_store(sub: Any) -> None:
    p = sub.add_parser("store", help="copy sessions between JSONL files and the session store "
                       "(--store URL or $PICONTEXT_STORE)",
                       **described("Copy sessions between JSONL files and the session store (docs/storage.md).",
                                   "picontext --store postgresql:///picontext store import *.jsonl",
                                   "picontext --store postgresql:///picontext store export 01a22be0 > s.jsonl"))
    ssub = p.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    ip = ssub.add_parser("import", help="store session files in the session store, byte for byte",
                         **described("Store session files in the session store, byte for byte.",
                                     "picontext --store postgresql:///picontext store import s1.jsonl s2.jsonl"))
    ip.add_argument("files", nargs="+", metavar="FILE", help="session files (.jsonl)")
    ip.set_defaults(handler=lambda args: _store_cmds().cmd_import(args))
    ep = ssub.add_parser("export", help="write a stored session to stdout as its JSONL file",
                         **described("Write a stored session to stdout as its JSONL file (readable by Pi).",
                                     "picontext --store postgresql:///picontext store export 01a22be0 > s.jsonl"))
    ep.add_argument("session", metavar="ID", help="session id or a unique prefix")
    ep.set_defaults(handler=lambda args: _store_cmds().cmd_export(args))


# -- export (export_cmds.py) -------------------------------------------------------------------------

def _register_export(sub: Any) -> None:
    p = sub.add_parser("export", help="write the session as one self-contained HTML file (tree, context plot, "
                                      "compactions, cost)",
                       **described("One HTML file that loads nothing: the entry tree with filters and search, "
                                   "every entry, the context size per request, each compaction's dropped entries, "
                                   "cost per model (docs/viewer.md).", "picontext export session.jsonl",
                                   "picontext export session.jsonl --leaf 3f2a9c1d -o branch.html"))
    p.add_argument("file", help="session file (.jsonl), or a session id or unique prefix (also with --store)")
    p.add_argument("--leaf", metavar="ID", help="show the branch ending here (default: the session's leaf)")
    p.add_argument("-o", "--output", metavar="OUT", help="output file (default: FILE with .html; '-' for stdout)")
    p.set_defaults(handler=lambda args: _export_cmds().cmd_export(args))


# -- serve (serve_cmds.py) ---------------------------------------------------------------------------

def _register_serve(sub: Any) -> None:
    p = sub.add_parser("serve", help="local web viewer over the sessions of a directory (127.0.0.1)",
                       **described("A local web viewer: the sessions of this project (or DIR, or all), each "
                                   "opening the export page, redrawn while the session grows (docs/viewer.md).",
                                   "picontext serve", "picontext serve --dir ~/.pi/agent/sessions/--home-me-app-- "
                                   "--port 0"))
    p.add_argument("--dir", help="a session directory (default: this project's sessions)")
    p.add_argument("--all", action="store_true", help="sessions of every project")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only; ::1 for IPv6)")
    p.add_argument("--port", type=int, default=8377, help="port (default 8377; 0 picks a free one)")
    p.set_defaults(handler=lambda args: _serve_cmds().cmd_serve(args))


# -- import (import_cmds.py) -------------------------------------------------------------------------

def _register_import(sub: Any) -> None:
    p = sub.add_parser(
        "import", help="Claude Code transcripts and SWE-agent trajectories as Pi sessions",
        **described("Write each transcript as a Pi v3 session (Claude Code: with its subagents' transcripts found "
                    "beside it, each a session linked to its parent). Sessions go to the directory of their "
                    "working directory under PICONTEXT_DIR/sessions, or into the store --store / PICONTEXT_STORE "
                    "names, or to -o DIR. All files are written, or, "
                    "on the first bad line, none (docs/import.md).",
                    "picontext import ~/.claude/projects/-home-me-app/0a6afc57-2f31-4cb4-8ff0-01247f50c64c.jsonl",
                    "picontext import --from swe-agent trajectories/me/run/*/*.traj -o imported/"))
    p.add_argument("files", nargs="+", metavar="FILE", help="transcripts to import")
    p.add_argument("--from", dest="format", choices=("auto", "claude-code", "swe-agent"), default="auto",
                   help="the transcripts' format (default: recognised from each file)")
    p.add_argument("-o", "--output", metavar="DIR", help="write the sessions into DIR")
    p.add_argument("--force", action="store_true", help="replace sessions imported before")
    p.add_argument("--json", action="store_true", help="one JSON object per written session")
    p.set_defaults(handler=lambda args: _import_cmds().cmd_import(args))



def run_chat(args: argparse.Namespace) -> int:
    """The interactive chat (also `picontext` without a command)."""
    return int(_interactive().cmd_chat(args))


def run_print(args: argparse.Namespace) -> int:
    """Print mode (also `picontext -p PROMPT`)."""
    return int(_agent_cmds().cmd_run(args))


# -- the commands' modules, imported when their command runs ---------------------------------------


def _context_cmds() -> ModuleType:
    from picontext.cli import context_cmds

    return context_cmds


def _inspect_cmds() -> ModuleType:
    from picontext.cli import inspect_cmds

    return inspect_cmds


def _tokens_cmds() -> ModuleType:
    from picontext.cli import tokens_cmds

    return tokens_cmds


def _compact_cmds() -> ModuleType:
    from picontext.cli import compact_cmds

    return compact_cmds


def _sessions_cmds() -> ModuleType:
    from picontext.cli import sessions_cmds

    return sessions_cmds


def _eval_cmds() -> ModuleType:
    from picontext.cli import eval_cmds

    return eval_cmds


def _models_cmds() -> ModuleType:
    from picontext.cli import models_cmds

    return models_cmds


def _auth_cmds() -> ModuleType:
    from picontext.cli import auth_cmds

    return auth_cmds


def _agent_cmds() -> ModuleType:
    from picontext.cli import agent_cmds

    return agent_cmds


def _interactive() -> ModuleType:
    from picontext.cli.modes import interactive

    return interactive


def _rpc() -> ModuleType:
    from picontext.cli.modes import rpc

    return rpc


def _demo_cmds() -> ModuleType:
    from picontext.cli import demo_cmds

    return demo_cmds


def _dropped_cmds() -> ModuleType:
    from picontext.cli import dropped_cmds

    return dropped_cmds


def _store_cmds() -> ModuleType:
    from picontext.cli import store_cmds

    return store_cmds


def _export_cmds() -> ModuleType:
    from picontext.cli import export_cmds

    return export_cmds


def _serve_cmds() -> ModuleType:
    from picontext.cli import serve_cmds

    return serve_cmds


def _import_cmds() -> ModuleType:
    from picontext.cli import import_cmds

    return import_cmds


REGISTRATIONS: tuple[Callable[[Any], None], ...] = (
    _register_context, _register_inspect, _register_tokens, _register_compact, _register_sessions,
    _register_eval, _register_models, _register_auth, _register_run, _register_chat, _register_rpc,
    _register_demo, _register_dropped, _register_store, _register_export, _register_serve, _register_import,
)

"""A command imports only what it needs: `picontext context FILE --json` loads neither the agent,
the providers, httpx nor prompt_toolkit (each CLI call used to import ~650 modules first)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from picontext.session import jsonl_index
from picontext.session.manager import SessionManager


def _imported(args: list[str]) -> set[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "picontext", *args], capture_output=True,
                          text=True, check=True)
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}


def test_context_imports_only_the_session_layer(tmp_path: Path) -> None:
    sm = SessionManager.create(str(tmp_path), str(tmp_path))
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message({"role": "assistant", "content": [], "api": "x", "provider": "p", "model": "m",
                       "usage": {}, "stopReason": "stop", "timestamp": 2})
    modules = _imported(["context", str(sm.get_session_file()), "--json"])
    assert "picontext.session.context_stream" in modules  # the measurement sees the command's own imports
    heavy = {m for m in modules if m.split(".")[0] in ("httpx", "prompt_toolkit", "asyncio", "rich")
             or m.startswith(("picontext.agent", "picontext.ai.providers", "picontext.cli.modes"))
             or m in ("picontext.session.manager", "picontext.session.index", "picontext.session.live")}
    assert heavy == set()  # the columns path needs neither the manager nor the whole-file index, nor rich
    assert len(modules) < 200


def test_a_warm_context_call_loads_no_hashing(tmp_path: Path) -> None:
    """With the entry columns cached and the file unchanged (and settled) nothing is hashed, so
    OpenSSL (`_hashlib`, ~10 ms) is not loaded; the first call, which hashes the file, loads it."""
    sm = SessionManager.create(str(tmp_path), str(tmp_path))
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message({"role": "assistant", "content": [], "api": "x", "provider": "p", "model": "m",
                       "usage": {}, "stopReason": "stop", "timestamp": 2})
    path = sm.get_session_file()
    assert path is not None
    args = ["context", path, "--json"]
    assert "_hashlib" in _imported(args)  # cold: the columns are built, their bytes hashed
    cold_ended_ns = time.time_ns()
    # Recorded right after the file's last write, the cache is "racy" (jsonl_index.RACY_NS): it is
    # checked against every covered byte until a call finds the file settled. What is awaited is
    # the clock itself, so this waits for it.
    settled_ns = os.stat(path).st_ctime_ns + jsonl_index.RACY_NS
    time.sleep(max(0, settled_ns - time.time_ns()) / 1e9 + 0.05)
    checked = _imported(args)
    if cold_ended_ns < settled_ns:  # recorded while racy (on a loaded machine it may be settled already)
        assert "_hashlib" in checked  # the racy cache checked, and recorded as settled
    assert not {"_hashlib", "hashlib"} & _imported(args)  # warm


def test_help_still_lists_every_command() -> None:
    out = subprocess.run([sys.executable, "-m", "picontext", "--help"], capture_output=True, text=True,
                         check=True).stdout
    for command in ("context", "sessions", "compact", "run", "chat"):
        assert command in out
    assert "--store URL" in out and "PICONTEXT_STORE" in out  # taken out before parsing, still documented


# -- every command imports only what it runs -----------------------------------------------------------

SRC = Path(__file__).resolve().parents[2] / "src" / "picontext"
COMMAND_MODULES = sorted(
    {f"picontext.cli.{p.stem}" for p in (SRC / "cli").glob("*_cmds.py")} - {"picontext.cli.store_cmds"}
    | {"picontext.cli.modes.interactive", "picontext.cli.modes.rpc"}
)
"""The modules that run commands (store_cmds is not one here: `--store` is read before any command)."""
HELP_LIMIT = 100


def _command_paths() -> list[list[str]]:
    """Every command and subcommand the parser knows, e.g. ["show"], ["auth", "set"]."""
    from picontext.cli.main import build_parser

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> list[list[str]]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append([*prefix, name])
                    found.extend(walk(sub, [*prefix, name]))
        return found

    return walk(build_parser(), [])


def _import_lines(args: list[str], cwd: Path | None = None, code: int = 0) -> list[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "picontext", *args], capture_output=True,
                          text=True, cwd=cwd, env={**os.environ, "PICONTEXT_DIR": str(cwd or ".")})
    assert proc.returncode == code, proc.stderr[-2000:]
    return [line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and not line.rstrip().endswith("imported package")]


def test_help_imports_fewer_than_100_modules_and_no_command() -> None:
    modules = _import_lines(["--help"])
    assert "picontext.cli.commands" in modules  # the measurement sees the registrations
    assert len(modules) < HELP_LIMIT, len(modules)  # 678 when --help imported every command's module
    assert not set(modules) & set(COMMAND_MODULES)


@pytest.mark.parametrize("command", [" ".join(c) for c in _command_paths()])
def test_each_commands_help_imports_what_the_top_level_help_imports(command: str) -> None:
    """`picontext export --help` loaded 119 modules, `show --help` 21: a command's help runs its
    parser only, and every parser is the registration (cli/commands.py)."""
    modules = set(_import_lines([*command.split(), "--help"]))
    assert not modules & set(COMMAND_MODULES), command
    assert len(modules) < HELP_LIMIT, (command, len(modules))


def test_every_command_is_routed_export_and_serve_included() -> None:
    from picontext.cli.main import build_parser, command_names, route

    names = command_names(build_parser())
    assert {"export", "serve", "import", "store", "show", "chat", "run"} <= names
    for name in names:  # the first word names the command, it is not a chat prompt
        assert route([name, "x"], names.__contains__) == [name, "x"]
    assert route(["explain", "x"], names.__contains__) == ["chat", "explain", "x"]


def _session_file(tmp_path: Path) -> str:
    sm = SessionManager.create(str(tmp_path), str(tmp_path / "sessions"))
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message({"role": "assistant", "content": [{"type": "text", "text": "hello"}], "api": "x",
                       "provider": "p", "model": "m", "usage": {}, "stopReason": "stop", "timestamp": 2})
    path = sm.get_session_file()
    assert path is not None
    return path


RUNS = [
    (["context", "{file}"], "picontext.cli.context_cmds"),
    (["show", "{file}"], "picontext.cli.inspect_cmds"),
    (["tree", "{file}"], "picontext.cli.inspect_cmds"),
    (["stats", "{file}", "--json"], "picontext.cli.inspect_cmds"),
    (["tokens", "{file}"], "picontext.cli.tokens_cmds"),
    (["dropped", "{file}"], "picontext.cli.dropped_cmds"),
    (["compact", "{file}", "--dry-run", "--strategy", "mask"], "picontext.cli.compact_cmds"),  # nothing to: 2
    (["export", "{file}", "-o", "{tmp}/out.html"], "picontext.cli.export_cmds"),
    (["sessions", "--all"], "picontext.cli.sessions_cmds"),
    (["models", "list", "--json"], "picontext.cli.models_cmds"),
    (["auth", "list", "--json"], "picontext.cli.auth_cmds"),
]


@pytest.mark.parametrize(("args", "owner"), RUNS, ids=[" ".join(a[:2]) for a, _ in RUNS])
def test_a_command_imports_its_own_module_and_no_other_commands(tmp_path: Path, args: list[str], owner: str) -> None:
    path = _session_file(tmp_path)
    code = 2 if args[0] == "compact" else 0
    modules = set(_import_lines([a.format(file=path, tmp=tmp_path) for a in args], cwd=tmp_path, code=code))
    assert modules & set(COMMAND_MODULES) == {owner}

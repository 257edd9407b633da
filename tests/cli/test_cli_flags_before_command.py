"""Session flags given before the command's name (`picontext --model X rpc`) are the command's:
the subcommand's own defaults used to overwrite them (rpc, chat and run ignored --model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from inprocess import run_main

from picontext.cli.main import build_parser, route


@pytest.mark.parametrize("command", [["rpc"], ["chat"], ["run", "-p", "hi"]])
def test_flags_before_the_command_reach_it(command: list[str]) -> None:
    argv = ["--model", "p/m", "--thinking", "high", "--session", "s.jsonl", *command]
    args = build_parser().parse_args(route(argv, lambda word: word in ("rpc", "chat", "run")))
    assert (args.model, args.thinking, args.session) == ("p/m", "high", "s.jsonl")
    after = build_parser().parse_args(route(["--model", "p/m", *command, "--model", "q/n"], lambda w: True))
    assert after.model == "q/n"  # the one nearer the command wins


def test_rpc_runs_with_the_model_given_before_it(tmp_path: Path) -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    provider = {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "k",
                "models": [{"id": "m1", "contextWindow": 1000}, {"id": "m2", "contextWindow": 2000}]}
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.run([sys.executable, "-m", "picontext", "--model", "scripted/m2", "--thinking", "low",
                           "--no-session", "rpc"], input=json.dumps({"id": 1, "type": "get_state"}) + "\n",
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    state = next(line for line in map(json.loads, proc.stdout.splitlines()) if line.get("id") == 1)["data"]
    assert state["model"]["id"] == "m2" and state["thinkingLevel"] == "low"
    assert state["sessionFile"] is None


def test_print_mode_takes_the_model_given_before_run(tmp_path: Path) -> None:
    result = run_main("--model", "nosuch/model", "run", "-p", "hi", cwd=tmp_path)
    assert result.returncode == 2 and "Unknown provider 'nosuch'" in result.stderr, result.stderr

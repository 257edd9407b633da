"""`picontext PROMPT`: which words start a prompt and which name a command (main.route)."""

from __future__ import annotations

import pytest

from picontext.cli.main import route

COMMANDS = {"tree", "show", "chat", "run", "sessions"}


def commands(word: str) -> bool:
    return word in COMMANDS


@pytest.mark.parametrize(("argv", "routed"), [
    (["fix", "the", "bug"], ["chat", "fix", "the", "bug"]),
    (["fix the bug in app.py"], ["chat", "fix the bug in app.py"]),
    (["--model", "ollama/qwen3:32b", "hello"], ["chat", "--model", "ollama/qwen3:32b", "hello"]),
    (["--model=ollama/qwen3:32b", "hello"], ["chat", "--model=ollama/qwen3:32b", "hello"]),
    (["-c", "and now?"], ["chat", "-c", "and now?"]),
    (["-c"], ["chat", "-c"]),
    (["-r", "01a22be0"], ["chat", "-r", "01a22be0"]),
    (["-r", "01a22be0", "go", "on"], ["chat", "-r", "01a22be0", "go", "on"]),
    (["--", "tree", "of", "life"], ["chat", "--", "tree", "of", "life"]),
    (["-p", "summarize"], ["run", "-p", "summarize"]),
    (["-p"], ["run", "-p"]),
    (["--mode", "json", "-p", "hi"], ["run", "--mode", "json", "-p", "hi"]),
    (["tree"], ["tree"]),
    (["show", "01a22be0", "--tail", "5"], ["show", "01a22be0", "--tail", "5"]),
    (["chat", "tree", "of", "life"], ["chat", "tree", "of", "life"]),
    (["--session", "tree", "hi"], ["chat", "--session", "tree", "hi"]),  # an option's value is not a command
    (["--help"], ["--help"]),
    (["--version"], ["--version"]),
])
def test_route(argv: list[str], routed: list[str]) -> None:
    assert route(argv, commands) == routed


def test_command_names_are_only_looked_up_when_a_word_must_be_checked() -> None:
    def fail(word: str) -> bool:
        raise AssertionError(f"looked up {word!r}")

    assert route(["-c", "--model", "x/y"], fail) == ["chat", "-c", "--model", "x/y"]
    assert route(["--", "tree"], fail) == ["chat", "--", "tree"]

"""Read-only commands on files Pi tolerates: wrong types, deep nesting, huge numbers, terminal
control characters and lone surrogates. No traceback, the file unchanged, human output free of
control characters, JSON output exact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hostile_files import DEEP, HEADER, READ_ONLY, assistant, entry, parse_json, run_cli, user, write_session

CASES: dict[str, list[Any]] = {
    "text_is_list": [entry("a", None, type="message", message=user("hi")),
                     entry("b", "a", type="message", message=assistant([{"type": "text", "text": ["x", 1]}]))],
    "type_is_list": [entry("a", None, type="message", message=user("hi")),
                     entry("b", "a", type=["message"], message=user("x"))],
    "type_is_object": [entry("a", None, type="message", message=user("hi")), entry("b", "a", type={"k": 1})],
    "role_is_list": [entry("a", None, type="message", message={**user("hi"), "role": ["user"]})],
    "role_is_object": [entry("a", None, type="message", message={**user("hi"), "role": {"a": 1}})],
    "deep_arguments": [entry("a", None, type="message", message=user("hi")),
                       entry("b", "a", type="message", message=assistant(
                           [{"type": "toolCall", "id": "t", "name": "x", "arguments": {"d": DEEP}}]))],
    "deep_content": [entry("a", None, type="message", message=user(DEEP))],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_wrong_types_and_deep_nesting_do_not_crash(tmp_path: Path, case: str) -> None:
    path = write_session(tmp_path / f"{case}.jsonl", [HEADER, *CASES[case]])
    before = path.read_bytes()
    for argv in READ_ONLY:
        result = run_cli(*argv, str(path))
        # a one-entry session has nothing to compact: a dry run says why and exits 2, as the real run
        expected = 2 if argv[0] == "compact" else 0
        assert result.code == expected, (argv, result.err)
        assert "Traceback" not in result.err
        if expected == 2:
            assert result.err.startswith("picontext: Nothing to compact") and result.err.count("\n") == 1
        if "--json" in argv:
            parse_json(result.out)
    assert path.read_bytes() == before


def test_stats_with_usage_1e400(tmp_path: Path) -> None:
    path = tmp_path / "inf.jsonl"
    line = json.dumps(entry("a", None, type="message", message=assistant([{"type": "text", "text": "x"}],
                                                                        usage={"input": "INF"})))
    write_session(path, [HEADER], raw_lines=(line.replace('"INF"', "1e400"),))
    result = run_cli("stats", str(path))
    assert result.code == 0, result.err
    assert b"inf" in result.out


HOSTILE = "title\x1b]0;PWNED\x07 clear\x1b[2J cr\rover csi\u009b31m bell\x07 end"


def _has_control(text: str) -> bool:
    return any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in text)


@pytest.mark.parametrize("argv", [["show"], ["tree"], ["context"], ["tokens"], ["dropped"], ["stats"]])
def test_human_output_neutralizes_terminal_controls(tmp_path: Path, argv: list[str]) -> None:
    path = write_session(tmp_path / "esc.jsonl", [
        HEADER,
        entry("a", None, type="message", message=user(HOSTILE)),
        entry("b", "a", type="message", message=assistant([{"type": "text", "text": HOSTILE}])),
        entry("c", "b", type="context_edit", targetId="a", replacement=None),
        entry("d\x1b[2J", "c", type={"x\x1b": 1}),
    ])
    result = run_cli(*argv, str(path))
    assert result.code == 0, result.err
    text = result.out.decode()
    assert not _has_control(text), text
    assert not _has_control(result.err)
    if argv[0] in ("show", "context", "tokens", "dropped"):
        assert "\\x1b]0;PWNED" in text  # shown, not obeyed


def test_json_output_stays_exact(tmp_path: Path) -> None:
    path = write_session(tmp_path / "esc.jsonl", [HEADER, entry("a", None, type="message", message=user(HOSTILE))])
    result = run_cli("context", "--json", str(path))
    assert result.code == 0, result.err
    assert json.loads(result.out)["messages"][0]["content"] == HOSTILE


def test_sessions_lists_a_file_with_lone_surrogates(tmp_path: Path) -> None:
    write_session(tmp_path / "sur.jsonl", [HEADER, entry("a", None, type="message", message=user("half \udc00"))])
    for argv in (["sessions", "--all", "--dir", str(tmp_path)],
                 ["sessions", "--all", "--json", "--dir", str(tmp_path)]):
        for _ in range(2):  # the second listing reads the index cache the first one wrote (or not)
            result = run_cli(*argv)
            assert result.code == 0, result.err
            assert "half" in result.out.decode()


@pytest.mark.parametrize("argv", [["show"], ["tree"], ["context"], ["tokens"], ["dropped"]])
def test_lone_surrogates_in_a_file_are_displayed(tmp_path: Path, argv: list[str]) -> None:
    path = write_session(tmp_path / "sur.jsonl", [
        HEADER,
        entry("a", None, type="message", message=user("half an emoji \ud83d here")),
        entry("b", "a", type="message", message=assistant([{"type": "text", "text": "and \udc00"}])),
    ])
    before = path.read_bytes()
    result = run_cli(*argv, str(path))
    assert result.code == 0, result.err
    if argv[0] in ("show", "context"):
        assert "half an emoji \ufffd here" in result.out.decode()
    assert path.read_bytes() == before

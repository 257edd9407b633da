"""Type-confused entries (hypothesis): any field of any entry type replaced by a list, an object, a
number, null, a bool or another string, or removed. Every read command and `export` prints or
fails with one line and exit 2, never a traceback, and the file is not changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confused_sessions import BASE, MUTATIONS, confuse, write
from hostile_files import READ_ONLY, entry, run_cli, user
from hypothesis import HealthCheck, given, settings

COMMANDS = (*READ_ONLY, ["show", "--full"], ["tree", "--json"], ["compact", "--dry-run", "--strategy", "mask"],
            ["export", "-o", "{out}"])


def _run_all(path: Path, out: Path) -> None:
    from picontext.cli.modes.pickers import tree_rows
    from picontext.errors import SessionFormatError
    from picontext.session.manager import SessionManager

    data = path.read_bytes()
    try:  # the chat's /tree picker
        tree_rows(SessionManager.open(str(path), warn=lambda m: None))
    except SessionFormatError:
        pass  # not a session: the chat says so in one line
    for argv in COMMANDS:
        args = [a.replace("{out}", str(out)) for a in argv]
        result = run_cli(*args, str(path))  # an exception here is a traceback for the user
        assert result.code in (0, 2), (argv, result.err)
        if result.code == 2:
            assert len(result.err.strip().splitlines()) == 1, (argv, result.err)
        elif "--json" in argv:
            json.loads(result.out)
    assert path.read_bytes() == data


def test_the_unconfused_session_reads_cleanly(tmp_path: Path) -> None:
    path = write(tmp_path / "base.jsonl", BASE)
    for argv in COMMANDS:
        args = [a.replace("{out}", str(tmp_path / "o.html")) for a in argv]
        result = run_cli(*args, str(path))
        if argv[:2] == ["compact", "--dry-run"] and result.code == 2:  # as the real run: nothing to compact
            assert result.err.startswith(("picontext: Nothing to compact", "picontext: Nothing to mask"))
            assert len(result.err.splitlines()) == 1
            continue
        assert result.code == 0 and result.err in ("", f"wrote {tmp_path / 'o.html'}\n"), (argv, result.err)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(mutations=MUTATIONS)
def test_type_confused_fields_never_crash_a_read_command(tmp_path: Path, mutations: list[Any]) -> None:
    path = write(tmp_path / "confused.jsonl", confuse(mutations))
    _run_all(path, tmp_path / "confused.html")


HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}


@pytest.mark.parametrize("case", ["type-list", "edited-role-list", "edited-role-object", "cost-total-object"])
def test_reported_confusions(tmp_path: Path, case: str) -> None:
    """The issue's reproductions: an entry `type` that is a list (export crashed), a context edit
    whose target's `role` is a list (Pi accepts it; six commands crashed)."""
    first = entry("a", None, type="message", message=user("hi"))
    if case == "type-list":
        rest = [entry("b", "a", type=["x"])]
    elif case == "cost-total-object":
        rest = [entry("b", "a", type="message", message={
            "role": "assistant", "content": "x", "usage": {"input": 1, "output": 1, "cost": {"total": {"a": 1}}},
            "stopReason": "stop", "provider": "p", "model": "m", "timestamp": 2})]
    else:
        first["message"]["role"] = ["user"] if case == "edited-role-list" else {"r": 1}
        rest = [entry("b", "a", type="context_edit", targetId="a", replacement={"content": "x"})]
    path = write(tmp_path / f"{case}.jsonl", [HEADER, first, *rest])
    _run_all(path, tmp_path / "o.html")
    result = run_cli("context", "--json", str(path))
    assert result.code == 0, result.err

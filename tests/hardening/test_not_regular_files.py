"""A FIFO, a device or a directory given as a session: one line on stderr, exit 2, no hang.
Also: unreadable-line warnings are capped, session directories are private, one odd timestamp
does not break `sessions`."""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_files import HEADER, READ_ONLY, entry, run_cli, user, write_session

MAX_WARNINGS = 10  # picontext.cli.loading.MAX_WARNINGS


def _one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("picontext: "), err
    for needle in needles:
        assert needle in lines[0], err


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _subprocess(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # A FIFO would block an in-process reader forever and /dev/zero never ends: a subprocess can
    # be timed out and held to 2 GB.
    return subprocess.run([sys.executable, "-m", "picontext", *argv], capture_output=True, text=True,
                          cwd=cwd, timeout=60, stdin=subprocess.DEVNULL, preexec_fn=_limit_memory)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.jsonl"
    os.mkfifo(path)
    return path


def test_read_commands_refuse_a_fifo(fifo: Path, tmp_path: Path) -> None:
    for argv in (["show"], ["context", "--json"]):
        result = _subprocess(*argv, str(fifo), cwd=tmp_path)
        _one_line_error(result.returncode, result.stderr, "FIFO", str(fifo))


def test_print_mode_refuses_a_fifo_session(fifo: Path, tmp_path: Path) -> None:
    result = _subprocess("-p", "hi", "--session", str(fifo), cwd=tmp_path)
    _one_line_error(result.returncode, result.stderr, "FIFO")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_read_commands_refuse_a_link_to_dev_zero(tmp_path: Path) -> None:
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")
    result = _subprocess("tree", str(link), cwd=tmp_path)
    _one_line_error(result.returncode, result.stderr, "character device")


@pytest.mark.parametrize("argv", READ_ONLY)
def test_read_commands_refuse_devices_and_directories(tmp_path: Path, argv: list[str]) -> None:
    link = tmp_path / "null.jsonl"
    link.symlink_to("/dev/null")  # in-process: /dev/null ends, /dev/zero would not
    result = run_cli(*argv, str(link))
    _one_line_error(result.code, result.err, "character device")
    result = run_cli(*argv, str(tmp_path))
    _one_line_error(result.code, result.err, "directory")


def test_print_mode_refuses_a_directory_session(tmp_path: Path) -> None:
    result = run_cli("-p", "hi", "--session", str(tmp_path))
    _one_line_error(result.code, result.err, "directory", str(tmp_path))
    result = run_cli("run", "-p", "hi", "--session", "/dev/null")
    _one_line_error(result.code, result.err, "character device")


def test_sessions_skips_fifos_and_devices(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    write_session(folder / "good.jsonl", [HEADER, entry("a", None, type="message", message=user("fine"))])
    (folder / "zero.jsonl").symlink_to("/dev/zero")
    os.mkfifo(folder / "pipe.jsonl")
    result = _subprocess("sessions", "--all", "--json", "--dir", str(folder), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [row["firstMessage"] for row in json.loads(result.stdout)] == ["fine"]


def test_unreadable_line_warnings_are_capped(tmp_path: Path) -> None:
    path = write_session(tmp_path / "junk.jsonl", [HEADER, entry("a", None, type="message", message=user("hi"))],
                         raw_lines=tuple(f"{{broken {n}" for n in range(5000)))
    result = run_cli("context", "--json", str(path))
    assert result.code == 0, result.err
    lines = result.err.splitlines()
    assert MAX_WARNINGS == 10 and len(lines) == 11  # docs/hardening.md: the first 10, then the count of the rest
    assert "4990 more unreadable lines" in lines[-1]
    assert json.loads(result.out)["messages"][0]["content"] == "hi"


def test_session_directories_are_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from picontext.session.manager import SessionManager

    home = tmp_path / "home"
    monkeypatch.setenv("PICONTEXT_DIR", str(home))
    old = os.umask(0o022)
    try:
        manager = SessionManager.create(str(tmp_path / "project"))
    finally:
        os.umask(old)
    directory = Path(manager.get_session_dir())
    assert directory.is_dir()
    for d in (directory, directory.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


def test_a_microsecond_timestamp_does_not_break_sessions(tmp_path: Path) -> None:
    good = write_session(tmp_path / "good.jsonl", [HEADER, entry("a", None, type="message", message=user("fine"))])
    micro = {**user("micro"), "timestamp": 1_772_359_200_000_000}  # µs, not ms: year ~58000
    write_session(tmp_path / "micro.jsonl", [{**HEADER, "id": "s2"}, entry("a", None, type="message", message=micro)])
    for argv in (["sessions", "--all", "--dir", str(tmp_path)],
                 ["sessions", "--all", "--json", "--dir", str(tmp_path)]):
        result = run_cli(*argv)
        assert result.code == 0, result.err
        out = result.out.decode()
        assert "fine" in out and "micro" in out
    assert good.exists()


# Every command that takes a session or a session file (issue 20 item 4): the store refuses what
# is not a regular file before opening it, so no command hangs on a FIFO or reads a directory.
EVERY_COMMAND = (*READ_ONLY, ["export"], ["compact", "--strategy", "mask"], ["store", "import"],
                 ["eval", "replay", "--strategy", "none"], ["run", "-p", "hi", "--session"],
                 ["-p", "hi", "--session"])


@pytest.mark.parametrize("argv", EVERY_COMMAND, ids=" ".join)
def test_every_command_refuses_a_fifo_in_one_line(tmp_path: Path, argv: list[str]) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    result = _subprocess(*argv, str(fifo), cwd=tmp_path)
    _one_line_error(result.returncode, result.stderr, "FIFO", str(fifo))
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.parametrize("argv", EVERY_COMMAND, ids=" ".join)
def test_every_command_refuses_a_directory_in_one_line(tmp_path: Path, argv: list[str]) -> None:
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    result = run_cli(*argv, str(folder))
    _one_line_error(result.code, result.err, "directory", str(folder))

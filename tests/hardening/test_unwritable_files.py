"""Session files that cannot be written: a read-only filesystem, or another user's file (these
tests run as root, which may write anything: a read-only tmpfs stands for it), and a
PICONTEXT_DIR where `sessions/` cannot be created. One line on stderr, exit 2, nothing written,
and the model is not asked first."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hostile_files import HEADER, entry, user
from test_unreadable_files import one_line, picontext

from picontext.testing import ScriptedModelServer


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Callable[[dict[str, bytes]], Path]]:
    """`make(files)`: a directory holding `files`, none of which can be written or created, even
    by root: a read-only tmpfs when this process may mount one (root), else mode bits."""
    mounted: list[Path] = []

    def make(files: dict[str, bytes]) -> Path:
        directory = tmp_path / "read-only"
        directory.mkdir()
        if os.geteuid() == 0:
            mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(directory)],
                                   capture_output=True, text=True)
            if mount.returncode != 0:
                pytest.fail(f"running as root, but cannot mount a read-only tmpfs: {mount.stderr}")
            mounted.append(directory)
        for name, data in files.items():
            (directory / name).write_bytes(data)
        if mounted:
            subprocess.run(["mount", "-o", "remount,ro", str(directory)], check=True)
        else:
            for name in files:
                os.chmod(directory / name, 0o444)
            os.chmod(directory, 0o555)
        return directory

    yield make
    for directory in mounted:
        subprocess.run(["umount", "-l", str(directory)], check=False)
    if (tmp_path / "read-only").exists() and not mounted:
        os.chmod(tmp_path / "read-only", 0o755)


def _scripted(home: Path, server: ScriptedModelServer) -> None:
    provider = {"baseUrl": server.url + "/v1", "api": "openai-completions", "apiKey": "k", "models": [{"id": "m1"}]}
    (home / "models.json").write_text(json.dumps({"providers": {"scripted": provider}}))


def test_print_mode_on_a_session_that_cannot_be_written(read_only: Callable[[dict[str, bytes]], Path],
                                                        server: ScriptedModelServer, home: Path,
                                                        session: Path, tmp_path: Path) -> None:
    _scripted(home, server)
    directory = read_only({"s.jsonl": session.read_bytes()})
    before = (directory / "s.jsonl").read_bytes()
    result = picontext("-p", "hi", "--model", "scripted/m1", "--session", str(directory / "s.jsonl"),
                       home=home, cwd=tmp_path)
    one_line(result, "Cannot write session file", str(directory / "s.jsonl"))
    assert (directory / "s.jsonl").read_bytes() == before
    assert server.requests == []  # refused before the model was asked anything
    new = picontext("-p", "hi", "--model", "scripted/m1", "--session", str(directory / "new.jsonl"),
                    home=home, cwd=tmp_path)
    one_line(new, "Cannot write session file", str(directory / "new.jsonl"))
    assert sorted(os.listdir(directory)) == ["s.jsonl"]


def test_compact_on_a_session_that_cannot_be_written(read_only: Callable[[dict[str, bytes]], Path],
                                                     home: Path, tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "sessions" / "refactor-session.jsonl"
    directory = read_only({"s.jsonl": example.read_bytes()})
    result = picontext("compact", str(directory / "s.jsonl"), "--strategy", "mask", "--keep-recent-tokens", "2000",
                       home=home, cwd=tmp_path)
    one_line(result, "Cannot write session file", str(directory / "s.jsonl"))
    assert (directory / "s.jsonl").read_bytes() == example.read_bytes()


def test_the_store_refuses_a_file_that_cannot_be_written(read_only: Callable[[dict[str, bytes]], Path],
                                                        session: Path) -> None:
    """Below the CLI's early check: the store's own writes say so in one line (SessionWriteError)."""
    from picontext.errors import SessionWriteError
    from picontext.session.paths import ensure_dir
    from picontext.session.store import JsonlSessionStore

    directory = read_only({"s.jsonl": session.read_bytes()})
    store = JsonlSessionStore(str(directory / "s.jsonl"))
    with pytest.raises(SessionWriteError, match=r"^Cannot write session file .*s\.jsonl: "):
        store.append([entry("b", "a", type="message", message=user("more"))])
    with pytest.raises(SessionWriteError, match=r"^Cannot write session file "), store.writer():
        pass
    with pytest.raises(SessionWriteError, match=r"^Cannot write session file .*new\.jsonl: "):
        JsonlSessionStore(str(directory / "new.jsonl")).create([HEADER])
    with pytest.raises(SessionWriteError, match=r"^Cannot create the session directory "):
        ensure_dir(directory / "sub" / "dir")
    assert (directory / "s.jsonl").read_bytes() == session.read_bytes()
    assert sorted(os.listdir(directory)) == ["s.jsonl"]


def test_print_mode_where_sessions_cannot_be_created(read_only: Callable[[dict[str, bytes]], Path],
                                                     server: ScriptedModelServer, home: Path,
                                                     tmp_path: Path) -> None:
    _scripted(home, server)
    (home / "sessions").write_text("a file where the directory should be")
    one_line(picontext("-p", "hi", "--model", "scripted/m1", home=home, cwd=tmp_path),
             "Cannot create the session directory", str(home / "sessions"))
    (home / "sessions").unlink()
    locked = read_only({"models.json": (home / "models.json").read_bytes()})
    one_line(picontext("-p", "hi", "--model", "scripted/m1", home=locked, cwd=tmp_path),
             "Cannot create the session directory", str(locked / "sessions"))
    assert server.requests == []

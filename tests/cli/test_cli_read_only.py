"""Inspecting commands only read (README): run on a Pi user's own directory
(`PICONTEXT_DIR=~/.pi/agent`) they leave it exactly as it was, and the caches they keep (the
listing index, the entry columns) go to picontext's cache directory: `$PICONTEXT_CACHE_DIR`, else
`$XDG_CACHE_HOME/picontext`, else `~/.cache/picontext` (0700, files 0600); nowhere with
`PICONTEXT_INDEX=0`."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from inprocess import run_main

from picontext.session import paths

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import gen_realistic  # noqa: E402

V1 = REPO / "tests" / "fixtures" / "sessions" / "v1" / "real-large-session.jsonl"
SESSION_ID = "0199aa00-0000-7000-8000-0000realistic"
COMMANDS = (["sessions"], ["sessions", "--json"], ["sessions", "--all", "--json"], ["context"],
            ["context", "--json"], ["context", "{file}", "--json"], ["context", "{v1}", "--json"],
            ["context", SESSION_ID[:8], "--json"], ["show"], ["tree"], ["stats"], ["tokens"], ["dropped"],
            ["compact", "--dry-run"])


def _pi_directory(root: Path, project: Path) -> dict[str, Path]:
    """~/.pi/agent as Pi leaves it: settings, auth, a current session of `project` and a legacy one."""
    root.mkdir(parents=True)
    (root / "settings.json").write_text('{"defaultProvider": "anthropic"}\n')
    (root / "auth.json").write_text("{}\n")
    os.chmod(root / "auth.json", 0o600)
    directory = Path(paths.default_session_dir(str(project), str(root / "sessions")))
    directory.mkdir(parents=True)
    session = directory / f"2026-03-01T10-00-00-000Z_{SESSION_ID}.jsonl"
    gen_realistic.generate(str(session), 400, seed=2)
    lines = session.read_bytes().split(b"\n", 1)
    header = json.loads(lines[0])
    header["cwd"] = str(project)
    session.write_bytes(json.dumps(header, separators=(",", ":")).encode() + b"\n" + lines[1])
    legacy = directory / "2025-11-01T10-00-00-000Z_legacy.jsonl"
    shutil.copy(V1, legacy)
    return {"file": session, "v1": legacy}


def _snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Every path under `root` with its kind, mode, size, mtime and content: what a write changes."""
    seen: dict[str, tuple[object, ...]] = {}
    for path in [root, *sorted(root.rglob("*"))]:
        st = path.lstat()
        content = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else None
        seen[str(path.relative_to(root))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size,
                                             st.st_mtime_ns, content)
    return seen


def _run_all(project: Path, files: dict[str, Path]) -> None:
    for argv in COMMANDS:
        args = [arg.format(**{k: str(v) for k, v in files.items()}) for arg in argv]
        result = run_main(*args, cwd=project)
        assert result.returncode == 0, (args, result.stderr)


@pytest.fixture
def pi_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, dict[str, Path]]:
    project = tmp_path / "proj"
    project.mkdir()
    agent = tmp_path / "home" / ".pi" / "agent"
    files = _pi_directory(agent, project)
    monkeypatch.setenv("PICONTEXT_DIR", str(agent))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return agent, project, files


def test_inspecting_a_pi_directory_leaves_it_as_it_was(pi_home: tuple[Path, Path, dict[str, Path]]) -> None:
    agent, project, files = pi_home
    before = _snapshot(agent)
    _run_all(project, files)
    _run_all(project, files)  # a second time: from the caches
    assert _snapshot(agent) == before
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "picontext" / "index"
    kinds = sorted(p.suffix for p in cache.iterdir())
    assert kinds == [".cols", ".cols", ".idx", ".idx"]  # both sessions listed and projected


def test_the_cache_directory_is_private_and_follows_the_environment(
        pi_home: tuple[Path, Path, dict[str, Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, project, files = pi_home
    monkeypatch.delenv("XDG_CACHE_HOME")
    run_main("context", str(files["file"]), "--json")
    default = tmp_path / "home" / ".cache" / "picontext" / "index"  # ~/.cache/picontext
    assert [p.suffix for p in default.iterdir()] == [".cols"]
    for directory in (default, default.parent):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700  # first messages and names live here
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in default.iterdir())

    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored, as XDG says
    assert paths.cache_dir() == str(tmp_path / "home" / ".cache" / "picontext")

    own = tmp_path / "own-cache"
    monkeypatch.setenv("PICONTEXT_CACHE_DIR", str(own))
    run_main("sessions", "--all", cwd=project)
    assert sorted(p.suffix for p in (own / "index").iterdir()) == [".idx", ".idx"]


def test_with_the_index_off_nothing_is_written_anywhere(pi_home: tuple[Path, Path, dict[str, Path]],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    agent, project, files = pi_home
    monkeypatch.setenv("PICONTEXT_INDEX", "0")
    before = _snapshot(agent)
    _run_all(project, files)
    assert _snapshot(agent) == before
    assert not (Path(os.environ["XDG_CACHE_HOME"]) / "picontext").exists()

"""The repository's own scripts, as a newcomer meets them: scripts/test says up front what it
installs and what needs root, scripts/demo says when pip installs, and a pytest run of this
configuration is free of warnings."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bin_without(tmp_path: Path, tools: list[str]) -> str:
    """A PATH holding only `tools` (so tmux, chromium, cmake and apt-get are all missing)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def _needs(env: dict[str, str], *, as_nobody: bool = False) -> subprocess.CompletedProcess[str]:
    command = ["bash", str(REPO / "scripts" / "install" / "needs")]
    if as_nobody and os.geteuid() == 0:
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)


def test_scripts_test_says_first_what_it_installs_and_what_needs_root() -> None:
    text = (REPO / "scripts" / "test").read_text()
    assert text.index("scripts/install/needs") < text.index("pip install")  # before anything is installed
    result = _needs(dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert "needs root and apt-get" in result.stdout and "tmux" in result.stdout and "10-20 minutes" in result.stdout


def test_without_apt_get_it_names_the_tests_that_will_fail_and_why(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": _bin_without(tmp_path, ["bash", "cat", "dirname", "id", "ls"])}
    result = _needs(env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "not installable here (no apt-get on this machine)" in out
    assert "tmux (Debian package): tests/cli/test_cli_interactive.py" in out
    assert "chromium + chromium-driver (Debian packages): the browser tests in tests/viewer/ skip" in out


def test_without_root_it_says_so() -> None:
    with tempfile.TemporaryDirectory() as shared:  # under /tmp: reachable by `nobody`, unlike tmp_path
        Path(shared).chmod(0o755)
        tools = ["bash", "cat", "dirname", "id", "ls"] + (["setpriv"] if os.geteuid() == 0 else [])
        bin_dir = Path(_bin_without(Path(shared), tools))
        (bin_dir / "apt-get").symlink_to(shutil.which("true") or "/bin/true")  # apt-get is here; root is not
        result = _needs({**os.environ, "PATH": str(bin_dir)}, as_nobody=True)
    assert result.returncode == 0, result.stderr
    assert "not installable here (not running as root)" in result.stdout
    assert "tmux (Debian package)" in result.stdout


def test_a_pytest_run_prints_no_warnings() -> None:
    result = subprocess.run([sys.executable, "-m", "pytest", "tests/test_layers.py", "-q", "-p", "no:cacheprovider"],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning" not in (result.stdout + result.stderr).lower(), result.stdout + result.stderr


def _fake_clone(root: Path) -> tuple[Path, Path]:
    """scripts/demo in a directory whose .venv/bin/python and picontext only log how they were
    called (and from where): the script's own logic runs, nothing is installed."""
    clone = root / "clone"
    (clone / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "demo", clone / "scripts" / "demo")
    (clone / "pyproject.toml").write_text("")
    log = root / "calls.log"
    bin_dir = clone / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "picontext"):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} $* in $PWD" >> {log}\n')
        (bin_dir / name).chmod(0o755)
    return clone, log


def test_scripts_demo_says_when_it_installs_and_runs_the_demo_from_the_callers_directory(tmp_path: Path) -> None:
    clone, log = _fake_clone(tmp_path)
    caller = tmp_path / "elsewhere"
    caller.mkdir()
    first = subprocess.run(["bash", str(clone / "scripts" / "demo")], cwd=caller, capture_output=True, text=True,
                           timeout=60)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("scripts/demo: installing picontext into .venv with pip")  # before pip's silence
    assert "source .venv/bin/activate" in first.stdout
    calls = log.read_text().splitlines()
    assert [c for c in calls if "pip install" in c] == [f"python -m pip install --quiet --upgrade pip in {clone}",
                                                        f"python -m pip install --quiet -e . in {clone}"]
    assert calls[-1] == f"picontext demo in {caller}"  # its closing commands are printed for the caller's shell
    log.unlink()
    again = subprocess.run(["bash", str(clone / "scripts" / "demo")], cwd=caller, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 0 and "installing" not in again.stdout  # installed and unchanged: no pip
    assert not [c for c in log.read_text().splitlines() if "pip" in c]

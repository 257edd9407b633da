"""The repository's own scripts, as a newcomer meets them: scripts/test says up front what it
installs and what needs root, and a pytest run of this configuration is free of warnings."""

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
        bin_dir = Path(_bin_without(Path(shared), ["bash", "cat", "dirname", "id", "ls", "setpriv"]))
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

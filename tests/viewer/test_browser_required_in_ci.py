"""Without Chromium the browser tests skip locally but fail in CI (CI=true): a green CI run has
always driven a real browser."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _run_without_browser(ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PICONTEXT_CHROMIUM"] = str(HERE / "no-such-chromium")
    if ci:
        env["CI"] = "true"
    test = f"{HERE / 'test_serve.py'}::test_served_view_refreshes_as_the_session_grows"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", test],
                          capture_output=True, text=True, env=env, cwd=HERE.parents[1])


def test_missing_browser_fails_in_ci() -> None:
    result = _run_without_browser(ci=True)
    assert result.returncode == 1, result.stdout
    assert "browser tests need Chromium in CI" in result.stdout and "no-such-chromium not found" in result.stdout


def test_missing_browser_skips_locally() -> None:
    result = _run_without_browser(ci=False)
    assert result.returncode == 0, result.stdout
    assert "1 skipped" in result.stdout and "no-such-chromium not found" in result.stdout

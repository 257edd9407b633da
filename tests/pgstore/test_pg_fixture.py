"""Without PostgreSQL server binaries (or pgbouncer) the store tests are skipped locally but fail in CI
(a missing server must never pass as a skip there)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_needs_pg.py"
    test.write_text("def test_needs_pg(pg_cluster):\n    assert pg_cluster.url\n")
    (tmp_path / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(REPO / "tests")  # the conftest's test doubles (tests/support)
    env["PICONTEXT_PG_BINDIR"] = str(tmp_path / "no-server-here")
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(test)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)


def test_missing_server_fails_in_ci(tmp_path: Path) -> None:
    result = _run(tmp_path, "true")
    assert result.returncode == 1, result.stdout
    assert "CI needs PostgreSQL for the session store tests" in result.stdout
    assert "1 error" in result.stdout


def test_missing_server_is_a_skip_locally(tmp_path: Path) -> None:
    result = _run(tmp_path, None)
    assert result.returncode == 0, result.stdout
    assert "1 skipped" in result.stdout and "PostgreSQL server binaries not found" in result.stdout


def _run_bouncer(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_needs_pgbouncer.py"
    test.write_text("def test_needs_pgbouncer(pg_bouncer):\n    assert pg_bouncer.url\n")
    (tmp_path / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(REPO / "tests")  # the conftest's test doubles (tests/support)
    env["PICONTEXT_PGBOUNCER"] = str(tmp_path / "no-pgbouncer-here")
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(test)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)


def test_missing_pgbouncer_fails_in_ci(tmp_path: Path) -> None:
    result = _run_bouncer(tmp_path, "true")
    assert result.returncode == 1, result.stdout
    assert "CI needs PgBouncer for the session store tests" in result.stdout
    assert "1 error" in result.stdout


def test_missing_pgbouncer_is_a_skip_locally(tmp_path: Path) -> None:
    result = _run_bouncer(tmp_path, None)
    assert result.returncode == 0, result.stdout
    assert "1 skipped" in result.stdout and "pgbouncer not found" in result.stdout

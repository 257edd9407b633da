"""`picontext serve` as a real process for tests: started on a free port, stopped with Ctrl-C."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def serve_process(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Iterator[str]:
    """Yields the server's URL and its first line; fails the test unless it exits 0 on SIGINT."""
    proc = subprocess.Popen([sys.executable, "-m", "picontext", "serve", *args, "--port", "0"], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # blocks until the server listens
        assert "picontext viewer on http://127.0.0.1:" in first, first + (proc.stderr.read() if proc.stderr else "")
        yield first
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            assert proc.wait(timeout=15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()


def url_of(first_line: str) -> str:
    return first_line.split(" on ", 1)[1].split(" ", 1)[0]

"""auth.json under concurrent writers and a full disk: no lost key, no truncated file."""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

from picontext.ai.auth import resolve_api_key, save_api_key

SECRET = "sk-test-abcdefghijklmnop-7890"


def _writer(directory: str, prefix: str, count: int, barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait()
    for n in range(count):
        save_api_key(f"{prefix}{n}", f"key-{prefix}-{n}", directory=Path(directory))


def test_concurrent_writers_lose_no_key(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), prefix, 40, barrier)) for prefix in ("a", "b", "c")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    data = json.loads((tmp_path / "auth.json").read_text())
    assert len(data) == 120
    for prefix in ("a", "b", "c"):
        for n in range(40):
            assert resolve_api_key(f"{prefix}{n}", env={}, directory=tmp_path) == f"key-{prefix}-{n}"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def _small_disk(limit: int) -> None:
    # RLIMIT_FSIZE makes writes past the limit short, then EFBIG: a nearly full disk, as seen
    # by the process. SIGXFSZ is ignored so that the write fails instead of killing it.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_short_write_is_an_error_and_keeps_the_old_file() -> None:
    home = Path(os.environ["PICONTEXT_DIR"])
    for n in range(60):
        save_api_key(f"provider{n}", f"key-{n:02d}-" + "x" * 24, directory=home)
    path = home / "auth.json"
    before = path.read_bytes()
    limit = len(before) + 40  # room for the old file, not for the new one (one more entry)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    result = subprocess.run([sys.executable, "-m", "picontext", "auth", "set", "openai"], input=SECRET + "\n",
                            capture_output=True, text=True, env=env, timeout=120,
                            preexec_fn=functools.partial(_small_disk, limit))
    assert result.returncode == 2, result
    assert "cannot write" in result.stderr and "Traceback" not in result.stderr
    assert SECRET not in result.stderr + result.stdout
    assert path.read_bytes() == before
    assert [p.name for p in home.iterdir() if p.name.endswith(".tmp")] == []

"""The store's lock: reentrant for the holding thread, exclusive against other processes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from picontext.session.manager import SessionManager
from picontext.session.store import JsonlSessionStore


def _session(tmp_path: Path) -> Path:
    sm = SessionManager.create(str(tmp_path), str(tmp_path))
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message({"role": "assistant", "content": [], "api": "x", "provider": "p", "model": "m",
                       "usage": {}, "stopReason": "stop", "timestamp": 2})
    return Path(sm.get_session_file() or "")


def test_appends_while_this_thread_holds_the_lock_do_not_wait(tmp_path: Path) -> None:
    path = _session(tmp_path)
    sm = SessionManager.open(str(path), str(tmp_path))
    store = JsonlSessionStore(str(path), lock_timeout=2.0)
    started = time.monotonic()
    with store.lock(), store.lock():  # nested: still one lock
        sm.append_message({"role": "user", "content": "inside", "timestamp": 3})
    assert time.monotonic() - started < 1.0
    assert path.read_text().count("\n") == 4


def test_another_process_waits_for_the_lock(tmp_path: Path) -> None:
    path = _session(tmp_path)
    ready = tmp_path / "ready"
    writer = (
        "import pathlib, sys, time\n"
        "from picontext.session.manager import SessionManager\n"
        "sm = SessionManager.open(sys.argv[1])\n"
        "pathlib.Path(sys.argv[2]).write_text('x')\n"
        "sm.append_message({'role': 'user', 'content': 'other', 'timestamp': 9})\n"
        "print(time.time())\n"
    )
    with JsonlSessionStore(str(path)).lock():
        proc = subprocess.Popen([sys.executable, "-c", writer, str(path), str(ready)], stdout=subprocess.PIPE,
                                text=True)
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:  # the writer is about to append
            time.sleep(0.01)
        # A negative claim needs a window: for 0.3 s the writer, ready to append, must not get through.
        time.sleep(0.3)
        assert proc.poll() is None  # still waiting for our lock
        assert path.read_text().count("\n") == 3
        released = time.time()
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert float(out) >= released  # it appended only after we let go
    assert path.read_text().count("\n") == 4


def test_a_lock_held_elsewhere_ends_in_session_locked_error_after_lock_timeout(tmp_path: Path) -> None:
    """docs/storage.md: the writer section waits at most `lock_timeout` (30 s by default), then
    `SessionLockedError`; the async section too. The lock is never released here, so the short
    timeout is not a race: the only question is whether the wait ends, and how."""
    import asyncio
    import fcntl
    import os

    import pytest

    from picontext.errors import SessionLockedError

    path = _session(tmp_path)
    assert JsonlSessionStore(str(path)).lock_timeout == 30.0
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another holder: its own open file description
        store = JsonlSessionStore(str(path), lock_timeout=0.05)
        with pytest.raises(SessionLockedError, match="locked by another process"), store.writer():
            pass

        async def in_the_event_loop() -> None:
            async with store.awriter():
                pass

        with pytest.raises(SessionLockedError):
            asyncio.run(in_the_event_loop())
    finally:
        os.close(fd)
    with JsonlSessionStore(str(path), lock_timeout=0.05).writer():
        pass  # released: taken at once

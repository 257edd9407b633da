"""A function computed beside the caller, in a forked copy of this process.

The export is CPU-bound Python: its two halves (what each entry shows on its own, and the walk
along the branch) share only the parsed session, so on a machine with a free core they run at
once. `beside(work, parallel=True)` forks; the child runs `work()` and sends its result back
pickled through a pipe; the caller gets a function that waits for it. Forking is copy-on-write
(the child reads the parsed session without copying it; what it touches is copied page by page).

It forks only where that is safe and useful: on Linux, when this is the process's only thread
(a fork copies no other thread, so a lock held elsewhere would stay held in the child). When it
does not fork, or the child fails in any way (an exception, a signal, a short or unreadable
result), `work()` runs in this process instead: the result is the same, only later.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

__all__ = ["beside", "can_fork"]

T = TypeVar("T")


def can_fork() -> bool:
    return sys.platform == "linux" and hasattr(os, "fork") and threading.active_count() == 1


@contextlib.contextmanager
def beside(work: Callable[[], T], *, parallel: bool = True) -> Iterator[Callable[[], T]]:
    """`work` started beside the block (forked when `parallel` and `can_fork()`); the yielded
    function returns its result. Leaving the block stops and reaps a child still running."""
    if not (parallel and can_fork()):
        yield work
        return
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, and leave without running the parent's exit handlers
        code = 1
        try:
            os.close(read_end)
            data = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    reaped = False

    def result() -> T:
        nonlocal reaped
        try:
            with os.fdopen(read_end, "rb") as source:
                data = source.read()
        except OSError:
            data = b""
        _, status = os.waitpid(pid, 0)
        reaped = True
        if status == 0 and data:
            try:
                return pickle.loads(data)
            except Exception:  # a result that does not unpickle: compute it here
                pass
        return work()

    try:
        yield result
    finally:
        if not reaped:
            with contextlib.suppress(OSError):
                os.close(read_end)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)

"""A function computed beside the caller, in a forked copy of this process.

The export is CPU-bound Python: its two halves (what each entry shows on its own, and the walk
along the branch) share only the parsed session, so on a machine with a free core they run at
once. `beside(work, parallel=True)` forks; the child runs `work()` and leaves its result
pickled in an anonymous in-memory file (`memfd`); the caller gets a function that waits for it. Forking is copy-on-write
(the child reads the parsed session without copying it; what it touches is copied page by page).
Bulky bytes the result wraps in `pickle.PickleBuffer` are written to the file as they are, beside
the pickle, and come back as read-only memoryviews of the mapped file: neither side copies them
(a 100k-entry export's ~40 MB).

It forks only where that is safe and useful: on Linux, when this is the process's only thread
(a fork copies no other thread, so a lock held elsewhere would stay held in the child). When it
does not fork, or the child fails in any way (an exception, a signal, a short or unreadable
result), `work()` runs in this process instead: the result is the same, only later.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import signal
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["beside", "can_fork", "spare_core"]

T = TypeVar("T")


def can_fork() -> bool:
    return sys.platform == "linux" and hasattr(os, "fork") and threading.active_count() == 1


def spare_core() -> bool:
    """Whether the machine has had a core to spare (1-minute load average below the core count).
    Without one the forked half waits for CPU like the rest and the fork's own cost (a second
    process touching its copy of the session) is a loss: on the shared 2-core machine at load
    5-6 the export ran 5.5-7.9 s in one process vs 8.0-8.4 s forked (docs/viewer.md)."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this system: assume the cores are there
        return True
    return load < (os.cpu_count() or 1)


@contextlib.contextmanager
def beside(work: Callable[[], T], *, parallel: bool = True,
           sent: Callable[[T], T] | None = None) -> Iterator[Callable[[], T]]:
    """`work` started beside the block (forked when `parallel` and `can_fork()`); the yielded
    function returns its result. Leaving the block stops and reaps a child still running.
    `sent`: what a child stores of the result, e.g. with its bulky bytes wrapped in
    `pickle.PickleBuffer` (they come back as memoryviews)."""
    if not (parallel and can_fork()):
        yield work
        return
    # The result goes through an anonymous in-memory file, not a pipe: the child writes it whole
    # and exits without waiting for the caller to read (a pipe would take ~1,000 round trips of
    # 64 KiB for a 100k-entry export's 60 MB, each a wake-up on a loaded machine).
    box = os.memfd_create("picontext-beside", os.MFD_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the child: compute, store, and leave without running the parent's exit handlers
        code = 1
        try:
            buffers: list[pickle.PickleBuffer] = []
            value = work()
            data = pickle.dumps(value if sent is None else sent(value), protocol=5, buffer_callback=buffers.append)
            raws = [b.raw() for b in buffers]
            with os.fdopen(box, "wb") as out:
                # how many buffers, the pickle's size and each buffer's, then the pickle and the buffers
                out.write(struct.pack(f"<{len(raws) + 2}Q", len(raws), len(data), *(r.nbytes for r in raws)))
                out.write(data)
                out.writelines(raws)
            code = 0
        finally:
            os._exit(code)
    reaped = False

    def result() -> T:
        nonlocal reaped
        _, status = os.waitpid(pid, 0)
        reaped = True
        # Unpickled straight from the file's pages (mapped, not read into one more ~40 MB copy).
        try:
            with os.fdopen(box, "rb") as source:
                size = os.fstat(source.fileno()).st_size
                data = mmap.mmap(source.fileno(), size, access=mmap.ACCESS_READ) if size else None
        except (OSError, ValueError):
            data = None
        if data is not None:
            if status == 0:
                try:
                    found: T = _unpickled(data)
                    return found
                except Exception:  # a result that does not unpickle: compute it here
                    pass
            with contextlib.suppress(BufferError):  # (a view of it still held: closed when let go)
                data.close()
        return work()

    try:
        yield result
    finally:
        if not reaped:
            with contextlib.suppress(OSError):
                os.close(box)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _unpickled(data: mmap.mmap) -> Any:
    """The result the child stored in `data` (its out-of-band buffers: views of `data`, which
    stays mapped while any of them is held)."""
    view = memoryview(data).toreadonly()
    (count,) = struct.unpack_from("<Q", view)
    sizes = struct.unpack_from(f"<{count + 1}Q", view, 8)
    at = 8 * (count + 2)
    parts = []
    for size in sizes:
        parts.append(view[at:at + size])
        at += size
    if at != len(view):
        raise ValueError("a short or long result")
    return pickle.loads(parts[0], buffers=parts[1:])

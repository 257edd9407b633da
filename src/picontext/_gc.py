"""Pausing Python's cyclic garbage collector around bulk work on parsed session data — only when
no other thread can notice.

Loading or projecting a large session allocates hundreds of thousands of containers at once,
and each allocation burst makes the collector rescan everything already alive (parsed JSON
objects, which cannot even form cycles): measured 10-20% of a 50k-entry open+context. But
`gc.disable()` is process-wide: a library that flips it while other threads run (an embedding
application, `asyncio.to_thread` workers) would silently change their memory behaviour. So the
pause applies only while the calling thread is the only Python thread (the CLI's case);
otherwise the block runs with the collector as it is. `gc.freeze()` was measured as an
alternative and was not faster (docs/performance.md); it is process-wide too.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC for the block if this is the process's only thread (see above)."""
    if threading.active_count() > 1 or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()

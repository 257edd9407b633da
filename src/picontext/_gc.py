"""Pausing Python's cyclic garbage collector around bulk work on parsed session data."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC for the duration of the block.

    Loading or projecting a large session allocates hundreds of thousands of containers at once,
    and each allocation burst makes the collector rescan everything already alive (millions of
    parsed JSON objects, which cannot even form cycles): on a 100k-entry session that multiplies
    load and projection time. Reference counting still frees everything as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()

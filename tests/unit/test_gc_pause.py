"""The GC is paused around bulk work only when no other thread could be affected."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading

from picontext._gc import gc_paused

ALONE = """
import gc, threading
from picontext._gc import gc_paused
assert threading.active_count() == 1
with gc_paused():
    inside = gc.isenabled()
    with gc_paused():
        nested = gc.isenabled()
    after_nested = gc.isenabled()
print(inside, nested, after_nested, gc.isenabled())
"""


def test_paused_when_alone_and_restored_once() -> None:
    # in a fresh process: the test runner may have threads of its own (model servers)
    out = subprocess.run([sys.executable, "-c", ALONE], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False", "True"]


def test_left_alone_while_another_thread_runs() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with gc_paused():
            assert gc.isenabled()
    finally:
        stop.set()
        other.join()

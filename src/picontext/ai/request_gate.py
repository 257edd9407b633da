"""One request at a time to a server that cannot serve two (`compat.serialRequests`, ours).

llama-cpp-python's server, with its defaults, cancels the request it is streaming as soon as
another one arrives. A background compaction summary sent while the conversation waits for a
reply (or the reverse) would then cut the other one off, both sides would retry, and cut each
other off again. With `"compat": {"serialRequests": true}` on such a provider or model in
models.json, every request this process sends to that base URL waits for the one in flight to
finish: the second request is delayed instead of destroying the first. Servers that queue or
batch requests themselves (Ollama, vLLM, LM Studio, hosted APIs) need nothing.

Gates are per event loop and base URL; requests from other processes are not seen.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["needs_serial_requests", "serial_gate"]

_gates: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Lock]] = {}


def needs_serial_requests(model: Any) -> bool:
    """Whether `model`'s compat says its server takes one request at a time (`serialRequests: true`).

    The one place that decides it: the request gate below, and the summarizer, which then sends
    a split turn's two summaries and a long span's chunks one after the other
    (compaction/summarize.py). Where the server runs (this machine or not) does not enter into it.
    """
    compat = model.get("compat") if hasattr(model, "get") else None
    return isinstance(compat, dict) and compat.get("serialRequests") is True


def serial_gate(model: Any) -> asyncio.Lock | None:
    """The lock every request to `model`'s server holds while it runs, or None when the model's
    `compat.serialRequests` is not set."""
    if not needs_serial_requests(model):
        return None
    key = str(model.get("baseUrl") or "")
    loop = asyncio.get_running_loop()
    held = _gates.get(key)
    if held is None or held[0] is not loop or held[0].is_closed():
        held = (loop, asyncio.Lock())
        _gates[key] = held
    return held[1]

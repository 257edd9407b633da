"""A command imports only what it needs: `picontext context FILE --json` loads neither the agent,
the providers, httpx nor prompt_toolkit (each CLI call used to import ~650 modules first)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from picontext.session import jsonl_index
from picontext.session.manager import SessionManager


def _imported(args: list[str]) -> set[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "picontext", *args], capture_output=True,
                          text=True, check=True)
    return {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}


def test_context_imports_only_the_session_layer(tmp_path: Path) -> None:
    sm = SessionManager.create(str(tmp_path), str(tmp_path))
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message({"role": "assistant", "content": [], "api": "x", "provider": "p", "model": "m",
                       "usage": {}, "stopReason": "stop", "timestamp": 2})
    modules = _imported(["context", str(sm.get_session_file()), "--json"])
    assert "picontext.session.context_stream" in modules  # the measurement sees the command's own imports
    heavy = {m for m in modules if m.split(".")[0] in ("httpx", "prompt_toolkit", "asyncio", "rich")
             or m.startswith(("picontext.agent", "picontext.ai.providers", "picontext.cli.modes"))
             or m in ("picontext.session.manager", "picontext.session.index", "picontext.session.live")}
    assert heavy == set()  # the columns path needs neither the manager nor the whole-file index, nor rich
    assert len(modules) < 200


def test_a_warm_context_call_loads_no_hashing(tmp_path: Path) -> None:
    """With the entry columns cached and the file unchanged (and settled) nothing is hashed, so
    OpenSSL (`_hashlib`, ~10 ms) is not loaded; the first call, which hashes the file, loads it."""
    sm = SessionManager.create(str(tmp_path), str(tmp_path))
    sm.append_message({"role": "user", "content": "hi", "timestamp": 1})
    sm.append_message({"role": "assistant", "content": [], "api": "x", "provider": "p", "model": "m",
                       "usage": {}, "stopReason": "stop", "timestamp": 2})
    path = sm.get_session_file()
    assert path is not None
    args = ["context", path, "--json"]
    assert "_hashlib" in _imported(args)  # cold: the columns are built, their bytes hashed
    # Recorded right after the file's last write, the cache is "racy" (jsonl_index.RACY_NS): it is
    # checked against every covered byte until a call finds the file settled. What is awaited is
    # the clock itself, so this waits for it.
    settled_ns = os.stat(path).st_ctime_ns + jsonl_index.RACY_NS
    time.sleep(max(0, settled_ns - time.time_ns()) / 1e9 + 0.05)
    assert "_hashlib" in _imported(args)  # the racy cache checked, and recorded as settled
    assert not {"_hashlib", "hashlib"} & _imported(args)  # warm


def test_help_still_lists_every_command() -> None:
    out = subprocess.run([sys.executable, "-m", "picontext", "--help"], capture_output=True, text=True,
                         check=True).stdout
    for command in ("context", "sessions", "compact", "run", "chat"):
        assert command in out
    assert "--store URL" in out and "PICONTEXT_STORE" in out  # taken out before parsing, still documented

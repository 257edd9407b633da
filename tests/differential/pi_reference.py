"""The Pi reference (npm package, pinned in node/package.json) as a long-lived node process
(node/harness.mjs). A module of its own, not conftest: every test directory has a `conftest`, and
`from conftest import ...` gets whichever was imported last when several directories run together."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

NODE_DIR = Path(__file__).parent / "node"
UNDEFINED = "__undefined__"


class PiReference:
    """Calls into the reference: `call("pi-ai/dist/utils/overflow.js#isContextOverflow", msg)`
    or `op("session.contextOfFile", path, leaf)` for the composite operations in node/ops/."""

    def __init__(self) -> None:
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("node is not installed: the differential tests need it")
        if not (NODE_DIR / "node_modules" / "@earendil-works" / "pi-coding-agent").is_dir():
            raise RuntimeError(f"the Pi reference is not installed: run npm ci --prefix {NODE_DIR}")
        self._node = node
        self._ids = itertools.count(1)
        self._proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [self._node, str(NODE_DIR / "harness.mjs")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )

    def _request(self, payload: dict[str, Any]) -> Any:
        # One node process serves the whole run, but a crash (an out-of-memory abort, say) must
        # fail only the request that caused it: a dead process is replaced on the next request.
        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        rid = next(self._ids)
        payload["id"] = rid
        try:
            proc.stdin.write(json.dumps(payload, ensure_ascii=False) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            proc.kill()
            proc.wait(timeout=10)
            self._proc = None
            raise RuntimeError(f"the node harness died (exit code {proc.returncode}) answering "
                               f"{payload.get('op') or payload.get('call')}; it restarts for the next test")
        answer = json.loads(line)
        assert answer["id"] == rid
        if not answer["ok"]:
            raise ReferenceError(answer["error"])
        return answer["value"]

    def call(self, target: str, *args: Any) -> Any:
        return self._request({"call": target, "args": list(args)})

    def op(self, name: str, *args: Any) -> Any:
        return self._request({"op": name, "args": list(args)})

    def close(self) -> None:
        if self._proc is None:
            return
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait(timeout=10)


class ReferenceError(Exception):
    """The reference threw; the message is its error text."""

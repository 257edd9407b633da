"""Session files for the viewer tests: the example, seeded generator output, a big generated one,
and a hostile one whose text tries to run script in the page."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "sessions" / "refactor-session.jsonl"


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


def sessiongen() -> ModuleType:
    return _module(REPO / "tests" / "differential" / "sessiongen.py", "picontext_viewer_sessiongen")


def write_big(path: Path, entries: int, compact_every: int = 2500) -> Path:
    """bench/gen_sessions.py: tool-heavy turns with a compaction every `compact_every` entries."""
    _module(REPO / "bench" / "gen_sessions.py", "picontext_viewer_gen_sessions").generate(
        str(path), entries, compact_every)
    return path


HOSTILE = '<script>window.__pwned = 1; alert(1)</script><img src=x onerror="window.__pwned = 2; alert(2)">'
HOSTILE_MD = (f"# Title {HOSTILE}\n\n**bold {HOSTILE}** `{HOSTILE}` [link](javascript:window.__pwned=3) "
              f"[ok](https://example.com/\"onmouseover=alert(4)) </script><!-- \u2028\u2029\x00\x1b[31m\x07\n\n"
              f"```html\n{HOSTILE}\n```\n- item {HOSTILE}\n> quote {HOSTILE}")


def write_hostile(path: Path) -> Path:
    """Every place the page shows session text carries markup that would run script if unescaped."""
    ts = "2026-03-02T09:14:05.000Z"

    def e(eid: str, parent: str | None, **fields: Any) -> dict[str, Any]:
        return {"id": eid, "parentId": parent, "timestamp": ts, **fields}

    usage = {"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 110,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0.01}}
    lines: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": "019cae3d-5a1b-7c2e-9f10-4b3d2a1c0e9f", "timestamp": ts,
         "cwd": f"/tmp/{HOSTILE}"},
        e("a0000001", None, type="session_info", name=f"name {HOSTILE}"),
        e("a0000002", "a0000001", type="message", message={"role": "user", "content": HOSTILE_MD, "timestamp": 1}),
        e("a0000003", "a0000002", type="message", message={
            "role": "assistant", "content": [
                {"type": "thinking", "thinking": HOSTILE_MD},
                {"type": "text", "text": HOSTILE_MD},
                {"type": "toolCall", "id": f"call{HOSTILE}", "name": f"bash{HOSTILE}", "arguments": {"x": HOSTILE}}],
            "provider": f"p{HOSTILE}", "model": f"m{HOSTILE}", "usage": usage, "stopReason": "toolUse",
            "errorMessage": HOSTILE, "timestamp": 2}),
        e("a0000004", "a0000003", type="message", message={
            "role": "toolResult", "toolCallId": f"call{HOSTILE}", "toolName": f"bash{HOSTILE}",
            "content": [{"type": "text", "text": HOSTILE}], "isError": True, "timestamp": 3}),
        e("a0000005", "a0000004", type="label", targetId="a0000002", label=f"label {HOSTILE}"),
        e("a0000006", "a0000004", type="custom_message", customType=f"ct{HOSTILE}", content=HOSTILE_MD,
          display=True),
        e("a0000007", "a0000006", type="compaction", summary=HOSTILE_MD, firstKeptEntryId="a0000006",
          tokensBefore=1234, details={"readFiles": [HOSTILE], "modifiedFiles": [HOSTILE],
                                      "verifiedFacts": {"lastUserRequest": HOSTILE, "modifiedFiles": [HOSTILE],
                                                        "errors": [HOSTILE]}}),
        e("a0000008", "a0000007", type="context_edit", targetId="a0000006",
          replacement={"content": HOSTILE}),
        e("a0000009", "a0000008", type="branch_summary", fromId="a0000003", summary=HOSTILE_MD),
        e("a000000a", "a0000009", type="message", message={"role": "bashExecution", "command": HOSTILE,
                                                            "output": HOSTILE, "timestamp": 4}),
        e("a000000b", "a000000a", type=f"unknown{HOSTILE}", data=HOSTILE),
        e("a000000c", "a000000b", type="message", message={
            "role": "assistant", "content": [{"type": "text", "text": HOSTILE_MD}], "provider": "p", "model": "m",
            "usage": usage, "stopReason": "stop", "timestamp": 5}),
    ]
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


def in_fresh_process(code: str) -> str:
    """`code` run by a fresh interpreter (one thread, no children of earlier tests); its stdout."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          timeout=120).stdout

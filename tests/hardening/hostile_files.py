"""Builders for hostile session files and an in-process CLI runner with a strict UTF-8 stdout."""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from picontext.cli.main import main

HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}
READ_ONLY = (["show"], ["tree"], ["context"], ["context", "--json"], ["stats"], ["stats", "--json"],
             ["compact", "--dry-run"], ["tokens"], ["tokens", "--json"], ["dropped"], ["dropped", "--json"])


def entry(eid: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {"id": eid, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z", **fields}


def user(text: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


def assistant(content: Any, **fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "api": "x", "provider": "p", "model": "m",
            "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                      "cost": {"total": 0}},
            "stopReason": "stop", "timestamp": 1, **fields}


DEEP = "<deep>"  # stands for a value nested 1,000 lists deep (too deep for json.dumps to write)
DEEP_JSON = "[" * 1000 + '"x"' + "]" * 1000


def write_session(path: Path, entries: list[Any], *, raw_lines: tuple[str, ...] = ()) -> Path:
    """JSON lines as Python writes them (lone surrogates escaped as \\udXXX, like JSON.stringify)."""
    lines = [json.dumps(e).replace(json.dumps(DEEP), DEEP_JSON) for e in entries] + list(raw_lines)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def parse_json(data: bytes) -> Any:
    """json.loads with room for the 1,000-deep values these files hold."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        return json.loads(data)
    finally:
        sys.setrecursionlimit(limit)


@dataclass
class Result:
    code: int
    out: bytes
    err: str


def run_cli(*argv: str) -> Result:
    """`main(argv)` in this process, with stdout/stderr that refuse what a UTF-8 terminal would."""
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", write_through=True)
    saved = sys.stdout, sys.stderr
    limit = sys.getrecursionlimit()  # main() raises it; hypothesis wants it back as it was
    sys.stdout, sys.stderr = out, err
    try:
        code = main(list(argv))
    finally:
        sys.stdout, sys.stderr = saved
        sys.setrecursionlimit(limit)
    return Result(code, out_bytes.getvalue(), err_bytes.getvalue().decode("utf-8"))

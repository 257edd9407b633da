"""Generated Claude Code transcripts of any size, shaped like real 2.x ones (for the import
memory test and `bench/bench_import.py`).

Each turn: a user prompt, then assistant messages written one line per content block (thinking,
text, tool_use, all with the same `message.id`), each tool's `tool_result` line with a structured
`toolUseResult` (a file read of several KB, as real reads are), progress lines for hooks and bash
output, a file-history snapshot per prompt, and now and then a `compact_boundary` with its summary.
"""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["write_claude_code_transcript"]

_WORDS = ("refactor session loader parser cache index module request handler token window summary compaction "
          "branch entry header writer store tool result error fixture").split()


def write_claude_code_transcript(path: str | Path, size_bytes: int, *, seed: int = 0,
                                 compact_every_bytes: int = 20_000_000) -> int:
    """Write a transcript of about `size_bytes` to `path`; returns the number of lines."""
    rng = random.Random(seed)
    session = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    clock = datetime(2026, 2, 11, 9, 0, tzinfo=UTC)
    parent: str | None = None
    written = lines = 0
    next_compaction = compact_every_bytes

    def new_id() -> str:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    def stamp() -> str:
        nonlocal clock
        clock += timedelta(milliseconds=rng.randrange(50, 4000))
        return clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{clock.microsecond // 1000:03d}Z"

    def words(n: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(n))

    with open(path, "w", encoding="utf-8") as f:
        def emit(line: dict[str, Any], chain: bool = True) -> None:
            nonlocal parent, written, lines
            base: dict[str, Any] = {"parentUuid": parent, "isSidechain": False, "userType": "external",
                                    "cwd": "/home/dev/project", "sessionId": session, "version": "2.1.39",
                                    "gitBranch": "main"}
            if chain:
                line = {**base, **line, "uuid": line.get("uuid") or new_id(), "timestamp": stamp()}
                parent = line["uuid"]
            text = json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
            f.write(text)
            written += len(text.encode())
            lines += 1

        while written < size_bytes:
            prompt_id = new_id()
            emit({"type": "file-history-snapshot", "messageId": prompt_id, "snapshot": {
                "messageId": prompt_id, "trackedFileBackups": {}, "timestamp": stamp()}, "isSnapshotUpdate": False},
                 chain=False)
            emit({"type": "user", "uuid": prompt_id, "message": {"role": "user", "content": words(40)}})
            for _ in range(rng.randrange(2, 6)):
                message_id = f"msg_{rng.getrandbits(64):016x}"
                usage = {"input_tokens": 3, "cache_creation_input_tokens": rng.randrange(0, 4000),
                         "cache_read_input_tokens": rng.randrange(10_000, 150_000), "output_tokens": 200}
                calls: list[dict[str, Any]] = []
                blocks: list[dict[str, Any]] = [{"type": "thinking", "thinking": words(60), "signature": "sig"},
                                                {"type": "text", "text": words(30)}]
                for _ in range(rng.randrange(1, 4)):
                    path = f"/home/dev/project/src/{rng.choice(_WORDS)}.py"
                    call: dict[str, Any] = {"type": "tool_use", "id": f"toolu_{rng.getrandbits(64):016x}",
                                            "name": "Read", "input": {"file_path": path}}
                    blocks.append(call)
                    calls.append(call)
                for block in blocks:
                    emit({"type": "assistant", "requestId": "req_x", "message": {
                        "model": "claude-opus-4-6", "id": message_id, "type": "message", "role": "assistant",
                        "content": [block], "stop_reason": None, "stop_sequence": None, "usage": usage}})
                for call in calls:
                    emit({"type": "progress", "data": {"type": "hook_progress", "hookEvent": "PostToolUse",
                                                       "hookName": "PostToolUse:Read", "command": "hook.sh"},
                          "parentToolUseID": call["id"], "toolUseID": call["id"]})
                    body = "\n".join(f"{n:>6}\u2192{words(12)}" for n in range(1, rng.randrange(40, 200)))
                    emit({"type": "user", "message": {"role": "user", "content": [
                        {"tool_use_id": call["id"], "type": "tool_result", "content": body}]},
                        "toolUseResult": {"type": "text", "file": {"filePath": call["input"]["file_path"],
                                                                   "content": body, "numLines": body.count("\n"),
                                                                   "startLine": 1, "totalLines": 400}}})
            if written >= next_compaction:
                next_compaction += compact_every_bytes
                boundary = new_id()
                emit({"type": "system", "subtype": "compact_boundary", "uuid": boundary, "parentUuid": None,
                      "logicalParentUuid": parent, "content": "Conversation compacted", "isMeta": False,
                      "level": "info", "compactMetadata": {"trigger": "auto", "preTokens": 160_000}})
                emit({"type": "user", "isCompactSummary": True, "isVisibleInTranscriptOnly": True,
                      "message": {"role": "user", "content": "This session is being continued. " + words(400)}})
    return lines

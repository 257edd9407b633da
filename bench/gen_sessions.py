"""Deterministic, realistic synthetic sessions for benchmarks: tool-heavy turns, a compaction
every `compact_every` entries (0 = never), v3 format as Pi writes it."""

from __future__ import annotations

import random
import sys

import orjson


def usage(n: int) -> dict:
    return {"input": 1200 + n % 997, "output": 180 + n % 311, "cacheRead": 40_000 + n * 3, "cacheWrite": 900,
            "totalTokens": 42_000 + n * 3, "cost": {"input": 0.0036, "output": 0.0027, "cacheRead": 0.012,
                                                    "cacheWrite": 0.0034, "total": 0.0217}}


def generate(path: str, n_entries: int, compact_every: int = 2500, seed: int = 1) -> None:
    rng = random.Random(seed)
    words = ("the function returns a list of entries parsed from the session file while the "
             "projection folds compactions and applies context edits before each request").split()
    lines = [{"type": "session", "version": 3, "id": "0199aa00-0000-7000-8000-00000000bench",
              "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/home/u/proj"}]
    parent = None
    ts = 1_772_359_200_000
    i = 0
    kept_candidate = None
    while len(lines) - 1 < n_entries:
        i += 1
        ts += 1000
        eid = f"{i:08x}"
        iso = f"2026-03-01T10:{(i // 60) % 60:02d}:{i % 60:02d}.000Z"
        phase = i % 4
        if compact_every and i % compact_every == 0 and kept_candidate:
            entry = {"type": "compaction", "id": eid, "parentId": parent, "timestamp": iso,
                     "summary": "## Goal\n" + " ".join(rng.choices(words, k=400)), "firstKeptEntryId": kept_candidate,
                     "tokensBefore": 150_000 + i}
        elif phase == 0:
            entry = {"type": "message", "id": eid, "parentId": parent, "timestamp": iso,
                     "message": {"role": "user", "content": " ".join(rng.choices(words, k=25)), "timestamp": ts}}
        elif phase == 1:
            entry = {"type": "message", "id": eid, "parentId": parent, "timestamp": iso, "message": {
                "role": "assistant", "content": [
                    {"type": "thinking", "thinking": " ".join(rng.choices(words, k=30)), "thinkingSignature": "sig"},
                    {"type": "text", "text": " ".join(rng.choices(words, k=20))},
                    {"type": "toolCall", "id": f"call_{i}", "name": "read",
                     "arguments": {"path": f"src/m{i % 50}.py"}}],
                "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                "usage": usage(i), "stopReason": "toolUse", "timestamp": ts}}
        elif phase == 2:
            body = "\n".join(" ".join(rng.choices(words, k=12)) for _ in range(rng.randint(5, 30)))
            entry = {"type": "message", "id": eid, "parentId": parent, "timestamp": iso, "message": {
                "role": "toolResult", "toolCallId": f"call_{i - 1}", "toolName": "read",
                "content": [{"type": "text", "text": body}], "isError": False, "timestamp": ts}}
        else:
            entry = {"type": "message", "id": eid, "parentId": parent, "timestamp": iso, "message": {
                "role": "assistant", "content": [{"type": "text", "text": " ".join(rng.choices(words, k=40))}],
                "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                "usage": usage(i), "stopReason": "stop", "timestamp": ts}}
            kept_candidate = eid if i % 400 == 3 else kept_candidate
        lines.append(entry)
        parent = eid
    with open(path, "wb") as f:
        for line in lines:
            f.write(orjson.dumps(line) + b"\n")


if __name__ == "__main__":
    generate(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 2500)

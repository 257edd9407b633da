"""A realistic long session, as a coding agent writes it (issue 8's benchmark shape):

* tool-heavy turns: a user prompt, several assistant rounds with thinking, text and tool calls,
  their tool results (about 30% of the file's bytes), a final answer;
* compactions at 1/4, 1/2 and 3/4 of the entries, the last one keeping the tail from ~3/4 on, so
  the projected context still holds tens of thousands of messages at 100k entries;
* a few branches (a turn abandoned and redone from an earlier entry, with a branch summary),
  context edits on old tool results, labels, a session name, model and thinking changes.

Deterministic for a given size and seed; v3 lines written as Pi writes them (compact JSON).

    python bench/gen_realistic.py OUT.jsonl 100000
"""

from __future__ import annotations

import random
import sys
from typing import Any

import orjson

WORDS = ("the function returns a list of entries parsed from the session file while the projection "
         "folds compactions and applies context edits before each request so that the model sees "
         "only what matters").split()
CODE = ("def handle(request):\n    data = parse(request.body)\n    if not data:\n        return error(400)\n"
        "    result = service.process(data, timeout=30)\n    log.info('processed %s', result.id)\n"
        "    return ok(result)\n")


def _usage(n: int) -> dict[str, Any]:
    return {"input": 1200 + n % 997, "output": 180 + n % 311, "cacheRead": 40_000 + n * 3, "cacheWrite": 900,
            "totalTokens": 42_000 + n * 3, "cost": {"input": 0.0036, "output": 0.0027, "cacheRead": 0.012,
                                                    "cacheWrite": 0.0034, "total": 0.0217}}


class _Writer:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines: list[dict[str, Any]] = []
        self.n = 0
        self.ts = 1_772_359_200_000
        self.leaf: str | None = None
        self.path: list[str] = []  # ids of the current branch
        self.tool_results: list[str] = []

    def words(self, k: int) -> str:
        return " ".join(self.rng.choices(WORDS, k=k))

    def add(self, kind: str, **fields: Any) -> str:
        self.n += 1
        self.ts += 1000
        eid = f"{self.n:08x}"
        seconds = self.ts // 1000
        iso = f"2026-03-{1 + (seconds // 86400) % 28:02d}T{(seconds // 3600) % 24:02d}:{(seconds // 60) % 60:02d}:" \
              f"{seconds % 60:02d}.000Z"
        self.lines.append({"type": kind, "id": eid, "parentId": self.leaf, "timestamp": iso, **fields})
        self.leaf = eid
        self.path.append(eid)
        return eid

    def message(self, message: dict[str, Any]) -> str:
        return self.add("message", message={**message, "timestamp": self.ts + 1000})

    def turn(self) -> None:
        self.message({"role": "user", "content": self.words(self.rng.randint(8, 40))})
        for _round in range(self.rng.randint(1, 4)):
            calls = [{"type": "toolCall", "id": f"call_{self.n}_{k}",
                      "name": self.rng.choice(("read", "bash", "grep")),
                      "arguments": {"path": f"src/m{self.rng.randint(0, 80)}.py"}}
                     for k in range(self.rng.randint(1, 2))]
            self.message({"role": "assistant", "content": [
                {"type": "thinking", "thinking": self.words(self.rng.randint(10, 40)), "thinkingSignature": "sig"},
                {"type": "text", "text": self.words(self.rng.randint(5, 20))}, *calls],
                "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                "usage": _usage(self.n), "stopReason": "toolUse"})
            for call in calls:
                size = self.rng.choice((1, 1, 1, 2, 3))
                text = (CODE * size)[: 180 * size]
                eid = self.message({"role": "toolResult", "toolCallId": call["id"], "toolName": call["name"],
                                    "content": [{"type": "text", "text": text}], "isError": False})
                self.tool_results.append(eid)
        self.message({"role": "assistant", "content": [{"type": "text", "text": self.words(self.rng.randint(10, 60))}],
                      "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                      "usage": _usage(self.n), "stopReason": "stop"})

    def compaction(self) -> None:
        keep_from = self.path[max(0, len(self.path) - 40)]
        self.add("compaction", summary="## Goal\n" + self.words(300), firstKeptEntryId=keep_from,
                 tokensBefore=150_000 + self.n, details={"readFiles": ["src/a.py"], "modifiedFiles": []})

    def branch(self) -> None:
        """Abandon the last few entries: continue from an earlier user turn, with a summary."""
        back = min(len(self.path) - 1, self.rng.randint(6, 20))
        from_id = self.leaf
        self.path = self.path[: len(self.path) - back]
        self.leaf = self.path[-1]
        self.add("branch_summary", fromId=from_id, summary=self.words(40))

    def edit(self) -> None:
        on_path = [t for t in self.tool_results[-200:] if t in set(self.path[-400:])]
        if on_path:
            target = self.rng.choice(on_path)
            self.add("context_edit", targetId=target,
                     replacement={"content": [{"type": "text", "text": "[trimmed by the user]"}]})


def generate(path: str, n_entries: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    w = _Writer(rng)
    w.add("model_change", provider="anthropic", modelId="claude-sonnet-4-5")
    w.add("thinking_level_change", thinkingLevel="medium")
    w.add("session_info", name="refactor the request handlers")
    marks = [n_entries // 4, n_entries // 2, n_entries * 3 // 4]
    while w.n < n_entries:
        w.turn()
        if marks and w.n >= marks[0]:
            marks.pop(0)
            w.compaction()
        roll = rng.random()
        if roll < 0.01:
            w.branch()
        elif roll < 0.03:
            w.edit()
        elif roll < 0.035:
            w.add("label", targetId=w.path[-2], label=f"checkpoint {w.n}")
    header = {"type": "session", "version": 3, "id": "0199aa00-0000-7000-8000-0000realistic",
              "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/home/u/proj"}
    with open(path, "wb") as f:
        f.write(b"".join(orjson.dumps(e) + b"\n" for e in [header, *w.lines[:n_entries]]))


def tool_output_share(path: str) -> float:
    total = tool = 0
    with open(path, "rb") as f:
        for line in f:
            total += len(line)
            if b'"role":"toolResult"' in line:
                tool += len(line)
    return tool / total


if __name__ == "__main__":
    generate(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    print(f"tool output share of bytes: {tool_output_share(sys.argv[1]):.2f}", file=sys.stderr)

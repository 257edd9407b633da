"""Type-confused sessions: a well-formed session holding every entry type and message role, with
any of its fields (at any depth) replaced by a value of the wrong type (a list, an object, a
number, null, a bool, another string) or removed.

Shared by the hardening fuzz (`test_type_confusion.py`, every read command) and the differential
test against Pi (`tests/differential/test_confused_vs_pi.py`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

TS = "2026-01-01T00:00:00.000Z"
HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": TS, "cwd": "/p"}


def _usage(scale: int) -> dict[str, Any]:
    return {"input": 100 * scale, "output": 10 * scale, "cacheRead": 5, "cacheWrite": 1,
            "totalTokens": 116 * scale, "cost": {"input": 0.001, "output": 0.002, "cacheRead": 0, "cacheWrite": 0,
                                                 "total": 0.003}}


def _assistant(text: str, scale: int, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": text},
                                              {"type": "toolCall", "id": "c1", "name": "bash",
                                               "arguments": {"command": "ls"}}],
            "api": "openai-completions", "provider": "openai", "model": "gpt-4o", "usage": _usage(scale),
            "stopReason": "toolUse", "timestamp": 2, **extra}


def base_entries() -> list[dict[str, Any]]:
    """Header first, then one entry of each type (each message role), linked as a chain with a
    second branch; context edits, a label and a compaction point at earlier entries."""
    rows: list[tuple[str, str | None, dict[str, Any]]] = [
        ("e01", None, {"type": "model_change", "provider": "openai", "modelId": "gpt-4o"}),
        ("e02", "e01", {"type": "thinking_level_change", "thinkingLevel": "high"}),
        ("e03", "e02", {"type": "message", "message": {"role": "system", "content": "You are a helper.",
                                                        "sections": {"rules": "be brief"}, "toolsAdded": ["bash"],
                                                        "timestamp": 1}}),
        ("e04", "e03", {"type": "message", "message": {"role": "user", "content": "- one\r\n- two\r\n",
                                                        "timestamp": 1}}),
        ("e05", "e04", {"type": "message", "message": _assistant("## Plan\n- read\n- edit", 1)}),
        ("e06", "e05", {"type": "message", "message": {"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
                                                        "content": [{"type": "text", "text": "a.py"}],
                                                        "isError": False, "timestamp": 3}}),
        ("e07", "e06", {"type": "message", "message": {"role": "bashExecution", "command": "ls", "output": "a.py",
                                                        "exitCode": 0, "cancelled": False, "truncated": False,
                                                        "timestamp": 4}}),
        ("e08", "e07", {"type": "custom_message", "customType": "note", "content": "remember", "display": True,
                        "details": {"k": 1}}),
        ("e09", "e08", {"type": "message", "message": {"role": "user", "content": [
            {"type": "text", "text": "look"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}],
            "timestamp": 5}}),
        ("e10", "e09", {"type": "message", "message": _assistant("done", 2, stopReason="stop")}),
        ("e11", "e10", {"type": "compaction", "summary": "## Goal\n- x\r\n- y", "firstKeptEntryId": "e09",
                        "tokensBefore": 5000, "details": {
                            "readFiles": ["a.py"], "modifiedFiles": ["b.py"], "summaryModel": "openai/gpt-4o",
                            "promptCache": {"reused": False, "reason": "off"},
                            "verifiedFacts": {"lastUserRequest": "look", "modifiedFiles": ["b.py"], "errors": ["e"]}},
                        "usage": _usage(1)}),
        ("e12", "e11", {"type": "message", "message": {"role": "user", "content": "next", "timestamp": 6}}),
        ("e13", "e12", {"type": "context_edit", "targetId": "e09", "replacement": {"content": "short"}}),
        ("e14", "e13", {"type": "context_edit", "targetId": "e10", "replacement": None}),
        ("e15", "e14", {"type": "message", "message": _assistant("", 3, stopReason="error",
                                                                 errorMessage="context length exceeded")}),
        ("e16", "e15", {"type": "branch_summary", "fromId": "e12", "summary": "tried another way"}),
        ("e17", "e16", {"type": "label", "targetId": "e12", "label": "checkpoint"}),
        ("e18", "e17", {"type": "session_info", "name": "confused"}),
        ("e19", "e18", {"type": "custom", "customType": "ext", "data": {"a": [1]}}),
        ("e20", "e19", {"type": "usage", "kind": "compaction", "provider": "openai", "model": "gpt-4o",
                        "usage": _usage(1)}),
        ("e21", "e20", {"type": "message", "message": {"role": "custom", "customType": "n", "content": "c",
                                                        "display": True, "timestamp": 7}}),
        ("e22", "e21", {"type": "message", "message": {"role": "branchSummary", "summary": "b", "fromId": "e12",
                                                        "timestamp": 8}}),
        ("e23", "e22", {"type": "message", "message": {"role": "compactionSummary", "summary": "c",
                                                        "tokensBefore": 9, "timestamp": 9}}),
        ("e24", "e23", {"type": "context_edit", "targetId": "e21", "replacement": {"content": [
            {"type": "text", "text": "edited"}]}}),
        ("e25", "e24", {"type": "message", "message": _assistant("last", 4, stopReason="stop")}),
        ("f01", "e11", {"type": "message", "message": {"role": "user", "content": "other branch", "timestamp": 6}}),
    ]
    entries = [dict(HEADER)]
    for eid, parent, fields in rows:
        entries.append({"type": fields["type"], "id": eid, "parentId": parent, "timestamp": TS,
                        **{k: v for k, v in fields.items() if k != "type"}})
    # The branch with every type is the current one: its last entry comes last.
    entries.append(entries.pop(-2))
    return entries


Path_ = tuple[Any, ...]


def field_paths(value: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every path to a member of an object or an item of a list under `value`."""
    out: list[Path_] = []
    if isinstance(value, dict):
        for key, child in value.items():
            out.append((*prefix, key))
            out.extend(field_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out.append((*prefix, index))
            out.extend(field_paths(child, (*prefix, index)))
    return out


BASE = base_entries()
PATHS = [(n, *p) for n, e in enumerate(BASE) for p in field_paths(e)]
REMOVE = object()  # take the member out (an item of a list becomes null)

CONFUSED = st.one_of(
    st.sampled_from([[], ["x"], ["user"], [1, None], {}, {"a": 1}, {"role": "user"}, {"total": 1}, 0, 1, -1, 1.5,
                     1e300, -0.0, 2**63, None, True, False, "", "x", "user", "assistant", "message", "compaction",
                     "e05", "e09", "e12", "s1", {"toString": "x", "valueOf": 1}, REMOVE]),
    st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                 max_leaves=5),
)
MUTATIONS = st.lists(st.tuples(st.sampled_from(PATHS), CONFUSED), min_size=1, max_size=4)


def confuse(mutations: list[tuple[Path_, Any]]) -> list[Any]:
    """The base session with each (path, value) applied in order; a path that no longer exists
    (an earlier mutation replaced its parent) is skipped."""
    entries: list[Any] = copy.deepcopy(BASE)
    for path, value in mutations:
        parent: Any = entries
        for key in path[:-1]:
            try:
                parent = parent[key]
            except (KeyError, IndexError, TypeError):
                break
        else:
            last = path[-1]
            if isinstance(parent, dict) and isinstance(last, str):
                if value is REMOVE:
                    parent.pop(last, None)
                else:
                    parent[last] = copy.deepcopy(value)
            elif isinstance(parent, list) and isinstance(last, int) and last < len(parent):
                parent[last] = None if value is REMOVE else copy.deepcopy(value)
    return entries


def write(path: Path, entries: list[Any]) -> Path:
    path.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in entries))
    return path

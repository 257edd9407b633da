"""Parsed entries of an opened session share their repeated short strings (issue 18 item 2, peak
RSS): ids, parent ids and types with the index, and the message's role, api, provider, model,
stop reason, tool name and content block types with each other. The values are those a parse
of the file gives; only the number of string objects changes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from itertools import pairwise
from pathlib import Path
from typing import Any

from picontext.session.manager import SessionManager

HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-12-02T00:00:00.000Z", "cwd": "/w"}
USAGE = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
         "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.3}}


def _assistant(content: list[dict[str, Any]], stop: str, i: int) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "api": "openai-completions", "provider": "openai-compatible",
            "model": "scripted-model", "usage": USAGE, "stopReason": stop, "timestamp": i}


def write_turns(path: Path, turns: int) -> list[dict[str, Any]]:
    """`turns` ordinary turns (a request, a read, its output, an answer), as Pi writes them;
    returns the entries."""
    entries: list[dict[str, Any]] = []
    parent = None

    def add(message: dict[str, Any]) -> None:
        nonlocal parent
        entry_id = f"{len(entries):08x}"
        entries.append({"type": "message", "id": entry_id, "parentId": parent,
                        "timestamp": f"2026-12-02T00:{len(entries) // 60 % 60:02d}:{len(entries) % 60:02d}.000Z",
                        "message": message})
        parent = entry_id

    for i in range(turns):
        add({"role": "user", "content": f"step {i}: please look at module {i} " * 4, "timestamp": i})
        add(_assistant([{"type": "toolCall", "id": f"c{i}", "name": "read",
                         "arguments": {"path": f"src/module_{i % 300}.py"}}], "toolUse", i))
        add({"role": "toolResult", "toolCallId": f"c{i}", "toolName": "read",
             "content": [{"type": "text", "text": f"def build_step_{i}(): return compile('module_{i}')\n" * 8}],
             "isError": False, "timestamp": i})
        add(_assistant([{"type": "text", "text": f"Module {i} compiles its sources. " * 3}], "stop", i))
    lines = [json.dumps(v, ensure_ascii=False, separators=(",", ":")) for v in [HEADER, *entries]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return entries


def test_parsed_entries_share_their_names_and_read_as_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    written = write_turns(path, 20)
    manager = SessionManager.open(str(path))
    branch = manager.get_branch()
    assert branch == written
    first, second = branch[1]["message"], branch[5]["message"]  # two tool-calling answers
    for name in ("role", "api", "provider", "model", "stopReason"):
        assert first[name] is second[name], name
    assert first["content"][0]["type"] is second["content"][0]["type"]
    assert branch[2]["message"]["toolName"] is branch[6]["message"]["toolName"]
    for parent, child in pairwise(branch):
        assert child["parentId"] is parent["id"]
    # the file is untouched and an append goes on from the shared values as from parsed ones
    before = path.read_bytes()
    manager.append_message({"role": "user", "content": "go on", "timestamp": 99})
    after = path.read_bytes()
    assert after.startswith(before)
    appended = json.loads(after[len(before):])
    assert appended["parentId"] == written[-1]["id"]


def test_a_long_name_or_an_odd_value_is_left_as_parsed(tmp_path: Path) -> None:
    """Only short strings are shared; other values (a long model name, a number where a name
    belongs, an id that is not a string) read exactly as parsed."""
    path = tmp_path / "s.jsonl"
    long_model = "m" * 200
    entries = [
        {"type": "message", "id": 7, "parentId": None, "timestamp": "t",
         "message": {"role": "user", "content": "hi", "timestamp": 1}},
        {"type": "message", "id": "b", "parentId": 7, "timestamp": "t",
         "message": _assistant([{"type": 3, "text": "x"}], "stop", 2) | {"model": long_model, "api": 5}},
    ]
    path.write_text("\n".join(json.dumps(v) for v in [HEADER, *entries]) + "\n", encoding="utf-8")
    branch = SessionManager.open(str(path)).get_branch()
    assert branch == entries
    assert branch[1]["message"]["model"] == long_model


PARSED = textwrap.dedent("""
    import json, sys, tracemalloc
    from picontext.session.manager import SessionManager
    tracemalloc.start()
    manager = SessionManager.open(sys.argv[1])
    branch = manager.get_branch()
    manager.build_session_projection()
    print(json.dumps({"peak": tracemalloc.get_traced_memory()[1] / 2**20, "entries": len(branch)}))
""")


def test_a_session_of_ordinary_turns_parsed_whole_allocates_under_4_2_times_its_file(tmp_path: Path) -> None:
    """2,000 ordinary turns (3.8 MB of short entries, no large output): opened, its whole branch
    parsed and projected in a fresh process. Every parsed value used to be a string of its own
    (each "assistant", "openai-completions", id and parent id 50-70 bytes): the peak of Python's
    allocations was 4.64x the file; with the names shared 3.83x. Counted by tracemalloc, not RSS:
    the process's RSS for the same work moved between 4.56x and 5.01x from run to run on one
    quiet machine (allocator layout), too much for a bound that must fail without the sharing."""
    path = tmp_path / "s.jsonl"
    write_turns(path, 2000)
    size_mb = path.stat().st_size / 2**20
    out = subprocess.run([sys.executable, "-c", PARSED, str(path)], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    assert result["entries"] == 8000
    assert result["peak"] < 4.2 * size_mb, f"peak {result['peak']:.2f} MB for a {size_mb:.2f} MB file"


def test_a_one_shot_index_does_not_pay_for_sharing(tmp_path: Path) -> None:
    """Only the index that lives with its session (a SessionManager's) shares; a reader that
    parses and lets go (export, the read commands: `EntryIndex()`) keeps the parser's values."""
    from picontext.session.index import EntryIndex
    from picontext.session.records import RawLine, parse_session_bytes

    path = tmp_path / "s.jsonl"
    written = write_turns(path, 3)
    index = EntryIndex()
    index.load(parse_session_bytes(path.read_bytes(), lazy=True).entries)
    assert type(index.entries[1]) is RawLine  # parsed by `entry`, as the viewer's index parses
    first, second = index.entry(1)["message"], index.entry(5)["message"]
    assert (first, second) == (written[1]["message"], written[5]["message"])
    assert first["role"] is not second["role"] and first["model"] is not second["model"]

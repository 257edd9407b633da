"""Conformance cases 1-54 of spec 01 §19 (session storage and context projection).

Where picontext deliberately diverges from Pi 0.87.0 (docs/divergences.md) the tests check our
behaviour: legacy files are not rewritten at open (upgraded atomically at the first append, with
a `.vN.bak` backup), torn/unterminated last lines are not repaired at open, and so on.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from picontext._clock import FrozenClock, SequentialIds, js_date_ms
from picontext.errors import (
    EntryNotFound,
    ForkError,
    InvalidReplacement,
    InvalidSessionId,
    NotEditable,
    NotOnActiveBranch,
    SessionFormatError,
)
from picontext.session import paths
from picontext.session.convert import (
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    IMAGE_BLOCKED_TEXT,
    block_images,
    convert_to_llm,
)
from picontext.session.listing import find_most_recent_session
from picontext.session.manager import SessionManager
from picontext.session.projection import LAST, build_context_entries, build_session_context
from picontext.session.system_prompt import get_current_system_message

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sessions" / "v1"
UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
HEX8 = re.compile(r"^[0-9a-f]{8}$")
T0 = 1_772_359_200_000

MSG_NOT_VALID = "Session file is not a valid pi session: {}"
MSG_BAD_ID = (
    "Session id must be non-empty, contain only alphanumeric characters, '-', '_', and '.', "
    "and start and end with an alphanumeric character"
)
MSG_BAD_REPLACEMENT = "Context edit replacement must be null or contain string/array content"

USAGE = {
    "input": 10,
    "output": 2,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 12,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}


# ---------------------------------------------------------------------------- helpers


def U(text: Any, ts: int = 1) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": ts}


def A(text: str, provider: str = "acme", model: str = "m1", ts: int = 2) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "x",
        "provider": provider,
        "model": model,
        "usage": copy.deepcopy(USAGE),
        "stopReason": "stop",
        "timestamp": ts,
    }


def TR(text: str, call_id: str = "c1") -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "read",
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": 3,
    }


def E(kind: str, eid: str, parent: str | None, ts: str = "2026-03-01T10:00:00.000Z", **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": eid, "parentId": parent, "timestamp": ts, **fields}


def M(eid: str, parent: str | None, message: dict[str, Any], ts: str = "2026-03-01T10:00:00.000Z") -> dict[str, Any]:
    return E("message", eid, parent, ts, message=message)


def header(sid: str = "0199aa00-1111-7abc-8def-0123456789ab", cwd: str = "/w", **extra: Any) -> dict[str, Any]:
    return {"type": "session", "version": 3, "id": sid, "timestamp": "2026-03-01T10:00:00.000Z", "cwd": cwd, **extra}


def mem(**kw: Any) -> SessionManager:
    kw.setdefault("clock", FrozenClock(T0, step_ms=1))
    kw.setdefault("ids", SequentialIds())
    return SessionManager.in_memory("/w", **kw)


def write_jsonl(path: Path, values: list[Any]) -> Path:
    path.write_text("".join(json.dumps(v, separators=(",", ":"), ensure_ascii=False) + "\n" for v in values))
    return path


def lines(path: Path | str) -> list[Any]:
    return [json.loads(x) for x in Path(path).read_text().split("\n") if x.strip()]


def roles(ctx: dict[str, Any]) -> list[str]:
    return [m["role"] for m in ctx["messages"]]


def texts(ctx: dict[str, Any]) -> list[Any]:
    out = []
    for m in ctx["messages"]:
        c = m.get("content", m.get("summary"))
        if isinstance(c, list):
            c = " ".join(b.get("text", "") for b in c if isinstance(b, dict))
        out.append(c)
    return out


def opened(path: Path | str, **kw: Any) -> SessionManager:
    kw.setdefault("clock", FrozenClock(T0, step_ms=1))
    kw.setdefault("ids", SequentialIds("o"))
    kw.setdefault("warn", lambda m: None)
    return SessionManager.open(str(path), **kw)


# ---------------------------------------------------------------------------- 1-11 projection


def test_case_01_empty_entries() -> None:
    assert build_session_context([]) == {"messages": [], "thinkingLevel": "off", "model": None}


def test_case_02_linear_session() -> None:
    entries = [M("1", None, U("u1")), M("2", "1", A("a2")), M("3", "2", U("u3")), M("4", "3", A("a4"))]
    ctx = build_session_context(entries)
    assert roles(ctx) == ["user", "assistant", "user", "assistant"]
    assert texts(ctx) == ["u1", "a2", "u3", "a4"]
    assert ctx["messages"][1] is entries[1]["message"]  # unedited messages are the stored objects


def test_case_03_hidden_custom_message_reaches_context() -> None:
    entries = [
        M("1", None, U("q")),
        {
            "type": "custom_message",
            "customType": "note",
            "content": "hidden",
            "display": False,
            "id": "2",
            "parentId": "1",
            "timestamp": "2026-03-01T10:00:00.000Z",
        },
        M("3", "2", A("a")),
    ]
    ctx = build_session_context(entries, "3")
    assert len(ctx["messages"]) == 3
    middle = ctx["messages"][1]
    assert middle["role"] == "custom"
    assert middle["display"] is False
    assert middle["content"] == "hidden"
    assert middle["customType"] == "note"
    assert middle["timestamp"] == js_date_ms("2026-03-01T10:00:00.000Z")


def test_case_04_thinking_level() -> None:
    entries = [M("1", None, U("q")), E("thinking_level_change", "2", "1", thinkingLevel="high"), M("3", "2", A("a"))]
    ctx = build_session_context(entries)
    assert ctx["thinkingLevel"] == "high"
    assert len(ctx["messages"]) == 2


def test_case_05_model_from_last_assistant() -> None:
    entries = [
        M("1", None, U("q")),
        E("model_change", "2", "1", provider="openai", modelId="gpt-4"),
        M("3", "2", A("a", provider="anthropic", model="claude-test")),
    ]
    assert build_session_context(entries)["model"] == {"provider": "anthropic", "modelId": "claude-test"}
    # without the assistant the model_change wins
    assert build_session_context(entries[:2])["model"] == {"provider": "openai", "modelId": "gpt-4"}


def test_case_06_compaction_keeps_from_first_kept() -> None:
    entries = [
        M("1", None, U("u1")),
        M("2", "1", A("a2")),
        M("3", "2", U("u3")),
        M("4", "3", A("a4")),
        E("compaction", "5", "4", summary="S", firstKeptEntryId="3", tokensBefore=100),
        M("6", "5", U("u6")),
        M("7", "6", A("a7")),
    ]
    ctx = build_session_context(entries)
    assert roles(ctx) == ["compactionSummary", "user", "assistant", "user", "assistant"]
    assert texts(ctx) == ["S", "u3", "a4", "u6", "a7"]
    assert ctx["messages"][0]["tokensBefore"] == 100


def test_case_07_two_compactions_newest_wins() -> None:
    entries = [
        M("1", None, U("u1")),
        M("2", "1", A("a2")),
        E("compaction", "3", "2", summary="S1", firstKeptEntryId="1", tokensBefore=10),
        M("4", "3", U("u4")),
        M("5", "4", A("a5")),
        E("compaction", "6", "5", summary="S2", firstKeptEntryId="4", tokensBefore=20),
        M("7", "6", U("u7")),
    ]
    ctx = build_session_context(entries)
    assert texts(ctx) == ["S2", "u4", "a5", "u7"]
    assert [m["role"] for m in ctx["messages"]].count("compactionSummary") == 1


def test_case_08_tree_leaf_selects_branch() -> None:
    entries = [M("1", None, U("u1")), M("2", "1", A("a2")), M("3", "2", U("u3")), M("4", "2", U("u4"))]
    assert texts(build_session_context(entries, "3")) == ["u1", "a2", "u3"]
    assert texts(build_session_context(entries, "4")) == ["u1", "a2", "u4"]


def test_case_09_branch_summary_on_path() -> None:
    entries = [
        M("1", None, U("u1")),
        M("2", "1", A("a2")),
        M("3", "2", U("abandoned")),
        E("branch_summary", "4", "2", fromId="3", summary="tried 3"),
        M("5", "4", U("u5")),
    ]
    ctx = build_session_context(entries, "5")
    assert roles(ctx) == ["user", "assistant", "branchSummary", "user"]
    assert ctx["messages"][2]["summary"] == "tried 3"
    assert ctx["messages"][2]["fromId"] == "3"
    assert "abandoned" not in texts(ctx)


@pytest.mark.parametrize("leaf", ["nope", "", LAST])
def test_case_10_unknown_leaf_uses_last_entry(leaf: Any) -> None:
    entries = [M("1", None, U("u1")), M("2", "1", A("a2")), M("3", "2", U("u3"))]
    assert texts(build_session_context(entries, leaf)) == ["u1", "a2", "u3"]
    assert build_session_context(entries, None)["messages"] == []


def test_case_11_missing_parent_ends_path() -> None:
    entries = [M("1", None, U("u1")), M("2", "1", A("a2")), M("3", "ghost", U("orphan"))]
    ctx = build_session_context(entries, "3")
    assert texts(ctx) == ["orphan"]


# ---------------------------------------------------------------------------- 12-23 manager projection


def test_case_12_retain_none_compaction() -> None:
    sm = mem()
    sm.append_message(U("discarded"))
    cid = sm.append_compaction("S", None, 42)
    assert sm.get_entry(cid)["firstKeptEntryId"] == cid
    sm.append_message(U("after"))
    ctx = sm.build_session_context()
    assert roles(ctx) == ["compactionSummary", "user"]
    assert texts(ctx) == ["S", "after"]


def test_case_13_two_retain_none_compactions() -> None:
    sm = mem()
    sm.append_message(U("a"))
    sm.append_compaction("S1", None, 1)
    sm.append_message(U("b"))
    sm.append_compaction("S2", None, 2)
    assert texts(sm.build_session_context()) == ["S2"]


def test_case_14_nested_compaction() -> None:
    sm = mem()
    sm.append_message(U("sumfirst"))
    r = sm.append_message(U("retained"))
    c1 = sm.append_compaction("C1", r, 10)
    a = sm.append_message(A("mid"))
    c2 = sm.append_compaction("C2", r, 20)
    tail = sm.append_message(U("tail"))
    assert [e["id"] for e in sm.build_context_entries()] == [c2, r, c1, a, tail]
    ctx = sm.build_session_context()
    assert [m["summary"] for m in ctx["messages"] if m["role"] == "compactionSummary"] == ["C2"]
    assert texts(ctx) == ["C2", "retained", "mid", "tail"]
    # pure function agrees with the manager
    assert build_context_entries(sm.get_entries(), tail) == sm.build_context_entries()


def test_case_15_edit_of_retained_entry_after_compaction() -> None:
    sm = mem()
    sm.append_message(U("summarized"))
    r = sm.append_message(U("orig"))
    sm.append_compaction("S", r, 5)
    sm.append_context_edit(r, {"content": "edited"})
    assert texts(sm.build_session_context()) == ["S", "edited"]


def test_case_16_omit_edit_keeps_entry() -> None:
    sm = mem()
    t = sm.append_message(U("gone"))
    before = copy.deepcopy(sm.get_entry(t))
    sm.append_message(A("a"))
    sm.append_context_edit(t, None)
    ctx = sm.build_session_context()
    assert "gone" not in texts(ctx)
    assert texts(ctx) == ["a"]
    assert sm.get_entry(t) == before


def test_case_17_latest_edit_wins_and_restores() -> None:
    sm = mem()
    sm.append_message(U("q"))
    a = sm.append_message(A("orig"))
    stored = copy.deepcopy(sm.get_entry(a))
    sm.append_context_edit(a, {"content": [{"type": "text", "text": "first"}]})
    sm.append_context_edit(a, None)
    assert roles(sm.build_session_context()) == ["user"]
    sm.append_context_edit(a, {"content": [{"type": "text", "text": "restored"}]})
    msg = sm.build_session_context()["messages"][1]
    assert msg["content"] == [{"type": "text", "text": "restored"}]
    assert msg["usage"] == USAGE
    assert msg["stopReason"] == "stop"
    assert sm.get_entry(a) == stored


def test_case_18_replacement_normalization() -> None:
    sm = mem()
    u = sm.append_message(U("q"))
    a = sm.append_message(A("orig"))
    t = sm.append_message(TR("result"))
    ea = sm.append_context_edit(a, {"content": "x"})
    et = sm.append_context_edit(t, {"content": "x"})
    eu = sm.append_context_edit(u, {"content": "x"})
    assert sm.get_entry(ea)["replacement"] == {"content": [{"type": "text", "text": "x"}]}
    assert sm.get_entry(et)["replacement"] == {"content": [{"type": "text", "text": "x"}]}
    assert sm.get_entry(eu)["replacement"] == {"content": "x"}


def test_case_19_hand_written_string_edit_on_assistant() -> None:
    entries = [
        M("1", None, U("q")),
        M("2", "1", A("orig")),
        E("context_edit", "3", "2", targetId="2", replacement={"content": "plain"}),
    ]
    ctx = build_session_context(entries)
    assert ctx["messages"][1]["content"] == [{"type": "text", "text": "plain"}]
    assert ctx["messages"][1]["model"] == "m1"
    assert entries[1]["message"]["content"] == [{"type": "text", "text": "orig"}]


def test_case_20_edits_are_branch_relative() -> None:
    sm = mem()
    t = sm.append_message(U("original"))
    e = sm.append_context_edit(t, {"content": "edited"})
    assert texts(sm.build_session_context()) == ["edited"]
    sm.branch(t)
    assert texts(sm.build_session_context()) == ["original"]
    sm.branch(e)
    assert texts(sm.build_session_context()) == ["edited"]


@pytest.mark.parametrize("replacement", [{"content": 5}, {}, "s", LAST, {"content": {"a": 1}}])
def test_case_21_context_edit_bad_replacement(replacement: Any) -> None:
    sm = mem()
    t = sm.append_message(U("q"))
    n = len(sm.get_entries())
    with pytest.raises(InvalidReplacement) as exc:
        sm.append_context_edit(t, replacement)  # LAST stands for JS undefined
    assert str(exc.value) == MSG_BAD_REPLACEMENT
    assert len(sm.get_entries()) == n


def test_case_21_context_edit_target_errors() -> None:
    sm = mem()
    u = sm.append_message(U("q"))
    other = sm.append_message(U("other branch"))
    sm.branch(u)
    tl = sm.append_thinking_level_change("high")
    sys_id = sm.append_message({"role": "system", "content": "base", "timestamp": 1})
    bash = sm.append_message(
        {
            "role": "bashExecution",
            "command": "ls",
            "output": "",
            "exitCode": 0,
            "cancelled": False,
            "truncated": False,
            "timestamp": 2,
        }
    )
    comp = sm.append_compaction("S", u, 3)
    edit = sm.append_context_edit(u, {"content": "z"})
    n = len(sm.get_entries())
    with pytest.raises(EntryNotFound) as e1:
        sm.append_context_edit("missing", None)
    assert str(e1.value) == "Entry missing not found"
    with pytest.raises(NotOnActiveBranch) as e2:
        sm.append_context_edit(other, None)
    assert str(e2.value) == f"Entry {other} is not on the active branch"
    for target in (tl, sys_id, bash, comp, edit):
        with pytest.raises(NotEditable) as e3:
            sm.append_context_edit(target, None)
        assert str(e3.value) == f"Entry {target} does not contribute editable model content"
    # validation order: replacement first, even for an unknown id
    with pytest.raises(InvalidReplacement):
        sm.append_context_edit("missing", {})
    assert len(sm.get_entries()) == n


def _system(content: Any, ts: int, **kw: Any) -> dict[str, Any]:
    return {"role": "system", "content": content, **kw, "timestamp": ts}


READ = {"name": "read", "description": "r", "parameters": {}}
WRITE = {"name": "write", "description": "w", "parameters": {}}


def test_case_22_system_replay_into_checkpoint() -> None:
    clock = FrozenClock(T0, step_ms=1)
    sm = mem(clock=clock)
    sm.append_message(_system("base", 5, sections={"a": "A1", "b": "B1"}, toolsAdded=[READ, WRITE]))
    u1 = sm.append_message(U("q1"))
    sm.append_message(A("r1"))
    sm.append_message(_system("", 8, sections={"b": None, "c": "C1"}, toolsRemoved=[{"name": "write"}]))
    sm.append_message(U("q2"))
    cid = sm.append_compaction("SUM", u1, 100)
    entry = sm.get_entry(cid)
    checkpoint = entry["systemMessage"]
    assert checkpoint == {
        "role": "system",
        "content": "base",
        "sections": {"a": "A1", "c": "C1"},
        "toolsAdded": [READ],
        "timestamp": js_date_ms(entry["timestamp"]),
    }
    assert list(checkpoint["sections"]) == ["a", "c"]
    ctx = sm.build_session_context()
    assert roles(ctx) == ["system", "compactionSummary", "user", "assistant", "user"]
    assert ctx["messages"][0] == checkpoint
    assert sum(1 for m in ctx["messages"] if m["role"] == "system") == 1
    # retain-none from here keeps the same checkpoint
    sm.append_compaction("SUM2", None, 50)
    ctx2 = sm.build_session_context()
    assert roles(ctx2) == ["system", "compactionSummary"]
    assert {k: v for k, v in ctx2["messages"][0].items() if k != "timestamp"} == {
        k: v for k, v in checkpoint.items() if k != "timestamp"
    }


def test_case_23_compaction_without_system_messages() -> None:
    sm = mem()
    sm.append_message(U("q"))
    sm.append_message(A("a"))
    cid = sm.append_compaction("S", None, 9)
    assert "systemMessage" not in sm.get_entry(cid)
    ctx = sm.build_session_context()
    assert roles(ctx) == ["compactionSummary"]


# ---------------------------------------------------------------------------- 24-32 files


def test_case_24_lazy_flush_until_first_assistant(tmp_path: Path) -> None:
    sm = SessionManager.create("/w", str(tmp_path), clock=FrozenClock(T0, 1), ids=SequentialIds())
    path = Path(sm.get_session_file() or "")
    sm.append_message(U("q"))
    sm.append_thinking_level_change("high")
    assert not path.exists()
    sm.append_message(A("a"))
    content = lines(path)
    assert len(content) == 4
    assert content[0]["type"] == "session" and content[0]["id"] == sm.get_session_id()
    assert [e["id"] for e in content[1:]] == [e["id"] for e in sm.get_entries()]
    sm.append_model_change("acme", "m2")
    assert len(lines(path)) == 5
    assert path.read_text().endswith("\n")
    assert path.read_text().count('"type":"session"') == 1


def test_open_of_a_new_path_creates_nothing_until_the_first_write(tmp_path: Path) -> None:
    """Pi's constructor creates the session directory at once; picontext leaves the disk alone
    until the file is written, then creates the missing directories (0700) with it."""
    path = tmp_path / "path" / "to" / "session.jsonl"
    sm = opened(path)
    assert list(tmp_path.iterdir()) == []  # a typo in a path leaves no directories behind
    sm.append_message(U("q"))
    assert list(tmp_path.iterdir()) == []  # lazy flush: still nothing before the first reply
    sm.append_message(A("a"))
    assert [e["id"] for e in lines(path)[1:]] == [e["id"] for e in sm.get_entries()]
    for directory in (tmp_path / "path", tmp_path / "path" / "to"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_case_25_open_zero_byte_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    sm = opened(path)
    content = lines(path)
    assert len(content) == 1
    assert content[0]["type"] == "session"
    assert content[0]["id"] == sm.get_session_id()
    assert content[0]["version"] == 3
    uid = sm.append_message(U("q"))
    content = lines(path)
    assert len(content) == 2
    assert content[1]["id"] == uid


@pytest.mark.parametrize(
    "data",
    [
        b"\n\n  \n",
        b"garbage\nmore garbage\n",
        b'{"type":"session","timestamp":"2026-03-01T10:00:00.000Z","cwd":"/w"}\n',
        b'{"type":"session","id":5,"cwd":"/w"}\n',
        b'{"type":"message","id":"x","parentId":null}\n{"type":"session","id":"s","cwd":"/w"}\n',
        "\ufeff".encode() + b'{"type":"session","version":3,"id":"s","timestamp":"2026-03-01T10:00:00.000Z"}\n',
    ],
    ids=["blank", "garbage", "no-id", "non-string-id", "header-not-first", "bom"],
)
def test_case_26_invalid_files_refused(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(data)
    with pytest.raises(SessionFormatError) as exc:
        opened(path)
    assert str(exc.value) == MSG_NOT_VALID.format(str(path.resolve()))
    assert path.read_bytes() == data
    assert sorted(os.listdir(tmp_path)) == ["bad.jsonl"]


def _valid_file(tmp_path: Path, name: str = "s.jsonl") -> tuple[Path, bytes]:
    path = tmp_path / name
    write_jsonl(path, [header(), M("u1", None, U("q")), M("a1", "u1", A("a"))])
    return path, path.read_bytes()


def test_case_27_torn_last_line(tmp_path: Path) -> None:
    path, good = _valid_file(tmp_path)
    data = good + b'{"type":"mess'
    path.write_bytes(data)
    warnings: list[str] = []
    sm = opened(path, warn=warnings.append)
    assert [e["id"] for e in sm.get_entries()] == ["u1", "a1"]
    assert sm.get_leaf_id() == "a1"
    # divergence (b): not repaired at open
    assert path.read_bytes() == data
    assert any(f"{path}:4:" in w for w in warnings)
    nid = sm.append_message(U("next"))
    raw = path.read_bytes()
    assert raw.startswith(data + b"\n")
    assert raw.split(b"\n")[4] == json.dumps(sm.get_entry(nid), separators=(",", ":")).encode()
    again = opened(path)
    assert [e["id"] for e in again.get_entries()] == ["u1", "a1", nid]
    assert again.get_leaf_id() == nid


def test_case_28_missing_final_newline(tmp_path: Path) -> None:
    path, good = _valid_file(tmp_path)
    data = good.rstrip(b"\n")
    path.write_bytes(data)
    sm = opened(path)
    assert [e["id"] for e in sm.get_entries()] == ["u1", "a1"]
    assert path.read_bytes() == data  # divergence (b): untouched at open
    nid = sm.append_message(U("next"))
    raw = path.read_bytes()
    assert raw.startswith(data + b"\n")
    assert raw.count(b"\n") == 4 and raw.endswith(b"\n")
    assert [e.get("id") for e in lines(path)[1:]] == ["u1", "a1", nid]


def test_case_29_open_nonexistent_path(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "new.jsonl"
    sm = opened(path)
    assert sm.get_session_file() == str(path)
    sm.append_message(U("q"))
    assert not path.exists() and not path.parent.exists()  # README: neither the file nor its directories
    sm.append_message(A("a"))
    content = lines(path)
    assert [c["type"] for c in content] == ["session", "message", "message"]
    assert content[0]["id"] == sm.get_session_id()


V1_LINES = [
    {
        "type": "session",
        "id": "legacy-1",
        "timestamp": "2025-01-01T00:00:00.000Z",
        "cwd": "/w",
        "provider": "acme",
        "modelId": "m",
        "thinkingLevel": "off",
    },
    {"type": "message", "timestamp": "2025-01-01T00:00:01.000Z", "message": U("a")},
    {"type": "message", "timestamp": "2025-01-01T00:00:02.000Z", "message": A("b")},
    {"type": "message", "timestamp": "2025-01-01T00:00:03.000Z", "message": U("c")},
]


def test_case_30_v1_migration(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "v1.jsonl", V1_LINES)
    original = path.read_bytes()
    sm = opened(path)
    entries = sm.get_entries()
    assert len(entries) == 3
    assert all(HEX8.match(e["id"]) for e in entries)
    assert entries[0]["parentId"] is None
    assert [e["parentId"] for e in entries[1:]] == [e["id"] for e in entries[:-1]]
    assert sm.get_header()["version"] == 3
    assert sm.get_header()["provider"] == "acme"  # unknown header keys preserved
    assert sm.get_leaf_id() == entries[-1]["id"]
    # divergence (a): not rewritten at open; ids deterministic
    assert path.read_bytes() == original
    assert [e["id"] for e in opened(path).get_entries()] == [e["id"] for e in entries]
    assert not (tmp_path / "v1.jsonl.v1.bak").exists()
    # upgraded at the first append, original kept
    nid = sm.append_message(U("d"))
    assert (tmp_path / "v1.jsonl.v1.bak").read_bytes() == original
    content = lines(path)
    assert content[0]["version"] == 3
    assert [c["id"] for c in content[1:]] == [e["id"] for e in entries] + [nid]
    assert content[-1]["parentId"] == entries[-1]["id"]


@pytest.mark.parametrize("index,expected", [(2, 1), (0, None), (4, 3), (5, None), (99, None)])
def test_case_31_v1_first_kept_entry_index(tmp_path: Path, index: int, expected: int | None) -> None:
    # parsed lines: 0 header, 1 a, 2 b, 3 c, 4 compaction, 5 after
    values = [
        *V1_LINES,
        {
            "type": "compaction",
            "timestamp": "2025-01-01T00:00:04.000Z",
            "summary": "S",
            "firstKeptEntryIndex": index,
            "tokensBefore": 9,
        },
        {"type": "message", "timestamp": "2025-01-01T00:00:05.000Z", "message": U("after")},
    ]
    path = write_jsonl(tmp_path / "v1c.jsonl", values)
    sm = opened(path)
    entries = sm.get_entries()
    comp = entries[3]
    assert comp["type"] == "compaction"
    assert "firstKeptEntryIndex" not in comp
    if expected is None:
        assert "firstKeptEntryId" not in comp
        assert texts(sm.build_session_context()) == ["S", "after"]
    elif expected == 3:  # its own line: the id was already assigned, so it means retain-none
        assert comp["firstKeptEntryId"] == comp["id"]
        assert texts(sm.build_session_context()) == ["S", "after"]
    else:
        assert comp["firstKeptEntryId"] == entries[expected]["id"]
        assert texts(sm.build_session_context()) == ["S", "b", "c", "after"]


def test_case_32_v2_hook_message(tmp_path: Path) -> None:
    hdr = header()
    hdr["version"] = 2
    values = [
        hdr,
        M("u1", None, U("q")),
        M("h1", "u1", {"role": "hookMessage", "customType": "x", "content": "hook", "display": True, "timestamp": 5}),
    ]
    path = write_jsonl(tmp_path / "v2.jsonl", values)
    sm = opened(path)
    assert [e["id"] for e in sm.get_entries()] == ["u1", "h1"]
    ctx = sm.build_session_context()
    assert roles(ctx) == ["user", "custom"]
    assert ctx["messages"][1]["content"] == "hook"
    assert sm.get_header()["version"] == 3
    assert convert_to_llm(ctx["messages"])[1]["content"] == [{"type": "text", "text": "hook"}]


# ---------------------------------------------------------------------------- 33-44 ids, names, tree


@pytest.mark.parametrize(
    "cwd,name",
    [
        ("/home/u/proj", "--home-u-proj--"),
        ("/home/u/my.proj/", "--home-u-my.proj--"),
        ("/home/u/a b/c:d", "--home-u-a b-c-d--"),
        ("/", "----"),
    ],
)
def test_case_33_directory_names(cwd: str, name: str) -> None:
    assert paths.encode_cwd(cwd) == name


def test_case_34_file_name(tmp_path: Path) -> None:
    sm = SessionManager.create("/w", str(tmp_path))
    name = os.path.basename(sm.get_session_file() or "")
    sid = sm.get_session_id()
    m = re.match(r"^(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z)_" + re.escape(sid) + r"\.jsonl$", name)
    assert m is not None
    assert m.group(1) == sm.get_header()["timestamp"].replace(":", "-").replace(".", "-")
    assert os.path.dirname(sm.get_session_file() or "") == str(tmp_path)


BAD_IDS = ["", "-abc", "abc-", "_abc", "abc_", ".abc", "abc.", "abc/def", "abc\\def", "abc def", "abc\n"]


def test_case_35_session_id_validation(tmp_path: Path) -> None:
    assert mem(id="abc-123_def.456").get_session_id() == "abc-123_def.456"
    assert SessionManager.create("/w", str(tmp_path), id="x").get_session_id() == "x"
    for bad in BAD_IDS:
        with pytest.raises(InvalidSessionId) as exc:
            SessionManager.in_memory("/w", id=bad)
        assert str(exc.value) == MSG_BAD_ID
        with pytest.raises(InvalidSessionId):
            SessionManager.create("/w", str(tmp_path), id=bad)
    for _ in range(5):
        assert UUID7.match(SessionManager.in_memory("/w").get_session_id())


def test_case_36_labels() -> None:
    clock = FrozenClock(T0, step_ms=1000)
    sm = mem(clock=clock)
    u = sm.append_message(U("q"))
    sm.append_label_change(u, "first")
    sm.append_label_change(u, "second")
    last = sm.append_label_change(u, "third")
    assert sm.get_label(u) == "third"
    assert sm.get_leaf_id() == last
    node = sm.get_tree()[0]
    assert node.entry["id"] == u
    assert node.label == "third"
    assert node.label_timestamp == sm.get_entry(last)["timestamp"]
    # label entries are tree nodes themselves (a chain under u)
    assert node.children[0].entry["type"] == "label"
    c1 = sm.append_label_change(u, None)
    assert "label" not in sm.get_entry(c1)
    assert sm.get_label(u) is None
    sm.append_label_change(u, "back")
    c2 = sm.append_label_change(u, "")
    assert sm.get_entry(c2)["label"] == ""
    assert sm.get_label(u) is None
    assert sm.get_tree()[0].label is None
    with pytest.raises(EntryNotFound) as exc:
        sm.append_label_change("nope", "x")
    assert str(exc.value) == "Entry nope not found"


def test_case_37_create_branched_session_in_memory() -> None:
    sm = mem(ids=SequentialIds())
    old_id = sm.get_session_id()
    u1 = sm.append_message(U("q1"))
    l1 = sm.append_label_change(u1, "first")
    a1 = sm.append_message(A("a1"))
    l2 = sm.append_label_change(u1, "again")
    c = sm.append_compaction("S", l1, 5)
    u3 = sm.append_message(U("q3"))
    l2_ts = sm.get_entry(l2)["timestamp"]
    result = sm.create_branched_session(u3)
    assert result is None
    entries = sm.get_entries()
    assert [(e["id"], e["parentId"]) for e in entries[:4]] == [(u1, None), (a1, u1), (c, a1), (u3, c)]
    assert entries[2]["firstKeptEntryId"] == a1
    label = entries[4]
    assert label["type"] == "label" and label["targetId"] == u1 and label["label"] == "again"
    assert label["parentId"] == u3
    assert label["id"] not in {u1, l1, a1, l2, c, u3}
    assert label["timestamp"] == l2_ts
    assert len(entries) == 5
    assert sm.get_session_id() != old_id
    assert UUID7.match(sm.get_session_id())
    assert "parentSession" not in sm.get_header()
    assert sm.get_leaf_id() == label["id"]
    assert sm.get_label(u1) == "again"


def test_case_38_create_branched_session_persisted(tmp_path: Path) -> None:
    sm = SessionManager.create("/w", str(tmp_path), clock=FrozenClock(T0, 1), ids=SequentialIds())
    first = sm.append_message(U("q1"))
    a = sm.append_message(A("a1"))
    sm.append_message(U("q2"))
    source = sm.get_session_file()
    assert source and os.path.exists(source)
    new_file = sm.create_branched_session(first)
    assert new_file and new_file != source
    assert not os.path.exists(new_file)
    assert sm.get_header()["parentSession"] == source
    sm.append_custom_entry("ext", {"k": 1})
    a2 = sm.append_message(A("a2"))
    content = lines(new_file)
    assert sum(1 for c in content if c.get("type") == "session") == 1
    assert content[0]["type"] == "session"
    ids = [c["id"] for c in content[1:]]
    assert len(ids) == len(set(ids)) == 3
    # from a path with an assistant: written at once
    assert a not in ids
    newer = sm.create_branched_session(a2)
    assert newer and os.path.exists(newer)
    assert [c["id"] for c in lines(newer)[1:]] == ids
    assert lines(newer)[0]["parentSession"] == new_file


def test_case_39_branch_with_summary() -> None:
    sm = mem()
    sm.append_message(U("q"))
    leaf = sm.append_message(A("a"))
    bid = sm.branch_with_summary(None, "S")
    b = sm.get_entry(bid)
    assert b["parentId"] is None and b["fromId"] == leaf and b["summary"] == "S"
    assert sm.get_leaf_id() == bid
    assert roles(sm.build_session_context()) == ["branchSummary"]
    assert len(sm.get_tree()) == 2
    empty = mem()
    assert empty.get_entry(empty.branch_with_summary(None, "S"))["fromId"] == "root"
    with pytest.raises(EntryNotFound) as exc:
        sm.branch_with_summary("nope", "S")
    assert str(exc.value) == "Entry nope not found"
    # with a from id: parent is that id, fromId the previous leaf
    b2 = sm.branch_with_summary(leaf, "S2", details={"x": 1}, from_hook=True)
    e2 = sm.get_entry(b2)
    assert e2["parentId"] == leaf and e2["fromId"] == bid and e2["fromHook"] is True and e2["details"] == {"x": 1}


def test_case_40_reset_leaf() -> None:
    sm = mem()
    sm.append_message(U("q"))
    sm.append_message(A("a"))
    sm.reset_leaf()
    assert sm.get_leaf_id() is None
    assert sm.build_session_context()["messages"] == []
    assert sm.get_branch() == []
    nid = sm.append_message(U("new root"))
    assert sm.get_entry(nid)["parentId"] is None
    assert texts(sm.build_session_context()) == ["new root"]


def test_case_41_session_info_name() -> None:
    sm = mem()
    assert sm.get_session_name() is None
    eid = sm.append_session_info("  My\r\n\nName  ")
    assert sm.get_entry(eid)["name"] == "My Name"
    assert sm.get_session_name() == "My Name"
    sm.append_session_info("   ")
    assert sm.get_session_name() is None


def test_case_42_tree_order_and_orphans() -> None:
    entries = [
        header(),
        M("r", None, U("root"), ts="2026-03-01T10:00:00.000Z"),
        M("late", "r", U("late"), ts="2026-03-01T10:00:05.000Z"),
        M("early", "r", U("early"), ts="2026-03-01T10:00:01.000Z"),
        M("orphan", "ghost", U("o"), ts="2026-03-01T10:00:02.000Z"),
        M("self", "self", U("s"), ts="2026-03-01T10:00:03.000Z"),
    ]
    sm = mem(entries=entries)
    roots = sm.get_tree()
    assert [n.entry["id"] for n in roots] == ["r", "orphan", "self"]
    assert [n.entry["id"] for n in roots[0].children] == ["early", "late"]
    assert roots[1].children == []


def test_case_43_reload_leaf_is_last_line(tmp_path: Path) -> None:
    sm = SessionManager.create("/w", str(tmp_path), clock=FrozenClock(T0, 1), ids=SequentialIds())
    u = sm.append_message(U("q"))
    sm.append_message(A("a"))
    last = sm.append_message(U("q2"))
    sm.branch(u)
    path = sm.get_session_file()
    assert opened(path).get_leaf_id() == last
    b = sm.append_message(A("b"))  # child of u, last line
    sm.branch(last)
    assert opened(path).get_leaf_id() == b


@pytest.mark.parametrize(
    "trailing,leaf",
    [
        ('{"foo":1}', None),
        ("5", None),
        ("[1]", None),
        ("null", "a1"),
        ("false", "a1"),
        ("0", "a1"),
        ('""', "a1"),
    ],
)
def test_case_44_trailing_values(tmp_path: Path, trailing: str, leaf: str | None) -> None:
    path, good = _valid_file(tmp_path)
    path.write_bytes(good + trailing.encode() + b"\n")
    sm = opened(path)
    assert sm.get_leaf_id() == leaf
    if leaf is None:
        assert sm.build_session_context()["messages"] == []
    else:
        assert texts(sm.build_session_context()) == ["q", "a"]


# ---------------------------------------------------------------------------- 45-47 conversion


def _bash(**kw: Any) -> dict[str, Any]:
    base = {
        "role": "bashExecution",
        "command": "ls -la",
        "output": "",
        "exitCode": 0,
        "cancelled": False,
        "truncated": False,
        "timestamp": 7,
    }
    return {**base, **kw}


def test_case_45_convert_to_llm() -> None:
    ok = convert_to_llm([_bash(output="a.txt\nb.txt", exitCode=0)])
    assert len(ok) == 1 and ok[0]["role"] == "user" and ok[0]["timestamp"] == 7
    [block] = ok[0]["content"]
    text_ok = block["text"]
    assert block["type"] == "text"
    assert "`ls -la`" in text_ok
    assert "```\na.txt\nb.txt\n```" in text_ok
    zero_code = text_ok

    empty = convert_to_llm([_bash(output="", exitCode=1, truncated=True, fullOutputPath="/tmp/full.log")])
    text_empty = empty[0]["content"][0]["text"]
    assert "```" not in text_empty
    assert "/tmp/full.log" in text_empty
    assert "1" in text_empty.split("`ls -la`", 1)[1]
    paragraphs = text_empty.split("\n\n")
    assert len(paragraphs) == 3  # placeholder, exit sentence, truncation note
    exit_sentence = paragraphs[1]
    assert exit_sentence not in zero_code  # exit 0 has no exit line
    assert convert_to_llm([_bash(output="x", exitCode=None)])[0]["content"][0]["text"].count("\n\n") == 0

    cancelled = convert_to_llm([_bash(output="x", exitCode=1, cancelled=True)])[0]["content"][0]["text"]
    assert "cancel" in cancelled.lower()
    assert exit_sentence not in cancelled
    assert cancelled.count("\n\n") == 1

    assert convert_to_llm([_bash(output="x", excludeFromContext=True)]) == []
    custom = convert_to_llm(
        [{"role": "custom", "customType": "t", "content": "hi", "display": False, "details": {"d": 1}, "timestamp": 3}]
    )
    assert custom == [{"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 3}]
    blocks = [{"type": "text", "text": "x"}, {"type": "image", "data": "AA", "mimeType": "image/png"}]
    assert (
        convert_to_llm([{"role": "custom", "customType": "t", "content": blocks, "display": True, "timestamp": 3}])[0][
            "content"
        ]
        == blocks
    )
    comp = convert_to_llm([{"role": "compactionSummary", "summary": "SUM", "tokensBefore": 1, "timestamp": 4}])
    assert comp == [
        {
            "role": "user",
            "timestamp": 4,
            "content": [{"type": "text", "text": COMPACTION_SUMMARY_PREFIX + "SUM" + COMPACTION_SUMMARY_SUFFIX}],
        }
    ]
    assert COMPACTION_SUMMARY_PREFIX.endswith("\n\n<summary>\n") and COMPACTION_SUMMARY_SUFFIX == "\n</summary>"
    br = convert_to_llm([{"role": "branchSummary", "summary": "B", "fromId": "x", "timestamp": 5}])
    assert br[0]["content"][0]["text"] == BRANCH_SUMMARY_PREFIX + "B" + BRANCH_SUMMARY_SUFFIX
    assert BRANCH_SUMMARY_PREFIX.endswith("\n\n<summary>\n") and BRANCH_SUMMARY_SUFFIX == "</summary>"
    system = {"role": "system", "content": "s", "timestamp": 1}
    user = U("u")
    out = convert_to_llm([system, {"role": "hookMessage", "content": "x"}, {"role": "mystery"}, user])
    assert out == [system, user]
    assert out[0] is system and out[1] is user


def test_case_46_image_blocking() -> None:
    img = {"type": "image", "data": "AA", "mimeType": "image/png"}
    msg = {"role": "user", "content": [img, img, {"type": "text", "text": "x"}, img], "timestamp": 1}
    [out] = block_images([msg])
    placeholder = {"type": "text", "text": IMAGE_BLOCKED_TEXT}
    assert out["content"] == [placeholder, {"type": "text", "text": "x"}, placeholder]
    assert msg["content"][0] is img  # input untouched
    tool = {**TR("t"), "content": [img]}
    assert block_images([tool])[0]["content"] == [placeholder]
    assistant = {"role": "assistant", "content": [img], "timestamp": 1}
    assert block_images([assistant]) == [assistant]
    assert block_images([U("plain")]) == [U("plain")]


def test_case_47_current_system_message() -> None:
    assert get_current_system_message([U("x"), A("y")]) is None
    assert get_current_system_message([{"role": "system", "content": "", "toolsAdded": [], "timestamp": 7}]) == {
        "role": "system",
        "content": "",
        "timestamp": 7,
    }
    t1, t2, t1b = {"name": "t1"}, {"name": "t2"}, {"name": "t1", "description": "new"}
    replay = get_current_system_message(
        [
            {
                "role": "system",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                "sections": {"x": "1", "y": "2"},
                "timestamp": 3,
            },
            U("between"),
            {"role": "system", "content": "more", "sections": {"x": None}, "toolsAdded": [t1, t2], "timestamp": 4},
            {
                "role": "system",
                "content": "",
                "sections": {"x": "3"},
                "toolsRemoved": [{"name": "t1"}],
                "toolsAdded": [t1b],
                "timestamp": 5,
            },
        ]
    )
    assert replay == {
        "role": "system",
        "content": "a\nb\n\nmore",
        "sections": {"y": "2", "x": "3"},
        "toolsAdded": [t2, t1b],
        "timestamp": 3,
    }
    assert list(replay["sections"]) == ["y", "x"]


# ---------------------------------------------------------------------------- 48-52 fork, listing, adoption


def test_case_48_fork_from(tmp_path: Path) -> None:
    src_dir, dst_dir = tmp_path / "src", tmp_path / "dst"
    sm = SessionManager.create("/w/a", str(src_dir))
    u = sm.append_message(U("q"))
    a = sm.append_message(A("a"))
    sm.branch(u)
    sm.append_message(U("other"))
    sm.append_label_change(a, "lbl")
    source = sm.get_session_file()
    clock = FrozenClock(T0)
    fork = SessionManager.fork_from(source, "/w/b/../b2", str(dst_dir), clock=clock, ids=SequentialIds("f"))
    hdr = fork.get_header()
    assert hdr["version"] == 3
    assert hdr["id"] != sm.get_session_id()
    assert hdr["cwd"] == "/w/b2"
    assert hdr["parentSession"] == os.path.abspath(source)
    assert [json.dumps(e, sort_keys=True) for e in fork.get_entries()] == [
        json.dumps(e, sort_keys=True) for e in sm.get_entries()
    ]
    assert lines(fork.get_session_file())[1:] == lines(source)[1:]
    assert fork.get_leaf_id() == sm.get_entries()[-1]["id"]
    assert fork.get_label(a) == "lbl"
    assert os.path.dirname(fork.get_session_file()) == str(dst_dir)
    # same custom id at the same instant -> exclusive create fails
    SessionManager.fork_from(source, "/w/b", str(dst_dir), id="custom", clock=FrozenClock(T0))
    with pytest.raises(FileExistsError):
        SessionManager.fork_from(source, "/w/b", str(dst_dir), id="custom", clock=FrozenClock(T0))
    with pytest.raises(InvalidSessionId):
        SessionManager.fork_from(source, "/w/b", str(dst_dir), id="-bad")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(ForkError) as exc:
        SessionManager.fork_from(str(empty), "/w/b", str(dst_dir))
    assert str(exc.value) == f"Cannot fork: source session file is empty or invalid: {empty}"
    with pytest.raises(ForkError):
        SessionManager.fork_from(str(tmp_path / "missing.jsonl"), "/w/b", str(dst_dir))


def _session_in(directory: Path, cwd: str, first: Any, ts0: int, name: str | None = None) -> SessionManager:
    sm = SessionManager.create(cwd, str(directory), clock=FrozenClock(ts0, 1000))
    sm.append_message(U(first, ts=ts0 + 1))
    sm.append_message(A("reply", ts=ts0 + 2))
    sm.append_message(
        {
            "role": "toolResult",
            "toolCallId": "c",
            "toolName": "t",
            "content": [],
            "isError": False,
            "timestamp": ts0 + 99_000,
        }
    )
    if name:
        sm.append_session_info("old")
        sm.append_session_info(name)
    return sm


def test_case_49_list_with_cwd_filter(tmp_path: Path) -> None:
    shared = tmp_path / "flat"
    s1 = _session_in(
        shared, "/proj/a", [{"type": "text", "text": "hello"}, {"type": "text", "text": "world"}], T0, name="Named"
    )
    s2 = _session_in(shared, "/proj/a", "second", T0 + 10_000)
    _session_in(shared, "/proj/b", "other project", T0 + 20_000)
    infos = SessionManager.list("/proj/a", str(shared))
    assert [i.id for i in infos] == [s2.get_session_id(), s1.get_session_id()]
    info = infos[1]
    assert info.first_message == "hello world"
    assert info.message_count == 3
    assert info.name == "Named"
    assert info.cwd == "/proj/a"
    assert info.path == s1.get_session_file()
    assert info.modified.timestamp() * 1000 == pytest.approx(T0 + 2)  # newest user/assistant, not the tool result
    assert [i.cwd for i in SessionManager.list("/proj/b", str(shared))] == ["/proj/b"]
    assert len(SessionManager.list_all(str(shared))) == 3


def test_case_50_find_most_recent_session(tmp_path: Path) -> None:
    d = tmp_path / "d"
    old = _session_in(d, "/proj/a", "old", T0).get_session_file()
    other = _session_in(d, "/proj/b", "b", T0).get_session_file()
    bad = d / "zz-bad.jsonl"
    bad.write_text('{"type":"message"}\n')
    now = 2_000_000_000
    os.utime(old, (now, now))
    os.utime(other, (now + 10, now + 10))
    os.utime(bad, (now + 20, now + 20))
    assert find_most_recent_session(str(d)) == other
    assert find_most_recent_session(str(d), "/proj/a") == old
    assert find_most_recent_session(str(d), "/proj/none") is None
    assert find_most_recent_session(str(tmp_path / "missing")) is None


def test_case_51_in_memory_adoption() -> None:
    src = mem()
    src.append_message(U("q"))
    src.append_message(A("a"))
    src.append_thinking_level_change("low")
    entries = src.get_entries()
    sm = SessionManager.in_memory("/w", entries=entries, ids=SequentialIds())  # same id sequence as src
    assert sm.get_entries() == entries
    assert sm.get_leaf_id() == entries[-1]["id"]
    nid = sm.append_message(U("next"))
    assert sm.get_entry(nid)["parentId"] == entries[-1]["id"]
    assert nid not in {e["id"] for e in entries}
    assert len({e["id"] for e in sm.get_entries()}) == 4
    restored = SessionManager.in_memory("/w", id="restored", entries=entries)
    assert restored.get_session_id() == "restored"
    assert restored.get_header()["id"] == "restored"


def test_case_52_omitted_assistant_still_sets_model() -> None:
    sm = mem()
    sm.append_message(U("q"))
    a = sm.append_message(A("a", provider="p9", model="m9"))
    sm.append_context_edit(a, None)
    ctx = sm.build_session_context()
    assert roles(ctx) == ["user"]
    assert ctx["model"] == {"provider": "p9", "modelId": "m9"}


# ---------------------------------------------------------------------------- 53-54 legacy fixtures


def _fixture_copy(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copyfile(FIXTURES / name, dst)
    os.chmod(dst, 0o644)
    return dst


def _role_counts(messages: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in messages:
        counts[m["role"]] = counts.get(m["role"], 0) + 1
    return counts


def test_case_53_before_compaction_fixture(tmp_path: Path) -> None:
    path = _fixture_copy(tmp_path, "real-before-compaction.jsonl")
    original = path.read_bytes()
    raw_lines = [json.loads(x) for x in original.split(b"\n") if x.strip()]
    sm = opened(path)
    entries = sm.get_entries()
    assert len(entries) == 1002
    types = _role_counts([{"role": e["type"]} for e in entries])
    assert types == {"message": 990, "model_change": 5, "thinking_level_change": 5, "compaction": 2}
    ctx = sm.build_session_context()
    assert len(ctx["messages"]) == 446
    assert _role_counts(ctx["messages"]) == {
        "compactionSummary": 1,
        "user": 31,
        "assistant": 219,
        "toolResult": 192,
        "bashExecution": 3,
    }
    assert ctx["messages"][0]["role"] == "compactionSummary"
    assert ctx["thinkingLevel"] == "off"
    assert ctx["model"] == {"provider": "anthropic", "modelId": "claude-opus-4-5"}
    compactions = [e for e in entries if e["type"] == "compaction"]
    newest = compactions[-1]
    assert raw_lines[551]["type"] != "session"
    target = entries[551 - 1]  # file line index 551 (header = 0)
    assert target["timestamp"] == raw_lines[551]["timestamp"]
    assert newest["firstKeptEntryId"] == target["id"]
    assert path.read_bytes() == original  # opening did not rewrite the legacy file
    # pure pipeline agrees with the manager
    assert build_session_context(entries)["messages"] == ctx["messages"]


def test_case_54_large_session_fixture(tmp_path: Path) -> None:
    path = _fixture_copy(tmp_path, "real-large-session.jsonl")
    sm = opened(path)
    assert len(sm.get_entries()) == 1018
    ctx = sm.build_session_context()
    assert len(ctx["messages"]) == 914
    assert _role_counts(ctx["messages"]) == {"user": 88, "assistant": 453, "toolResult": 373}
    assert ctx["thinkingLevel"] == "off"
    assert ctx["model"] == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}

"""Storage robustness: torn lines, malformed-line warnings, BOM, concurrent writers, failed writes,
vanished files, file modes, legacy upgrades, parent cycles and unknown data (divergences a-i)."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from picontext._clock import FrozenClock, SequentialIds
from picontext.errors import SessionFormatError, SessionWriteError
from picontext.session import store as store_mod
from picontext.session.manager import SessionManager
from picontext.session.projection import build_session_context, build_session_path
from picontext.session.store import JsonlSessionStore

T0 = 1_772_359_200_000
USAGE = {
    "input": 1,
    "output": 1,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 2,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}


def U(text: str, ts: int = 1) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": ts}


def A(text: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "x",
        "provider": "acme",
        "model": "m1",
        "usage": dict(USAGE),
        "stopReason": "stop",
        "timestamp": 2,
    }


HEADER = {"type": "session", "version": 3, "id": "sess-1", "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/w"}


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def write_lines(path: Path, values: list[Any]) -> bytes:
    data = "".join(dumps(v) + "\n" for v in values).encode()
    path.write_bytes(data)
    return data


def basic_file(path: Path) -> bytes:
    return write_lines(
        path,
        [
            HEADER,
            {
                "type": "message",
                "id": "u1",
                "parentId": None,
                "timestamp": "2026-03-01T10:00:01.000Z",
                "message": U("q"),
            },
            {
                "type": "message",
                "id": "a1",
                "parentId": "u1",
                "timestamp": "2026-03-01T10:00:02.000Z",
                "message": A("a"),
            },
        ],
    )


def open_sm(path: Path, warnings: list[str] | None = None, **kw: Any) -> SessionManager:
    kw.setdefault("clock", FrozenClock(T0, 1))
    kw.setdefault("ids", SequentialIds())
    return SessionManager.open(str(path), warn=(warnings.append if warnings is not None else lambda m: None), **kw)


def parsed(path: Path) -> list[Any]:
    return [json.loads(x) for x in path.read_bytes().split(b"\n") if x.strip()]


def new_session_file(tmp_path: Path) -> tuple[SessionManager, Path]:
    sm = SessionManager.create("/w", str(tmp_path), clock=FrozenClock(T0, 1), ids=SequentialIds(), warn=lambda m: None)
    sm.append_message(U("q"))
    sm.append_message(A("a"))
    path = Path(sm.get_session_file() or "")
    assert path.exists()
    return sm, path


# ---------------------------------------------------------------------------- torn / malformed lines


def test_torn_last_line_is_left_alone_and_next_append_starts_fresh(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = basic_file(path)
    torn = good + b'{"type":"message","id":"x1","parentId":"a1","mess'
    path.write_bytes(torn)
    warnings: list[str] = []
    sm = open_sm(path, warnings)
    assert [e["id"] for e in sm.get_entries()] == ["u1", "a1"]
    assert path.read_bytes() == torn
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{path}:4: ")
    assert "torn last line" in warnings[0]
    n1 = sm.append_message(U("n1"))
    n2 = sm.append_message(U("n2"))
    data = path.read_bytes()
    assert data.startswith(torn + b"\n")
    tail = data[len(torn) + 1 :].split(b"\n")
    assert [json.loads(x)["id"] for x in tail if x] == [n1, n2]
    reopened_warnings: list[str] = []
    again = open_sm(path, reopened_warnings)
    assert [e["id"] for e in again.get_entries()] == ["u1", "a1", n1, n2]
    assert reopened_warnings and f"{path}:4:" in reopened_warnings[0]
    assert "torn last line" not in reopened_warnings[0]  # no longer the last line: an ordinary unreadable line


def test_malformed_lines_reported_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = basic_file(path).split(b"\n")
    data = b"\n".join([good[0], b"not json", good[1], b"", b"{broken", good[2], b"   ", b"[1,"]) + b"\n"
    path.write_bytes(data)
    warnings: list[str] = []
    sm = open_sm(path, warnings)
    assert [e["id"] for e in sm.get_entries()] == ["u1", "a1"]
    assert [w.split(" ")[0] for w in warnings] == [f"{path}:2:", f"{path}:5:", f"{path}:8:"]
    assert path.read_bytes() == data


def test_crlf_and_unicode_separators(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    text = "x\u2028y\u2029z"
    data = (
        dumps(HEADER)
        + "\r\n"
        + dumps(
            {
                "type": "message",
                "id": "u1",
                "parentId": None,
                "timestamp": "2026-03-01T10:00:01.000Z",
                "message": U(text),
            }
        )
        + "\r\n"
    )
    path.write_bytes(data.encode())
    warnings: list[str] = []
    sm = open_sm(path, warnings)
    assert warnings == []
    assert [m["content"] for m in sm.build_session_context()["messages"]] == [text]


def test_bom_header_refused(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    data = b"\xef\xbb\xbf" + basic_file(path)
    path.write_bytes(data)
    with pytest.raises(SessionFormatError) as exc:
        open_sm(path)
    assert str(exc.value) == f"Session file is not a valid pi session: {path}"
    assert exc.value.path == str(path)
    assert path.read_bytes() == data


# ---------------------------------------------------------------------------- concurrency

WRITER = textwrap.dedent("""
    import os, sys, time
    from picontext.session.manager import SessionManager
    path, tag, count, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    sm = SessionManager.open(path, warn=lambda m: None)
    open(go + "." + tag, "w").close()  # opened: ready to race the others
    while not os.path.exists(go):
        time.sleep(0.001)
    for i in range(count):
        sm.append_message({"role": "user", "content": f"{tag}:{i}", "timestamp": i})
""")


@pytest.mark.parametrize("writers", [2, 4])
def test_concurrent_processes_lose_no_line(tmp_path: Path, writers: int) -> None:
    path = tmp_path / "shared.jsonl"
    basic_file(path)
    go = tmp_path / "go"
    count = 200
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), f"w{k}", str(count), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for k in range(writers)
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"go.w{k}").exists() for k in range(writers)):  # every writer has opened
        assert time.monotonic() < deadline, "writers did not start"
        time.sleep(0.005)
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    raw_lines = raw.split(b"\n")[:-1]
    assert len(raw_lines) == 3 + writers * count
    values = [json.loads(x) for x in raw_lines]  # every line parses
    contents = [v["message"]["content"] for v in values[3:]]
    assert len(set(contents)) == len(contents)
    assert set(contents) == {f"w{k}:{i}" for k in range(writers) for i in range(count)}
    for k in range(writers):  # each writer's own lines stay in its order
        mine = [c for c in contents if c.startswith(f"w{k}:")]
        assert mine == [f"w{k}:{i}" for i in range(count)]
    assert len(open_sm(path).get_entries()) == 2 + writers * count


# ---------------------------------------------------------------------------- (f) failed writes


def _state(sm: SessionManager) -> tuple[Any, ...]:
    return (
        json.dumps(sm.get_entries()),
        sm.get_leaf_id(),
        json.dumps(sm.build_session_context(), default=list),  # the messages are a read-only view
        sm.get_session_name(),
        sm.get_label("u1"),
    )


def _half_then_enospc(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    real_write = os.write
    calls: list[int] = []

    def fake_write(fd: int, data: Any) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            half = bytes(data)[: max(1, len(data) // 2)]
            return real_write(fd, half)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_mod.os, "write", fake_write)
    return calls


@pytest.mark.parametrize("op", ["message", "label", "session_info", "compaction", "edit"])
def test_enospc_mid_append_leaves_file_and_memory_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    path = tmp_path / "s.jsonl"
    basic_file(path)
    sm = open_sm(path)
    sm.append_label_change("u1", "keep")
    before_bytes = path.read_bytes()
    before = _state(sm)
    calls = _half_then_enospc(monkeypatch)
    with pytest.raises(OSError) as exc:
        if op == "message":
            sm.append_message(U("x" * 5000))
        elif op == "label":
            sm.append_label_change("u1", "changed")
        elif op == "session_info":
            sm.append_session_info("new name")
        elif op == "compaction":
            sm.append_compaction("S", None, 1)
        else:
            sm.append_context_edit("u1", None)
    assert isinstance(exc.value, SessionWriteError)
    assert len(calls) >= 2  # really wrote half before failing
    monkeypatch.undo()
    assert path.read_bytes() == before_bytes
    assert _state(sm) == before
    # the manager keeps working afterwards and the id can be re-used without collision
    nid = sm.append_message(U("after"))
    assert parsed(path)[-1]["id"] == nid
    assert parsed(path)[-1]["parentId"] == before[1]


def test_failing_store_append_rolls_back(tmp_path: Path) -> None:
    class FailingStore(JsonlSessionStore):
        fail = False

        def append(self, entries: list[Any], **kw: Any) -> Any:
            if FailingStore.fail:
                raise SessionWriteError("disk full")
            return super().append(entries, **kw)

    path = tmp_path / "s.jsonl"
    basic_file(path)
    sm = SessionManager.open_store(FailingStore(str(path)), file=str(path), warn=lambda m: None)
    before_bytes = path.read_bytes()
    before = _state(sm)
    FailingStore.fail = True
    with pytest.raises(SessionWriteError):
        sm.append_message(A("lost"))
    with pytest.raises(SessionWriteError):
        sm.append_compaction("S", "u1", 3)
    assert path.read_bytes() == before_bytes
    assert _state(sm) == before
    assert sm.get_children("a1") == []


def test_failed_branch_with_summary_keeps_leaf(tmp_path: Path) -> None:
    class FailingStore(JsonlSessionStore):
        def append(self, entries: list[Any], **kw: Any) -> Any:
            raise SessionWriteError("disk full")

    path = tmp_path / "s.jsonl"
    basic_file(path)
    sm = SessionManager.open_store(FailingStore(str(path)), file=str(path), warn=lambda m: None)
    with pytest.raises(SessionWriteError):
        sm.branch_with_summary("u1", "S")
    assert len(sm.get_entries()) == 2
    assert sm.get_leaf_id() == "a1"


def test_enospc_on_first_flush_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sm = SessionManager.create("/w", str(tmp_path), clock=FrozenClock(T0, 1), ids=SequentialIds())
    sm.append_message(U("q"))
    before = _state(sm)
    _half_then_enospc(monkeypatch)
    with pytest.raises(OSError):
        sm.append_message(A("a"))
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []
    assert _state(sm) == before
    sm.append_message(A("a"))
    assert [v["type"] for v in parsed(Path(sm.get_session_file() or ""))] == ["session", "message", "message"]


# ---------------------------------------------------------------------------- (e) vanished file


def test_deleted_file_is_rewritten_whole(tmp_path: Path) -> None:
    warnings: list[str] = []
    sm = SessionManager.create("/w", str(tmp_path), clock=FrozenClock(T0, 1), ids=SequentialIds(), warn=warnings.append)
    sm.append_message(U("q"))
    sm.append_message(A("a"))
    path = Path(sm.get_session_file() or "")
    os.unlink(path)
    nid = sm.append_message(U("after delete"))
    content = parsed(path)
    assert content[0] == sm.get_header()
    assert [c["id"] for c in content[1:]] == [e["id"] for e in sm.get_entries()]
    assert content[-1]["id"] == nid
    assert any("deleted" in w for w in warnings)
    reopened = open_sm(path)
    assert reopened.get_session_id() == sm.get_session_id()
    assert len(reopened.get_entries()) == 3
    sm.append_message(A("more"))  # plain append again
    assert len(parsed(path)) == 5


# ---------------------------------------------------------------------------- (g) file modes


def _mode(path: str | Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_new_files_are_private(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        sm, path = new_session_file(tmp_path / "a")
        assert _mode(path) == 0o600
        fork = SessionManager.fork_from(str(path), "/w2", str(tmp_path / "b"))
        assert _mode(fork.get_session_file() or "") == 0o600
        branched = sm.create_branched_session(sm.get_entries()[-1]["id"])
        assert branched and _mode(branched) == 0o600
        empty = tmp_path / "empty.jsonl"
        empty.touch()
        open_sm(empty)
        assert _mode(empty) == 0o600
        opened_new = open_sm(tmp_path / "c" / "new.jsonl")
        opened_new.append_message(A("a"))
        assert _mode(tmp_path / "c" / "new.jsonl") == 0o600
    finally:
        os.umask(old_umask)


# ---------------------------------------------------------------------------- (a) legacy upgrade

V1 = [
    {"type": "session", "id": "legacy-1", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/w", "provider": "acme"},
    {"type": "message", "timestamp": "2025-01-01T00:00:01.000Z", "message": U("a")},
    {"type": "message", "timestamp": "2025-01-01T00:00:02.000Z", "message": A("b")},
    {
        "type": "compaction",
        "timestamp": "2025-01-01T00:00:03.000Z",
        "summary": "S",
        "firstKeptEntryIndex": 2,
        "tokensBefore": 9,
    },
]


def test_legacy_v1_upgrade_is_atomic_with_backup(tmp_path: Path) -> None:
    path = tmp_path / "v1.jsonl"
    original = write_lines(path, V1)
    warnings: list[str] = []
    sm = open_sm(path, warnings)
    ids = [e["id"] for e in sm.get_entries()]
    assert path.read_bytes() == original
    assert sorted(os.listdir(tmp_path)) == ["v1.jsonl"]
    assert [e["id"] for e in open_sm(path).get_entries()] == ids  # deterministic ids
    nid = sm.append_message(U("c"))
    assert (tmp_path / "v1.jsonl.v1.bak").read_bytes() == original
    assert sorted(os.listdir(tmp_path)) == ["v1.jsonl", "v1.jsonl.v1.bak"]  # no temp files left
    content = parsed(path)
    assert content[0]["version"] == 3 and content[0]["provider"] == "acme"
    assert [c["id"] for c in content[1:]] == [*ids, nid]
    assert content[3]["firstKeptEntryId"] == ids[1]
    assert "firstKeptEntryIndex" not in content[3]
    assert any(".v1.bak" in w for w in warnings)
    # second append is a plain append, the backup is not touched
    sm.append_message(U("d"))
    assert len(parsed(path)) == 6
    assert (tmp_path / "v1.jsonl.v1.bak").read_bytes() == original
    again = open_sm(path)
    assert [e["id"] for e in again.get_entries()] == [e["id"] for e in sm.get_entries()]


def test_legacy_v2_upgrade_backup_name(tmp_path: Path) -> None:
    path = tmp_path / "v2.jsonl"
    original = write_lines(
        path,
        [
            {**HEADER, "version": 2},
            {
                "type": "message",
                "id": "u1",
                "parentId": None,
                "timestamp": "2026-03-01T10:00:01.000Z",
                "message": U("q"),
            },
            {
                "type": "message",
                "id": "h1",
                "parentId": "u1",
                "timestamp": "2026-03-01T10:00:02.000Z",
                "message": {
                    "role": "hookMessage",
                    "customType": "t",
                    "content": "hook",
                    "display": True,
                    "timestamp": 3,
                },
            },
        ],
    )
    sm = open_sm(path)
    assert path.read_bytes() == original
    sm.append_message(U("x"))
    assert (tmp_path / "v2.jsonl.v2.bak").read_bytes() == original
    content = parsed(path)
    assert content[0]["version"] == 3
    assert content[2]["message"]["role"] == "custom"
    assert [c["id"] for c in content[1:3]] == ["u1", "h1"]


def test_legacy_upgrade_failure_keeps_original(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "v1.jsonl"
    original = write_lines(path, V1)
    sm = open_sm(path)
    before = _state(sm)

    def boom(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_mod.os, "replace", boom)
    with pytest.raises(OSError):
        sm.append_message(U("c"))
    monkeypatch.undo()
    assert path.read_bytes() == original
    assert _state(sm) == before
    # the upgrade is retried at the next append
    sm.append_message(U("c"))
    assert parsed(path)[0]["version"] == 3
    assert (tmp_path / "v1.jsonl.v1.bak").read_bytes() == original


def test_legacy_upgrade_failure_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "v1.jsonl"
    write_lines(path, V1)
    sm = open_sm(path)

    def boom(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_mod.os, "replace", boom)
    with pytest.raises(OSError):
        sm.append_message(U("c"))
    monkeypatch.undo()
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []


def test_fork_from_migrates_legacy_source(tmp_path: Path) -> None:
    path = tmp_path / "v1.jsonl"
    original = write_lines(path, V1)
    fork = SessionManager.fork_from(str(path), "/w2", str(tmp_path / "dst"))
    assert path.read_bytes() == original
    entries = fork.get_entries()
    assert all(isinstance(e.get("id"), str) for e in entries)
    assert entries[0]["parentId"] is None
    assert [e["parentId"] for e in entries[1:]] == [e["id"] for e in entries[:-1]]
    assert fork.get_leaf_id() == entries[-1]["id"]
    assert [m["role"] for m in fork.build_session_context()["messages"]] == ["compactionSummary", "assistant"]
    on_disk = parsed(Path(fork.get_session_file() or ""))
    assert on_disk[0]["version"] == 3
    assert on_disk[1:] == entries


# ---------------------------------------------------------------------------- (h) cycles


def test_parent_cycle_does_not_hang(tmp_path: Path) -> None:
    def m(eid: str, parent: str | None, text: str) -> dict[str, Any]:
        return {
            "type": "message",
            "id": eid,
            "parentId": parent,
            "timestamp": "2026-03-01T10:00:00.000Z",
            "message": U(text),
        }

    cycle = [m("a", "c", "A"), m("b", "a", "B"), m("c", "b", "C")]
    path_ids = [e["id"] for e in build_session_path(cycle, "c")]
    assert sorted(path_ids) == ["a", "b", "c"] and path_ids[-1] == "c"
    assert len(build_session_context(cycle, "b")["messages"]) == 3
    selfp = [m("s", "s", "S")]
    assert [e["id"] for e in build_session_path(selfp, "s")] == ["s"]
    path = tmp_path / "cycle.jsonl"
    write_lines(path, [HEADER, *cycle, *selfp])
    sm = open_sm(path)
    assert len(sm.get_branch("c")) == 3
    assert len(sm.build_session_context()["messages"]) == 1
    sm.branch("a")
    assert len(sm.build_session_context()["messages"]) == 3
    assert len(sm.get_tree()) >= 1


# ---------------------------------------------------------------------------- (i) unknown data survives


def test_unknown_types_and_fields_survive_append(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    raw_lines = [
        '{"type":"session","version":3,"id":"sess-1","timestamp":"2026-03-01T10:00:00.000Z","cwd":"/w","extra":{"k":[1,2.50,"é"]}}',
        '{"type":"message","id":"u1","parentId":null,"timestamp":"2026-03-01T10:00:01.000Z","message":{"role":"user","content":"q","timestamp":1,"future":true},"zz":1}',
        '{"type":"hologram","id":"h1","parentId":"u1","timestamp":"2026-03-01T10:00:02.000Z","payload":{"deep":[null,{"x":1.5e300}]}}',
        '{ "type" : "message", "id":"a1","parentId":"h1","timestamp":"2026-03-01T10:00:03.000Z",'
        '"message":{"role":"assistant","content":[{"type":"futureBlock","v":1}],"api":"x","provider":"acme",'
        '"model":"m1","usage":{},"stopReason":"stop","timestamp":2,"newField":"\\u00e9"}}',
    ]
    data = ("\n".join(raw_lines) + "\n").encode()
    path.write_bytes(data)
    sm = open_sm(path)
    assert sm.get_leaf_id() == "a1"
    assert [e["id"] for e in sm.get_branch()] == ["u1", "h1", "a1"]
    ctx = sm.build_session_context()
    assert [m["role"] for m in ctx["messages"]] == ["user", "assistant"]
    assert ctx["messages"][1]["content"] == [{"type": "futureBlock", "v": 1}]
    sm.append_message(U("next"))
    sm.append_context_edit("a1", {"content": "short"})
    after = path.read_bytes()
    assert after.startswith(data)
    assert after.split(b"\n")[:4] == [x.encode() for x in raw_lines]
    fork = SessionManager.fork_from(str(path), "/w2", str(tmp_path / "fork"))
    fork_lines = parsed(Path(fork.get_session_file() or ""))
    assert fork_lines[1:] == parsed(path)[1:]
    assert fork_lines[2]["payload"] == json.loads(raw_lines[2])["payload"]


def test_legacy_upgrade_by_second_writer_loses_no_line(tmp_path: Path) -> None:
    path = tmp_path / "v1.jsonl"
    write_lines(path, V1)
    first = open_sm(path, ids=SequentialIds("a"))
    second = open_sm(path, ids=SequentialIds("b"))
    first.append_message(U("from first"))
    second.append_message(U("from second"))
    contents = [v["message"]["content"] for v in parsed(path) if v.get("type") == "message"]
    assert "from first" in contents
    assert "from second" in contents

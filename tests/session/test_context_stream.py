"""`context --json` from the entry columns (session/jsonl_columns.py, session/context_stream.py):
byte-identical to the full reader's projection on regular files, cold and warm, after appends,
truncation, replacement and torn tails; every other file goes to the full reader."""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from picontext import _json
from picontext.cli import loading
from picontext.session import jsonl_columns, jsonl_index
from picontext.session.index import EntryIndex
from picontext.session.manager import SessionManager
from picontext.session.store import indexed_columns, read_session_file

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "differential"))
import sessiongen  # noqa: E402

import gen_realistic  # noqa: E402


def full_reader(path: str, leaf: str | None = None) -> bytes:
    """What `context --json` printed before the columns: the whole file read, projected live."""
    return _json.dumps(loading.project_file(path, leaf).context()) + b"\n"


def from_columns(path: str, leaf: str | None = None) -> bytes:
    pieces = loading.context_json_pieces(path, leaf)
    assert pieces is not None, "the columns were not used"
    return b"".join(pieces)


def cols_file(path: str) -> str:
    return jsonl_columns.columns_path(os.path.realpath(path))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the columns were rebuilt from scratch and how often lines were added."""
    counts = {"new": 0, "extend": 0}
    real_new, real_extend = jsonl_columns.new_columns, jsonl_columns.extend

    def new(st: os.stat_result) -> Any:
        counts["new"] += 1
        return real_new(st)

    def extend(*args: Any) -> bytes:
        counts["extend"] += 1
        return real_extend(*args)

    monkeypatch.setattr(jsonl_columns, "new_columns", new)
    monkeypatch.setattr(jsonl_columns, "extend", extend)
    return counts


def _leaves(path: str, rng: random.Random) -> list[str | None]:
    ids = [e["id"] for e in read_session_file(path).entries[1:]]
    return [None, *rng.sample(ids, min(6, len(ids)))]


@pytest.mark.parametrize(("size", "seed"), [(1500, 2), (2000, 4), (4000, 3)])
def test_realistic_sessions_equal_the_full_reader_at_any_leaf(tmp_path: Path, size: int, seed: int) -> None:
    path = str(tmp_path / "s.jsonl")
    gen_realistic.generate(path, size, seed=seed)
    text = Path(path).read_bytes()
    assert b'"compaction"' in text and b'"branch_summary"' in text and b'"context_edit"' in text
    for leaf in _leaves(path, random.Random(seed)):
        assert from_columns(path, leaf) == full_reader(path, leaf), leaf


def _regular_generated(tmp_path: Path, count: int) -> list[tuple[Path, Any]]:
    found = []
    for seed in range(400):
        g = sessiongen.generate(seed)
        if not g.valid or g.kind != "v3":
            continue
        path = g.write(tmp_path)
        view = indexed_columns(str(path))
        if view is not None:
            view.close()
            found.append((path, g))
        if len(found) == count:
            break
    return found


def test_generated_edge_sessions_equal_the_full_reader(tmp_path: Path) -> None:
    """The differential generator's v3 sessions that the columns accept (system messages, edits
    of every shape, retain-none compactions, custom messages, odd model and thinking entries)."""
    sessions = _regular_generated(tmp_path, 40)
    assert len(sessions) == 40
    for path, g in sessions:
        ids = {e.get("id") for e in read_session_file(str(path)).entries}
        leaves = [leaf for leaf in g.leaves if isinstance(leaf, str) and leaf in ids][:4]
        for leaf in [None, *leaves]:
            assert from_columns(str(path), leaf) == full_reader(str(path), leaf), (g.seed, leaf)


def test_columns_describe_what_the_full_reader_builds(tmp_path: Path) -> None:
    path = str(tmp_path / "s.jsonl")
    gen_realistic.generate(path, 2000, seed=5)
    index = EntryIndex()
    index.load(read_session_file(path).entries)
    view = indexed_columns(path)
    assert view is not None
    with view:
        n = len(index)
        assert view.ids == index.ids_of(range(n))
        assert [p if p >= 0 else None for p in view.parents] == index.parent_positions()
        assert [view.kind_names[k] for k in view.kinds] == index.types_of(range(n))
        assert view.lines(list(range(n))) == Path(path).read_bytes().split(b"\n")[1:-1]


def test_warm_call_reads_only_the_cache_and_the_context_lines(tmp_path: Path, calls: dict[str, int],
                                                          settled: None) -> None:
    path = str(tmp_path / "s.jsonl")
    gen_realistic.generate(path, 3000, seed=7)
    cold = from_columns(path)
    assert os.path.exists(cols_file(path)) and calls == {"new": 1, "extend": 1}
    warm = from_columns(path)
    assert warm == cold == full_reader(path)
    assert calls == {"new": 1, "extend": 1}  # unchanged file: the cache was used as it is


def test_index_off_builds_in_memory_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PICONTEXT_INDEX", "0")
    path = str(tmp_path / "s.jsonl")
    gen_realistic.generate(path, 800, seed=8)
    assert from_columns(path) == full_reader(path)
    assert not os.path.exists(cols_file(path))


def _manager_session(tmp_path: Path) -> SessionManager:
    sm = SessionManager.create("/w", str(tmp_path))
    sm.append_model_change("p", "m")
    for i in range(20):
        sm.append_message({"role": "user", "content": f"question {i}", "timestamp": i})
        sm.append_message({"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}], "api": "a",
                           "provider": "p", "model": "m", "usage": {}, "stopReason": "stop", "timestamp": i})
    return sm


def test_appends_extend_the_columns_and_are_projected(tmp_path: Path, calls: dict[str, int]) -> None:
    sm = _manager_session(tmp_path)
    path = sm.get_session_file()
    assert path is not None
    assert from_columns(path) == full_reader(path)
    branch = sm.get_branch()
    label_target = branch[-3]["id"]
    sm.append_compaction("summary so far", branch[-6]["id"], 1234)
    sm.append_label_change(label_target, "here")
    user = sm.append_message({"role": "user", "content": "after the compaction", "timestamp": 99})
    sm.append_context_edit(user, {"content": "edited"})
    sm.append_thinking_level_change("high")
    sm.branch(branch[-2]["id"])
    sm.branch_with_summary(branch[-2]["id"], "left a branch")
    sm.append_message({"role": "user", "content": "on the new branch", "timestamp": 100})
    assert from_columns(path) == full_reader(path)
    assert from_columns(path, user) == full_reader(path, user)
    assert calls["new"] == 1 and calls["extend"] >= 2  # extended, never rebuilt


def test_truncated_by_hand_is_rebuilt(tmp_path: Path, calls: dict[str, int]) -> None:
    path = str(tmp_path / "s.jsonl")
    gen_realistic.generate(path, 1500, seed=9)
    assert from_columns(path) == full_reader(path)
    data = Path(path).read_bytes()
    cut = data.rfind(b"\n", 0, len(data) * 2 // 3) + 1
    Path(path).write_bytes(data[:cut])  # same file, shorter: the columns describe lines that are gone
    assert from_columns(path) == full_reader(path)
    assert calls["new"] == 2


def test_rewritten_with_the_same_size_is_rebuilt(tmp_path: Path, calls: dict[str, int]) -> None:
    sm = _manager_session(tmp_path)
    path = sm.get_session_file()
    assert path is not None
    before = from_columns(path)
    data = Path(path).read_bytes()
    Path(path).write_bytes(data.replace(b"answer 19", b"ANSWER 19"))
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 5_000_000))
    after = from_columns(path)
    assert after != before and after == full_reader(path) and b"ANSWER 19" in after
    assert calls["new"] == 2


def test_only_a_timestamp_moved_is_checked_and_recorded_again_not_rebuilt(
        tmp_path: Path, calls: dict[str, int], settled: None) -> None:
    """`touch` or `chmod`: the stat differs, the covered bytes hash as recorded, so the columns
    are kept, recorded with the new stat and written back; the next call uses them as they are."""
    path = str(tmp_path / "s.jsonl")
    gen_realistic.generate(path, 1200, seed=16)
    expected = from_columns(path)
    assert calls == {"new": 1, "extend": 1}
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 7_000_000_000))
    os.chmod(path, 0o640)
    assert from_columns(path) == expected
    assert calls == {"new": 1, "extend": 2}  # checked against every covered byte, nothing added
    data = jsonl_columns.read_columns(os.path.realpath(path), os.stat(path))
    with open(path, "rb") as f:
        assert data is not None and data.unchanged(os.fstat(f.fileno()), f.fileno())  # written back
    assert from_columns(path) == expected
    assert calls == {"new": 1, "extend": 2}  # the cache alone


def test_a_file_whose_ctime_is_ahead_of_the_clock_is_checked_every_time(
        tmp_path: Path, calls: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """A ctime this machine's clock has not reached (a network server's clock running ahead):
    the cache is never recorded as settled, so every call checks it against the covered bytes;
    never rebuilt, always the file's answer."""
    monkeypatch.setattr(jsonl_index, "clock_ns", lambda: time.time_ns() - 60_000_000_000)
    path = str(tmp_path / "s.jsonl")
    gen_realistic.generate(path, 900, seed=17)
    expected = full_reader(path)
    for _ in range(3):
        assert from_columns(path) == expected
    assert calls == {"new": 1, "extend": 3}


def test_replaced_by_another_file_is_rebuilt(tmp_path: Path, calls: dict[str, int]) -> None:
    path = str(tmp_path / "s.jsonl")
    gen_realistic.generate(path, 1200, seed=10)
    assert from_columns(path) == full_reader(path)
    other = str(tmp_path / "other.jsonl")
    gen_realistic.generate(other, 1600, seed=11)
    os.replace(other, path)
    assert from_columns(path) == full_reader(path)
    assert calls["new"] == 2


def test_torn_last_line_goes_to_the_full_reader_until_it_is_complete(tmp_path: Path, capsys: Any) -> None:
    sm = _manager_session(tmp_path)
    path = sm.get_session_file()
    assert path is not None
    from_columns(path)
    with open(path, "ab") as f:
        f.write(b'{"type":"message","id":"torn0001","parentId":null,"timestamp":"2026-01-0')
    assert loading.context_json_pieces(path, None) is None  # the columns never cover half a line
    expected = full_reader(path)
    assert b"torn0001" not in expected
    with open(path, "ab") as f:  # the writer finishes its line
        f.write(b'1T00:00:00.000Z","message":{"role":"user","content":"late","timestamp":5}}\n')
    assert from_columns(path) == full_reader(path)
    assert b'"late"' in from_columns(path)


def test_a_file_shrinking_under_the_columns_goes_to_the_full_reader(tmp_path: Path) -> None:
    path = str(tmp_path / "s.jsonl")
    gen_realistic.generate(path, 1000, seed=12)
    view = indexed_columns(path)
    assert view is not None
    with view:
        data = Path(path).read_bytes()
        with open(path, "r+b") as f:
            f.truncate(len(data) // 2)
        with pytest.raises(jsonl_columns.ColumnsOutdated):
            view.lines(list(range(len(view))))


IRREGULAR = {
    "duplicate id": [{"type": "message", "id": "a1", "parentId": None},
                     {"type": "message", "id": "a1", "parentId": "a1"}],
    "forward parent": [{"type": "message", "id": "a1", "parentId": "b2"},
                       {"type": "message", "id": "b2", "parentId": None}],
    "dangling parent": [{"type": "message", "id": "a1", "parentId": "zz"}],
    "numeric id": [{"type": "message", "id": 7, "parentId": None}],
    "missing id": [{"type": "message", "parentId": None}],
    "second header": [{"type": "session", "version": 3, "id": "s2"}],
    "not an object": [[1, 2]],
    "empty id": [{"type": "message", "id": "", "parentId": None}],
}


@pytest.mark.parametrize("case", sorted(IRREGULAR))
def test_irregular_files_go_to_the_full_reader(tmp_path: Path, case: str) -> None:
    sm = _manager_session(tmp_path)
    path = sm.get_session_file()
    assert path is not None
    with open(path, "ab") as f:
        for entry in IRREGULAR[case]:
            f.write(_json.dumps_line({**entry, "timestamp": "2026-01-01T00:00:00.000Z"} if isinstance(entry, dict)
                                     else entry))
    assert indexed_columns(path) is None
    assert loading.context_json_pieces(path, None) is None


def test_unparsable_line_and_legacy_versions_go_to_the_full_reader(tmp_path: Path) -> None:
    sm = _manager_session(tmp_path)
    path = sm.get_session_file()
    assert path is not None
    with open(path, "ab") as f:
        f.write(b"{not json\n")
    assert indexed_columns(path) is None
    v2 = tmp_path / "v2.jsonl"
    v2.write_bytes(b'{"type":"session","version":2,"id":"x","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n')
    assert indexed_columns(str(v2)) is None


def test_blank_and_falsy_lines_are_skipped_as_pi_skips_them(tmp_path: Path) -> None:
    sm = _manager_session(tmp_path)
    path = sm.get_session_file()
    assert path is not None
    with open(path, "ab") as f:
        f.write(b"\n   \nnull\n0\nfalse\n\"\"\n")
    sm2 = SessionManager.open(path)
    sm2.append_message({"role": "user", "content": "after blanks", "timestamp": 50})
    assert from_columns(path) == full_reader(path)
    assert b"after blanks" in from_columns(path)


def test_unknown_leaf_is_the_same_one_line_error(tmp_path: Path) -> None:
    sm = _manager_session(tmp_path)
    path = sm.get_session_file()
    assert path is not None
    with pytest.raises(loading.SessionOpenError, match="entry 'nope' not found"):
        loading.context_json_pieces(path, "nope")


@pytest.mark.parametrize("chunk", [97, 4096])
def test_small_read_chunks_give_the_same_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """Lines straddling chunk boundaries (and a header longer than a chunk) are read whole."""
    monkeypatch.setattr(jsonl_columns, "_CHUNK", chunk)
    path = str(tmp_path / "s.jsonl")
    gen_realistic.generate(path, 1500, seed=13)
    with open(path, "ab") as f:
        f.write(b"\n\nnull\n")  # skipped lines between entries
    sm = SessionManager.open(path)
    sm.append_message({"role": "user", "content": "after the gap", "timestamp": 1})
    index = EntryIndex()
    index.load(read_session_file(path).entries)
    view = indexed_columns(path)
    assert view is not None
    with view:
        assert view.ids == index.ids_of(range(len(index)))
        assert [p if p >= 0 else None for p in view.parents] == index.parent_positions()
    assert from_columns(path) == full_reader(path)


def test_an_append_the_columns_cannot_describe_marks_them_irregular(tmp_path: Path) -> None:
    sm = _manager_session(tmp_path)
    path = sm.get_session_file()
    assert path is not None
    assert from_columns(path) == full_reader(path)
    first = read_session_file(path).entries[1]
    with open(path, "ab") as f:  # a hand-merged line: an id the file already has
        f.write(_json.dumps_line({**first, "parentId": None}))
    assert loading.context_json_pieces(path, None) is None
    data = jsonl_columns.read_columns(os.path.realpath(path), os.stat(path))
    assert data is not None and not data.regular and data.ids == []  # remembered: no rescans
    assert loading.context_json_pieces(path, None) is None


def test_a_file_changed_after_validation_is_read_whole_before_anything_is_printed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "s.jsonl")
    gen_realistic.generate(path, 1200, seed=14)
    real = loading.indexed_columns

    def validated_then_changed(p: str) -> Any:
        view = real(p)
        data = Path(p).read_bytes()
        with open(p, "r+b") as f:  # same size, every line shifted by one byte
            f.write(b" " + data[:-1])
        return view

    monkeypatch.setattr(loading, "indexed_columns", validated_then_changed)
    assert loading.context_json_pieces(path, None) is None


def test_a_damaged_cache_is_never_trusted(tmp_path: Path) -> None:
    path = str(tmp_path / "s.jsonl")
    gen_realistic.generate(path, 1500, seed=15)
    expected = full_reader(path)
    assert from_columns(path) == expected
    real = os.path.realpath(path)
    data = jsonl_columns.read_columns(real, os.stat(path))
    assert data is not None
    # a parent cycle (which the file cannot have): the walk would never end
    parents = bytearray(data.parents)
    parents[-4:] = (len(data.ids) - 1).to_bytes(4, sys.byteorder, signed=True)
    jsonl_columns.write_columns(real, msgspec.structs.replace(data, parents=bytes(parents)))
    assert loading.context_json_pieces(path, None) is None  # the full reader prints it instead
    assert not os.path.exists(cols_file(path))  # and the next call rebuilds the cache
    assert from_columns(path) == expected
    # columns of different lengths, and bytes that are not msgpack: rebuilt, same output
    data = jsonl_columns.read_columns(real, os.stat(path))
    assert data is not None
    jsonl_columns.write_columns(real, msgspec.structs.replace(data, kinds=data.kinds[:-1]))
    assert jsonl_columns.read_columns(real, os.stat(path)) is None
    assert from_columns(path) == expected
    Path(cols_file(path)).write_bytes(b"\x93garbage")
    assert from_columns(path) == expected


def _lines_file(tmp_path: Path, entries: list[Any]) -> str:
    path = tmp_path / "s.jsonl"
    header = {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}
    path.write_bytes(b"".join(_json.dumps_line(e) for e in [header, *entries]))
    return str(path)


def _chain(messages: list[Any], kinds: list[str] | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        kind = kinds[i] if kinds else "message"
        entry: dict[str, Any] = {"type": kind, "id": f"m{i}", "parentId": out[-1]["id"] if out else None,
                                 "timestamp": "2026-01-01T00:00:00.000Z"}
        entry.update(message if kind != "message" else {"message": message})
        out.append(entry)
    return out


def _assistant(model: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": "a"}], "provider": "p", "model": model,
            "api": "x", "usage": {}, "stopReason": "stop", "timestamp": 1}


@pytest.mark.parametrize("after", [0, 3, 40, 3000])
def test_the_model_is_the_last_assistant_messages_however_far_back(tmp_path: Path, after: int) -> None:
    """The model comes from the last assistant message (or a later model change), read from the
    leaf back in growing batches: after 0, a few, and thousands of other messages."""
    others = [{"role": "user", "content": f"u{i}", "timestamp": 1} if i % 2 else
              {"role": "toolResult", "toolCallId": "c", "toolName": "t", "content": [], "isError": False,
               "timestamp": 1} for i in range(after)]
    messages = [{"provider": "p0", "modelId": "early"}, _assistant("old"), _assistant("m-last"), *others]
    path = _lines_file(tmp_path, _chain(messages, ["model_change", *["message"] * (len(messages) - 1)]))
    out = from_columns(path)
    assert out == full_reader(path)
    assert json.loads(out)["model"] == {"provider": "p", "modelId": "m-last"}


def test_no_assistant_message_and_odd_messages(tmp_path: Path) -> None:
    messages: list[Any] = [{"role": "user", "content": "u", "timestamp": 1}, "not an object", None, 5,
                           {"role": "assistant", "content": "x"}, {"content": "no role"}]
    path = _lines_file(tmp_path, _chain(messages))
    assert from_columns(path) == full_reader(path)
    # the last of duplicate "role" keys wins, as in JSON.parse: a user's message, no model
    dup = str(tmp_path / "dup.jsonl")
    Path(dup).write_bytes(b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}\n'
                          b'{"type":"message","id":"a","parentId":null,"timestamp":"t","message":'
                          b'{"role":"user","provider":"p","model":"m","content":"x","role":"assistant"}}\n'
                          b'{"type":"message","id":"b","parentId":"a","timestamp":"t","message":'
                          b'{"role":"assistant","provider":"p","model":"m2","content":"y","role":"user"}}\n')
    assert from_columns(dup) == full_reader(dup)
    assert json.loads(from_columns(dup))["model"] == {"provider": "p", "modelId": "m"}


def test_system_messages_kept_by_a_compaction_are_left_out(tmp_path: Path) -> None:
    system = {"role": "system", "content": "sys", "timestamp": 1}
    messages: list[Any] = [{"role": "user", "content": "u0", "timestamp": 1}, system, _assistant("m"),
                           {"role": "user", "content": "u1", "timestamp": 1}, system]
    entries = _chain(messages)
    entries.append({"type": "compaction", "id": "c1", "parentId": entries[-1]["id"], "timestamp": "t",
                    "summary": "so far", "firstKeptEntryId": "m1", "tokensBefore": 5})
    entries.append({"type": "message", "id": "after", "parentId": "c1", "timestamp": "t", "message": system})
    path = _lines_file(tmp_path, entries)
    out = from_columns(path)
    assert out == full_reader(path)
    roles = [m["role"] for m in json.loads(out)["messages"]]
    assert roles == ["compactionSummary", "assistant", "user", "system"]  # kept ones without system; after: kept


def test_a_model_change_after_the_last_assistant_message_wins(tmp_path: Path) -> None:
    messages: list[Any] = [_assistant("before"), {"provider": "q", "modelId": "changed"},
                           *[{"role": "user", "content": f"u{i}", "timestamp": 1} for i in range(30)]]
    path = _lines_file(tmp_path, _chain(messages, ["message", "model_change", *["message"] * 30]))
    out = from_columns(path)
    assert out == full_reader(path)
    assert json.loads(out)["model"] == {"provider": "q", "modelId": "changed"}

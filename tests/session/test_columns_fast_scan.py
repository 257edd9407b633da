"""The entry columns' fast scan (`jsonl_columns._Builder._add_dense`: one `decode_lines` call per
chunk when every line break is "}\\n{") builds exactly what the line-by-line scan builds, and on
regular files what the full reader builds: on Pi-shaped lines and on hostile ones (duplicate
keys, values spread over lines, two values on a line, blank and falsy lines, whitespace, torn
and malformed lines), at any chunk size."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from picontext.session import jsonl_columns, jsonl_index
from picontext.session.index import EntryIndex
from picontext.session.store import read_session_file

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import gen_realistic  # noqa: E402

HEADER = b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}\n'
IDS = ["a1", "b2", "c3", "d4", "e5", "f6", "g7", "h8", ""]
TYPES = ["message", "model_change", "compaction", "thinking_level_change", "custom", "session", 7, None]
ROLES = ["user", "assistant", "system", "toolResult", 1, None, ["assistant"], {"r": 1}]
FALSY = [b"null", b"0", b"false", b'""', b"0.0", b"-0"]
OTHER = [b"[1,2]", b'"text"', b"1", b"true", b"{not json", b'{"type":"message"', b"{}", b"{} {}", b"\x0b{}",
         b'{"type":"message","id":"z9","parentId":null,"x":"\xff"}']


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


KINDS = ["message", "model_change", "compaction", "thinking_level_change", "custom", "label"]
EDITS = ["dup_type", "dup_id", "dup_parent", "dup_role", "dup_message", "spaces", "cr", "lead_space", "blank",
         "falsy", "other", "split", "two", "torn", "odd_type", "odd_parent", "odd_message"]


@st.composite
def session_bytes(draw: st.DrawFn) -> bytes:
    """A clean chain of entries as Pi writes them (unique ids, parents earlier in the file, type
    first), then a few hostile edits: most files stay ones the columns can describe, so that a
    scan fooled by one odd line among good ones would show."""
    count = draw(st.integers(0, 30))
    lines: list[bytes] = []
    ids: list[str] = []
    for i in range(count):
        entry: dict[str, Any] = {"type": draw(st.sampled_from(KINDS)), "id": f"e{i}",
                                 "parentId": draw(st.sampled_from([None, *ids[-3:]])) if ids else None,
                                 "timestamp": "2026-01-01T00:00:00.000Z"}
        if entry["type"] == "message" or draw(st.integers(0, 4)) == 0:
            entry["message"] = {"role": draw(st.sampled_from(ROLES)), "content": draw(st.text(max_size=12)),
                                "usage": {"cost": 0.0036}}
        ids.append(entry["id"])
        lines.append(_dumps(entry))
    for _ in range(draw(st.integers(0, 3)) if lines else 0):
        at = draw(st.integers(0, len(lines) - 1))
        lines[at:at + 1] = _edit(lines[at], draw(st.sampled_from(EDITS)), draw)
    text = b"".join(line + b"\n" for line in lines)
    if draw(st.integers(0, 3)) == 0:
        text = text[: len(text) - draw(st.integers(0, 3))]  # an unterminated last line
    return HEADER + text


def _edit(line: bytes, edit: str, draw: st.DrawFn) -> list[bytes]:
    """One hostile change to an entry's line: the lines that replace it."""
    if edit == "dup_type":  # JSON.parse keeps the last of duplicate keys
        return [line[:-1] + b',"type":' + _dumps(draw(st.sampled_from([*KINDS, "session", 7]))) + b"}"]
    if edit == "dup_id":
        return [line[:-1] + b',"id":' + _dumps(draw(st.sampled_from([*IDS, "e0", "e1"]))) + b"}"]
    if edit == "dup_parent":
        return [line[:-1] + b',"parentId":' + _dumps(draw(st.sampled_from([None, "", "e0", "zz"]))) + b"}"]
    if edit == "dup_role" and b'"role":' in line:
        return [line.replace(b'"role":', b'"role":"assistant","role":', 1)]
    if edit == "dup_message":
        return [line[:-1] + b',"message":' + _dumps(draw(st.sampled_from([None, {"role": "assistant"}]))) + b"}"]
    if edit == "spaces":  # valid JSON, not JSON.stringify's shape
        return [line.replace(b",", b", ", 1).replace(b":", b" : ", 1)]
    if edit == "cr":
        return [line + b"\r"]
    if edit == "lead_space":
        return [b" " + line]
    if edit == "blank":
        return [line, draw(st.sampled_from([b"", b" ", b"\t", b"\r", b"  \t "]))]
    if edit == "falsy":
        return [line, draw(st.sampled_from(FALSY))]
    if edit == "other":
        return [line, draw(st.sampled_from(OTHER))]
    if edit == "split":  # one value over two lines: two lines JSON.parse refuses
        return line.replace(b',"', b',\n"', 1).split(b"\n")
    if edit == "two":  # two values on one line: a line JSON.parse refuses
        other = line.replace(b'"id":"', b'"id":"t', 1)
        return [line + draw(st.sampled_from([b"", b" ", b"\t"])) + other]
    if edit == "torn":
        return [line[: draw(st.integers(1, max(1, len(line) - 1)))]]
    if edit == "odd_type":
        return [line.replace(b'"type":', b'"type":' + _dumps(draw(st.sampled_from(TYPES))) + b',"x":', 1)]
    if edit == "odd_parent":
        return [line.replace(b'"parentId":', b'"parentId":' + _dumps(draw(st.sampled_from(["zz", 0, "", 3, ["e0"]])))
                             + b',"y":', 1)]
    if edit == "odd_message":
        return [line[:-1] + b',"message":' + _dumps(draw(st.sampled_from(["str", 5, [], {}, {"role": None}]))) + b"}"]
    return [line]


def _scan(path: str, *, dense: bool) -> tuple[jsonl_columns.EntryColumns, bytes]:
    st_ = os.stat(path)
    data = jsonl_columns.new_columns(st_)
    real = jsonl_columns._Builder._add_dense
    if not dense:
        jsonl_columns._Builder._add_dense = lambda self, block, start, cut: False  # type: ignore[method-assign]
    try:
        with open(path, "rb") as f:
            tail = jsonl_columns.extend(data, f, st_, jsonl_index.new_hasher())
    finally:
        jsonl_columns._Builder._add_dense = real  # type: ignore[method-assign]
    return data, tail


def _check(content: bytes, chunk: int) -> jsonl_columns.EntryColumns:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s.jsonl")
        Path(path).write_bytes(content)
        saved = jsonl_columns._CHUNK
        jsonl_columns._CHUNK = chunk
        try:
            fast, fast_tail = _scan(path, dense=True)
            slow, slow_tail = _scan(path, dense=False)
        finally:
            jsonl_columns._CHUNK = saved
        assert fast_tail == slow_tail
        assert fast == slow
        if fast.regular and fast.header_seen:
            index = EntryIndex()
            # the columns cover complete lines only: compare with the full reader over those
            Path(path).write_bytes(content[: fast.size])
            index.load(read_session_file(path).entries)
            n = len(index)
            view = jsonl_columns.ColumnView(fast, -1)
            assert view.ids == index.ids_of(range(n))
            assert [p if p >= 0 else None for p in view.parents] == index.parent_positions()
            assert [view.kind_names[k] for k in view.kinds] == index.types_of(range(n))
        return fast


@settings(max_examples=400, deadline=None)
@given(session_bytes(), st.sampled_from([16, 97, 1024, 2 * 1024 * 1024]))
def test_fast_scan_equals_the_line_by_line_scan_and_the_full_reader(content: bytes, chunk: int) -> None:
    _check(content, chunk)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(IDS[:-1]), min_size=1, max_size=30, unique=True),
       st.sampled_from([64, 4096, 2 * 1024 * 1024]))
def test_pi_shaped_sessions_are_regular_and_equal(ids: list[str], chunk: int) -> None:
    """Clean chains of Pi-shaped lines: always regular, and the same as the full reader."""
    lines = []
    parent = None
    for i, eid in enumerate(ids):
        message = {"role": ("user", "assistant", "system")[i % 3], "content": [{"type": "text", "text": "x"}]}
        lines.append(_dumps({"type": "message", "id": eid, "parentId": parent, "timestamp": "t", "message": message}))
        parent = eid
    fast = _check(HEADER + b"".join(line + b"\n" for line in lines), chunk)
    assert fast.regular and len(fast.ids) == len(ids)


HOSTILE = {
    # JSON.parse keeps the last of duplicate keys: a later "id" makes both lines the same entry
    "duplicate id key": [b'{"type":"message","id":"a1","parentId":null,"timestamp":"t"}',
                         b'{"type":"message","id":"b2","parentId":"a1","timestamp":"t","id":"a1"}'],
    # a later "parentId" wins: the parent is the one named last
    "duplicate parentId key": [b'{"type":"message","id":"a1","parentId":null,"timestamp":"t"}',
                               b'{"type":"message","id":"b2","parentId":null,"timestamp":"t"}',
                               b'{"type":"message","id":"c3","parentId":"b2","timestamp":"t","parentId":"a1"}'],
    # a later role wins
    "duplicate role key": [b'{"type":"message","id":"a1","parentId":null,"timestamp":"t",'
                           b'"message":{"role":"assistant","content":"x","role":"user"}}'],
    # two lines that are one value to a stream parser, and two values on one line
    "value over two lines": [b'{"type":"message","id":"a1","parentId":null,"timestamp":"t"}',
                             b'{"type":"message","id":"b2",', b'"parentId":"a1","timestamp":"t"}',
                             b'{"type":"message","id":"c3","parentId":"a1","timestamp":"t"}'
                             b'{"type":"message","id":"d4","parentId":"a1","timestamp":"t"}'],
    # the empty id: a parentId "" names no parent (Pi follows only a truthy parentId)
    "empty id": [b'{"type":"message","id":"","parentId":null,"timestamp":"t"}',
                 b'{"type":"message","id":"b2","parentId":"","timestamp":"t"}'],
    "blank lines": [b'{"type":"message","id":"a1","parentId":null,"timestamp":"t"}', b"", b"  ",
                    b'{"type":"message","id":"b2","parentId":"a1","timestamp":"t"}'],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_lines_give_what_the_full_reader_gives(case: str) -> None:
    _check(HEADER + b"".join(line + b"\n" for line in HOSTILE[case]), 2 * 1024 * 1024)


def test_pi_shaped_files_take_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A realistic session never falls back to the line-by-line scan (else the fast path is dead code)."""
    path = str(tmp_path / "s.jsonl")
    gen_realistic.generate(path, 3000, seed=3)
    calls = {"lines": 0}
    real = jsonl_columns._Builder._add_lines

    def counted(self: Any, pieces: list[bytes], offset: int) -> None:
        calls["lines"] += 1
        real(self, pieces, offset)

    monkeypatch.setattr(jsonl_columns._Builder, "_add_lines", counted)
    monkeypatch.setattr(jsonl_columns, "_CHUNK", 64 * 1024)
    fast, _ = _scan(path, dense=True)
    assert fast.regular and len(fast.ids) == 3000
    assert calls["lines"] == 0
    _scan(path, dense=False)
    assert calls["lines"] > 0  # (the counter counts)

"""What the export embeds (`page_data`) is the view (`view_data`) and its packed lines, whether the
entries' own facts are computed in a forked process or in this one; and a dropped entry shows the
preview `picontext dropped` gives it."""

from __future__ import annotations

import base64
import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
from viewer_sessions import EXAMPLE, sessiongen, write_big

from picontext.cli.loading import load_session
from picontext.session.dropped import dropped_entries
from picontext.viewer.model import page_data, view_data
from picontext.viewer.parallel import beside, can_fork


def _unpack(packed: bytes) -> bytes:
    return gzip.decompress(base64.b64decode(packed))


def _sessions(tmp_path: Path) -> list[Path]:
    gen = sessiongen()
    seeded = [gen.generate(seed) for seed in range(12)]
    files = [case.write(tmp_path) for case in seeded if case.valid]
    return [EXAMPLE, write_big(tmp_path / "big.jsonl", 1500, compact_every=400), _whitespace_session(tmp_path), *files]


def _whitespace_session(tmp_path: Path) -> Path:
    """A compacted user message whose first few hundred characters are mostly line breaks: the
    short preview (the start of the text) and `dropped`'s (the whole text) differ."""
    ts = "2026-03-02T09:14:05.000Z"

    def e(eid: str, parent: str | None, **fields: Any) -> dict[str, Any]:
        return {"id": eid, "parentId": parent, "timestamp": ts, **fields}

    def msg(role: str, content: Any) -> dict[str, Any]:
        return {"role": role, "content": content, "timestamp": 1}

    lines = [
        {"type": "session", "version": 3, "id": "019cae3d-5a1b-7c2e-9f10-4b3d2a1c0e90", "timestamp": ts, "cwd": "/tmp"},
        e("u1", None, type="message", message=msg("user", "start" + "\n" * 400 + "end of the text")),
        e("a1", "u1", type="message", message=msg("assistant", [{"type": "text", "text": "ok"}])),
        e("u2", "a1", type="message", message=msg("user", "next")),
        e("c1", "u2", type="compaction", summary="s", firstKeptEntryId="u2", tokensBefore=10),
        e("a2", "c1", type="message", message=msg("assistant", [{"type": "text", "text": "done"}])),
    ]
    path = tmp_path / "ws.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.parametrize("parallel", [False, True])
def test_page_data_is_the_view_and_its_packed_lines(parallel: bool, tmp_path: Path) -> None:
    for file in _sessions(tmp_path):
        expected_meta, expected_lines = view_data(load_session(str(file)).file_entries, file_name="f")
        meta, packed = page_data(load_session(str(file)).file_entries, file_name="f", parallel=parallel)
        assert meta == expected_meta, file
        assert _unpack(packed) == expected_lines, file


def test_dropped_entries_show_the_preview_dropped_gives_them(tmp_path: Path) -> None:
    checked = 0
    for file in _sessions(tmp_path):
        session = load_session(str(file))
        expected = {d.entry_id: (d.preview, d.chars) for d in dropped_entries(session.manager)}
        meta, _ = page_data(load_session(str(file)).file_entries, parallel=False)
        got = {meta["ids"][row[0]]: (meta["previews"][row[0]], row[3]) for row in meta["dropped"]}
        assert got == expected, file
        checked += len(got)
    assert checked > 100
    meta, _ = page_data(load_session(str(_whitespace_session(tmp_path))).file_entries, parallel=False)
    assert meta["previews"][meta["ids"].index("u1")] == "start end of the text"


def test_beside_runs_the_work_in_another_process() -> None:
    assert can_fork()  # Linux, and pytest runs the tests in one thread
    with beside(os.getpid, parallel=True) as result:
        assert result() != os.getpid()


def test_beside_runs_the_work_here_when_the_child_fails_or_when_not_parallel() -> None:
    parent = os.getpid()

    def only_here() -> int:
        if os.getpid() != parent:
            raise RuntimeError("fails in the child")
        return 7

    with beside(only_here, parallel=True) as result:
        assert result() == 7
    with beside(os.getpid, parallel=False) as result:
        assert result() == parent


def test_leaving_beside_without_the_result_reaps_the_child() -> None:
    with beside(lambda: b"x" * 10_000_000, parallel=True):
        pass
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)

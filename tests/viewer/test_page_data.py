"""What the export embeds (`page_data`) is the view (`view_data`) and its packed lines, whether the
entries' own facts are computed in a forked process or in this one; and a dropped entry shows the
preview `picontext dropped` gives it."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

from viewer_sessions import EXAMPLE, in_fresh_process, sessiongen, write_big

from picontext.cli.loading import load_session
from picontext.session.dropped import dropped_entries
from picontext.viewer.model import page_data, view_data


def _unpack(packed: bytes) -> bytes:
    return gzip.decompress(base64.b64decode(packed))


def _meta(path: Path, **options: Any) -> dict[str, Any]:
    """The meta `page_data` embeds, read back (its escapes are JSON's)."""
    meta, _ = page_data(load_session(str(path)).file_entries, parallel=False, **options)
    return json.loads(meta)  # type: ignore[no-any-return]


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


def test_page_data_is_the_view_and_its_packed_lines(tmp_path: Path) -> None:
    for file in _sessions(tmp_path):
        expected_meta, expected_lines = view_data(load_session(str(file)).file_entries, file_name="f")
        meta, packed = page_data(load_session(str(file)).file_entries, file_name="f", parallel=False)
        assert json.loads(meta) == expected_meta, file
        assert _unpack(packed) == expected_lines, file


def test_dropped_entries_show_the_preview_dropped_gives_them(tmp_path: Path) -> None:
    checked = 0
    for file in _sessions(tmp_path):
        session = load_session(str(file))
        expected = {d.entry_id: (d.preview, d.chars) for d in dropped_entries(session.manager)}
        meta = _meta(file)
        got = {meta["ids"][row[0]]: (meta["previews"][row[0]], row[3]) for row in meta["dropped"]}
        assert got == expected, file
        checked += len(got)
    assert checked > 100
    meta = _meta(_whitespace_session(tmp_path))
    assert meta["previews"][meta["ids"].index("u1")] == "start end of the text"


def test_beside_runs_the_work_in_another_process() -> None:
    out = in_fresh_process(
        "import os\n"
        "from picontext.viewer.parallel import beside, can_fork\n"
        "assert can_fork()\n"
        "with beside(os.getpid, parallel=True) as result:\n"
        "    print(result() != os.getpid())\n")
    assert out == "True\n"


def test_beside_returns_the_bytes_the_child_sends_out_of_band_as_views() -> None:
    """Bytes the child's result wraps in `pickle.PickleBuffer` (`sent`) are stored beside the
    pickle and come back as read-only views of the same bytes; computed here (the child failed),
    the result is the work's own, `sent` not applied."""
    out = in_fresh_process(
        "import os, pickle\n"
        "from picontext.viewer.parallel import beside\n"
        "parent = os.getpid()\n"
        "def work():\n"
        "    return {'a': b'x' * 3_000_000, 'b': bytes(range(256)), 'empty': b'', 'n': os.getpid() != parent}\n"
        "def sent(value):\n"
        "    return {k: pickle.PickleBuffer(v) if isinstance(v, bytes) else v for k, v in value.items()}\n"
        "with beside(work, parallel=True, sent=sent) as result:\n"
        "    got = result()\n"
        "print(sorted(type(v).__name__ for v in got.values()), got['n'], got['a'].readonly)\n"
        "print(bytes(got['a']) == b'x' * 3_000_000, bytes(got['b']) == bytes(range(256)), bytes(got['empty']))\n"
        "def fails():\n"
        "    if os.getpid() != parent:\n"
        "        os._exit(3)\n"
        "    return work()\n"
        "with beside(fails, parallel=True, sent=sent) as result:\n"
        "    print(sorted(type(v).__name__ for v in result().values()))\n")
    assert out == ("['bool', 'memoryview', 'memoryview', 'memoryview'] True True\n"
                   "True True b''\n"
                   "['bool', 'bytes', 'bytes', 'bytes']\n")


def test_leaving_beside_without_the_result_reaps_the_child() -> None:
    out = in_fresh_process(
        "import os\n"
        "from picontext.viewer.parallel import beside\n"
        "with beside(lambda: b'x' * 10_000_000, parallel=True):\n"
        "    pass\n"
        "try:\n"
        "    os.waitpid(-1, os.WNOHANG)\n"
        "except ChildProcessError:\n"
        "    print('no child left')\n")
    assert out == "no child left\n"


def test_beside_runs_the_work_here_when_the_child_fails_or_when_not_parallel() -> None:
    out = in_fresh_process(
        "import os\n"
        "from picontext.viewer.parallel import beside\n"
        "parent = os.getpid()\n"
        "def only_here():\n"
        "    if os.getpid() != parent:\n"
        "        raise RuntimeError('fails in the child')\n"
        "    return parent\n"
        "with beside(only_here, parallel=True) as result:\n"
        "    print(result() == parent)\n"
        "with beside(os.getpid, parallel=False) as result:\n"
        "    print(result() == parent)\n")
    assert out == "True\nTrue\n"


def test_a_forked_export_writes_the_same_page(tmp_path: Path) -> None:
    """In pytest's process other tests' threads may be running (then `beside` never forks):
    the forked path is compared in a fresh process."""
    files = [str(f) for f in _sessions(tmp_path)[:4]]
    out = in_fresh_process(
        "import sys\n"
        "from picontext.cli.loading import load_session\n"
        "from picontext.viewer.model import page_data\n"
        "from picontext.viewer.parallel import can_fork\n"
        "assert can_fork()\n"
        f"for f in {files!r}:\n"
        "    forked = page_data(load_session(f).file_entries, file_name='f', parallel=True)\n"
        "    here = page_data(load_session(f).file_entries, file_name='f', parallel=False)\n"
        "    print(forked == here)\n")
    assert out == "True\n" * len(files)


def test_beside_does_not_fork_a_process_with_other_threads() -> None:
    """A fork copies only the calling thread: a lock another thread holds would stay held in the
    child forever. With a second thread alive, the work runs in the process itself."""
    out = in_fresh_process(
        "import os, threading\n"
        "from picontext.viewer.parallel import beside\n"
        "stop = threading.Event()\n"
        "other = threading.Thread(target=stop.wait)\n"
        "other.start()\n"
        "with beside(os.getpid, parallel=True) as result:\n"
        "    print(result() == os.getpid())\n"
        "stop.set()\n"
        "other.join()\n")
    assert out == "True\n"


def test_the_tree_lists_every_entry_once_even_equal_non_object_entries(tmp_path: Path) -> None:
    """Pi keeps any non-falsy JSON value as an entry: two lines `5` are two entries (and, in
    Python, one object), each with its own row."""
    header = {"type": "session", "version": 3, "id": "019cae3d-5a1b-7c2e-9f10-4b3d2a1c0e91",
              "timestamp": "2026-03-02T09:14:05.000Z", "cwd": "/tmp"}
    user = {"type": "message", "id": "u1", "parentId": None, "timestamp": "2026-03-02T09:14:05.000Z",
            "message": {"role": "user", "content": "hi", "timestamp": 1}}
    path = tmp_path / "fives.jsonl"
    path.write_text("\n".join([json.dumps(header), "5", json.dumps(user), "5", "[1]"]) + "\n")
    meta = _meta(path)
    assert len(meta["ids"]) == 4
    assert sorted(meta["order"]) == [0, 1, 2, 3]


def test_the_export_forks_only_with_a_core_to_spare(monkeypatch: Any) -> None:
    """A loaded machine (1-minute load average at or above the core count) gets no fork: the
    forked half would wait for CPU like the rest (docs/viewer.md); no load average: fork."""
    import os

    from picontext.viewer import parallel

    cores = os.cpu_count() or 1
    monkeypatch.setattr(os, "getloadavg", lambda: (cores - 0.5, 0.0, 0.0))
    assert parallel.spare_core()
    monkeypatch.setattr(os, "getloadavg", lambda: (float(cores), 0.0, 0.0))
    assert not parallel.spare_core()

    def unavailable() -> tuple[float, float, float]:
        raise OSError

    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert parallel.spare_core()


def test_the_export_writes_in_pieces_the_page_render_page_bytes_makes(tmp_path: Path) -> None:
    """`picontext export` writes the page as the pieces that make it (`page_parts`,
    `render_page_parts`), never joined: the file must be exactly the joined page, lazily read
    sessions with compactions and edits, a whitespace-laden one, and to stdout as to a file."""
    import contextlib
    import io
    import os
    import sys

    from picontext.cli.export_cmds import write_export
    from picontext.cli.loading import read_session
    from picontext.session.migrations import migrate_to_current
    from picontext.viewer.page import render_page_bytes

    for file in _sessions(tmp_path)[:5]:
        out = tmp_path / "page.html"
        write_export(str(file), None, str(out))
        entries = read_session(str(file))[1].entries
        migrate_to_current(entries)
        meta, packed = page_data(entries, file_name=os.path.basename(file), parallel=False)
        expected = render_page_bytes(meta, b"", packed=packed)
        assert out.read_bytes() == expected, file
        captured = io.BytesIO()
        stdout = io.TextIOWrapper(captured)
        with contextlib.redirect_stdout(stdout):
            write_export(str(file), None, "-")
            sys.stdout.flush()
        assert captured.getvalue() == expected, file
        stdout.detach()

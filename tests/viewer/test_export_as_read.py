"""`picontext export` reads the session lazily and puts each entry's line into the page as the
file holds it (not written again); the page shows the same as from a fully parsed session. The
CLI process leaves without freeing the parsed session, and only the CLI process."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from viewer_sessions import EXAMPLE, in_fresh_process, sessiongen, write_big

from picontext.cli.loading import load_session, read_session
from picontext.session.migrations import migrate_to_current
from picontext.viewer.model import page_data


def _lines(packed: bytes) -> list[bytes]:
    return gzip.decompress(base64.b64decode(packed)).split(b"\n")


def _values(lines: list[bytes]) -> list[Any]:
    """What the page's script reads from each line (its text decoded as a browser does)."""
    return [json.loads(line.decode("utf-8", errors="replace")) for line in lines]


def _lazily(path: Path) -> list[Any]:
    _, result = read_session(str(path))
    migrate_to_current(result.entries)
    return result.entries


def _files(tmp_path: Path) -> list[Path]:
    gen = sessiongen()
    cases = [gen.generate(seed) for seed in range(40)]  # CRLF, invalid UTF-8, lone surrogates, v1/v2 ...
    return [EXAMPLE, write_big(tmp_path / "big.jsonl", 1200, compact_every=300),
            *(case.write(tmp_path) for case in cases if case.valid)]


def test_a_lazily_read_session_gives_the_page_of_a_fully_read_one(tmp_path: Path) -> None:
    as_read = 0
    for file in _files(tmp_path):
        full_meta, full_packed = page_data(load_session(str(file)).file_entries, file_name="f", parallel=False)
        meta, packed = page_data(_lazily(file), file_name="f", parallel=False)
        assert meta == full_meta, file
        lines, full_lines = _lines(packed), _lines(full_packed)
        assert _values(lines) == _values(full_lines), file
        as_read += lines != full_lines
    assert as_read > 5  # files not written the way JSON.stringify writes: their lines are as read


def test_the_page_holds_the_lines_as_the_file_holds_them(tmp_path: Path) -> None:
    """A file written with spaces after `:` and `,` (not JSON.stringify's format): its entries'
    lines are in the page byte for byte. Pi's own format gives the page of before, byte for byte."""
    header = {"type": "session", "version": 3, "id": "019cae3d-5a1b-7c2e-9f10-4b3d2a1c0e92",
              "timestamp": "2026-03-02T09:14:05.000Z", "cwd": "/tmp"}
    user = {"type": "message", "id": "u1", "parentId": None, "timestamp": "2026-03-02T09:14:05.000Z",
            "message": {"role": "user", "content": "caf\u00e9 1.0", "timestamp": 1}}
    label = {"type": "label", "id": "l1", "parentId": "u1", "timestamp": "2026-03-02T09:14:06.000Z",
             "targetId": "u1", "label": "x"}
    spaced = tmp_path / "spaced.jsonl"
    spaced.write_text("".join(json.dumps(v) + "\n" for v in (header, user, label)))  # ", " and ": ", \u00e9
    _, packed = page_data(_lazily(spaced), parallel=False)
    lines = _lines(packed)
    assert lines[0] == json.dumps(user).encode()  # the message line, as read
    assert lines[1] == json.dumps(label, separators=(",", ":")).encode()  # parsed by the reader: written again
    _, full = page_data(load_session(str(EXAMPLE)).file_entries, parallel=False)
    assert page_data(_lazily(EXAMPLE), parallel=False)[1] == full


def test_an_entry_named_by_another_entrys_id_shows_its_own_preview(tmp_path: Path) -> None:
    """Dropped rows find their tree row by the entry's id as text (as `dropped` reports ids):
    the entry with id 5 (a number) points at the entry with id "5". Both compacted, the row of
    "5" still shows its own preview (the later row wins)."""
    ts = "2026-03-02T09:14:05.000Z"

    def e(eid: Any, parent: Any, **fields: Any) -> dict[str, Any]:
        return {"id": eid, "parentId": parent, "timestamp": ts, **fields}

    def msg(role: str, content: Any) -> dict[str, Any]:
        return {"role": role, "content": content, "timestamp": 1}

    lines = [
        {"type": "session", "version": 3, "id": "019cae3d-5a1b-7c2e-9f10-4b3d2a1c0e93", "timestamp": ts, "cwd": "/"},
        e(5, None, type="message", message=msg("user", "first question")),
        e("a1", 5, type="message", message=msg("assistant", [{"type": "text", "text": "ok"}])),
        e("5", "a1", type="message", message=msg("user", "second question")),
        e("a2", "5", type="message", message=msg("assistant", [{"type": "text", "text": "fine"}])),
        e("u3", "a2", type="message", message=msg("user", "third")),
        e("c1", "u3", type="compaction", summary="s", firstKeptEntryId="u3", tokensBefore=10),
    ]
    path = tmp_path / "five.jsonl"
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    for entries in (_lazily(path), load_session(str(path)).file_entries):
        meta = json.loads(page_data(entries, parallel=False)[0])
        assert meta["ids"][:4] == ["5", "a1", "5", "a2"] and meta["branch"][:4] == [0, 1, 2, 3]
        assert [row[0] for row in meta["dropped"]] == [2, 1, 2, 3]  # the first row points at "5"
        assert meta["previews"][2] == "second question"
        assert meta["previews"][0] == "first question"


def test_only_a_process_that_ends_with_its_command_holds_data_to_the_end() -> None:
    out = in_fresh_process(
        "from picontext.cli import base\n"
        "print(base.hold_until_exit([1]), base.leaves_held_data())\n"  # main() called in-process
        "base.command_ends_process()\n"  # what main.run() declares
        "print(base.hold_until_exit([1]), base.leaves_held_data())\n")
    assert out == "False False\nTrue True\n"


def test_the_export_process_flushes_its_output_before_it_leaves(tmp_path: Path) -> None:
    """`picontext export` ends without teardown: what it wrote, to a file or to stdout, is whole."""
    session = write_big(tmp_path / "s.jsonl", 6000, compact_every=1500)  # forks: above _PARALLEL_FROM
    page = tmp_path / "s.html"
    to_file = subprocess.run([sys.executable, "-m", "picontext", "export", str(session), "-o", str(page)],
                             capture_output=True, text=True, timeout=300)
    assert to_file.returncode == 0 and to_file.stderr == f"wrote {page}\n", to_file.stderr
    to_stdout = subprocess.run([sys.executable, "-m", "picontext", "export", str(session), "-o", "-"],
                               capture_output=True, timeout=300)
    assert to_stdout.returncode == 0, to_stdout.stderr
    assert to_stdout.stdout == page.read_bytes()
    assert to_stdout.stdout.rstrip().endswith(b"</html>")
    meta, packed = page_data(load_session(str(session)).file_entries, file_name="s.jsonl", parallel=False)
    assert meta in to_stdout.stdout and packed in to_stdout.stdout  # the same page as in-process


def _side_branch(tmp_path: Path) -> Path:
    """A session whose leaf is on the second branch: u2's branch (u2, a2) is off it."""
    ts = "2026-03-02T09:14:05.000Z"

    def e(eid: str, parent: str | None, role: str, text: str) -> dict[str, Any]:
        return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts,
                "message": {"role": role, "content": text if role == "user" else [{"type": "text", "text": text}],
                            "timestamp": 1}}

    lines = [{"type": "session", "version": 3, "id": "019cae3d-5a1b-7c2e-9f10-4b3d2a1c0e93", "timestamp": ts,
              "cwd": "/tmp"},
             e("u1", None, "user", "first"), e("a1", "u1", "assistant", "one"),
             e("u2", "a1", "user", "left"), e("a2", "u2", "assistant", "left answer"),
             e("u3", "a1", "user", "right"), e("a3", "u3", "assistant", "right answer")]
    path = tmp_path / "side.jsonl"
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    return path


def test_the_entries_own_facts_do_not_keep_entries_off_the_branch_parsed(tmp_path: Path) -> None:
    """Only the walk keeps what it parses (the branch): the facts of every entry parse the others
    one at a time and let them go, so the forked worker, which computes them, never holds a
    second parsed session (and the page is the same)."""
    path = _side_branch(tmp_path)
    kept: list[Any] = []
    meta, packed = page_data(_lazily(path), file_name="f", parallel=False, keep=kept)
    assert (meta, packed) == page_data(load_session(str(path)).file_entries, file_name="f", parallel=False)
    index = kept[0].index
    parsed = [isinstance(entry, dict) for entry in index.entries]
    # u1 a1 | u2 (parsed for its timestamp: the tree sorts a1's children) a2 | u3 a3 (the branch)
    assert parsed == [True, True, True, False, True, True]


def test_a_lazily_read_session_gives_the_same_page_forked_or_not(tmp_path: Path) -> None:
    """The worker parses the lazily read entries itself (the fork comes before any is parsed)."""
    files = [str(f) for f in [*_files(tmp_path)[:8], _side_branch(tmp_path)]]
    out = in_fresh_process(
        "from picontext.cli.loading import read_session\n"
        "from picontext.session.migrations import migrate_to_current\n"
        "from picontext.viewer.model import page_data\n"
        "from picontext.viewer.parallel import can_fork\n"
        "assert can_fork()\n"
        "def lazily(f):\n"
        "    entries = read_session(f)[1].entries\n"
        "    migrate_to_current(entries)\n"
        "    return entries\n"
        f"for f in {files!r}:\n"
        "    forked = page_data(lazily(f), file_name='f', parallel=True)\n"
        "    here = page_data(lazily(f), file_name='f', parallel=False)\n"
        "    print(forked == here)\n")
    assert out == "True\n" * len(files)

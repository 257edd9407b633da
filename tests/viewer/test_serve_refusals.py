"""`picontext serve`: a port out of range is one line, `::1` binds, a type-confused session is
served, and a symbolic link that leaves the session directory is neither listed nor served."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from inprocess import run_main

from picontext.session.listing import list_all_sessions
from picontext.viewer.server import ViewerServer, session_key

TS = "2026-01-01T00:00:00.000Z"


def session(path: Path, sid: str, text: str, *extra: dict[str, object]) -> Path:
    lines = [{"type": "session", "version": 3, "id": sid, "timestamp": TS, "cwd": "/p"},
             {"type": "message", "id": "a", "parentId": None, "timestamp": TS,
              "message": {"role": "user", "content": text, "timestamp": 1}}, *extra]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_a_port_out_of_range_is_one_line(port: str, tmp_path: Path) -> None:
    result = run_main("serve", "--dir", str(tmp_path), "--port", port)
    assert result.returncode == 2
    assert result.stderr == f"picontext: --port must be 0 to 65535 (0 picks a free one), not {port}\n"


def test_an_unknown_host_is_one_line(tmp_path: Path) -> None:
    result = run_main("serve", "--dir", str(tmp_path), "--host", "no-such-host.invalid", "--port", "0")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("picontext: cannot listen on no-such-host.invalid:0: ")


def test_serve_binds_the_ipv6_loopback(tmp_path: Path) -> None:
    session(tmp_path / "s.jsonl", "s1", "hello over IPv6")
    proc = subprocess.Popen([sys.executable, "-m", "picontext", "serve", "--dir", str(tmp_path), "--host", "::1",
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("picontext viewer on http://[::1]:"), first + (proc.stderr.read() if proc.stderr
                                                                               else "")
        url = first.split(" on ", 1)[1].split(" ", 1)[0]
        listing = httpx.get(url)
        assert listing.status_code == 200 and "hello over IPv6" in listing.text
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ViewerServer, Path]]:
    directory = tmp_path / "sessions"
    directory.mkdir()
    server = ViewerServer(lambda: list_all_sessions(str(directory)), str(directory))
    server.start()
    try:
        yield server, directory
    finally:
        server.close()


def test_a_type_confused_session_is_served(served: tuple[ViewerServer, Path]) -> None:
    """An entry whose `type` is a list dropped the page's connection."""
    server, directory = served
    path = session(directory / "confused.jsonl", "s1", "hi", {"type": ["x"], "id": "b", "parentId": "a",
                                                               "timestamp": TS})
    base = f"http://127.0.0.1:{server.port}"
    key = session_key(str(path))
    page = httpx.get(f"{base}/view/{key}")
    assert page.status_code == 200 and "<html" in page.text.lower()
    data = httpx.get(f"{base}/api/view/{key}")
    assert data.status_code == 200 and data.json()["meta"]["ids"] == ["a", "b"]


def test_a_link_leaving_the_directory_is_not_listed_or_served(served: tuple[ViewerServer, Path],
                                                              tmp_path: Path) -> None:
    server, directory = served
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    secret = session(outside / "secret.jsonl", "s-secret", "another user's secret")
    session(directory / "mine.jsonl", "s-mine", "my session")
    (directory / "leaving.jsonl").symlink_to(secret)
    (directory / "staying.jsonl").symlink_to(directory / "mine.jsonl")
    base = f"http://127.0.0.1:{server.port}"
    listing = httpx.get(base + "/").text
    assert "my session" in listing and "secret" not in listing
    assert listing.count('class="session"') == 2  # mine.jsonl and the link to it
    assert httpx.get(f"{base}/view/{session_key(str(directory / 'leaving.jsonl'))}").status_code == 404
    assert httpx.get(f"{base}/api/view/{session_key(str(directory / 'leaving.jsonl'))}").status_code == 404
    assert httpx.get(f"{base}/view/{session_key(str(directory / 'staying.jsonl'))}").status_code == 200


def test_a_failure_inside_the_viewer_is_answered(tmp_path: Path) -> None:
    """Whatever goes wrong while building a page, the request gets an answer (500), never a
    dropped connection."""
    from picontext.viewer.server import FileSource

    class Broken(FileSource):
        def view(self, location: str) -> tuple[dict[str, object], list[bytes]]:
            raise RuntimeError("a bug")

    path = session(tmp_path / "s.jsonl", "s1", "hi")
    server = ViewerServer(lambda: list_all_sessions(str(tmp_path)), str(tmp_path), source=Broken())
    server.start()
    try:
        answer = httpx.get(f"http://127.0.0.1:{server.port}/view/{session_key(str(path))}")
        assert answer.status_code == 500 and answer.text == "cannot show the session: RuntimeError\n"
    finally:
        server.close()
